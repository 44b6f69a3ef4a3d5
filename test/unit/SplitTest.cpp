//===- SplitTest.cpp - --split parsing and megatron-core's split indices --===//
//
// The boundaries are checked against megatron-core itself for many splits and
// counts by test/cli/split.test; these cases pin the rules by hand.
//
//===----------------------------------------------------------------------===//
#include "core/data/Split.h"

#include <gtest/gtest.h>

using namespace hypipe;

namespace {

DataSplit parsed(std::string_view text) {
  Expected<DataSplit> split = parseSplit(text);
  EXPECT_TRUE(static_cast<bool>(split)) << text;
  return split ? *split : DataSplit{};
}

/// The problem `text` is refused with: its message and where it points.
Problem refusal(std::string_view text) {
  Expected<DataSplit> split = parseSplit(text);
  EXPECT_FALSE(static_cast<bool>(split)) << text;
  return split ? Problem{} : split.problem();
}

} // namespace

// Weights are normalised; missing ones are 0, as Megatron pads them.
TEST(Split, WeightsAreNormalisedAndPadded) {
  DataSplit s = parsed("969,30,1");
  EXPECT_DOUBLE_EQ(s.weights[0], 0.969);
  EXPECT_DOUBLE_EQ(s.weights[1], 0.030);
  EXPECT_DOUBLE_EQ(s.weights[2], 0.001);
  DataSplit two = parsed(" 1 , 3 ");
  EXPECT_DOUBLE_EQ(two.weights[0], 0.25);
  EXPECT_DOUBLE_EQ(two.weights[1], 0.75);
  EXPECT_EQ(two.weights[2], 0.0);
  EXPECT_FALSE(two.hasPart(SplitPart::Test));
  EXPECT_DOUBLE_EQ(parsed("0.5").weights[0], 1.0);
}

// The parts are contiguous and cover every document; a bookend rounds half
// to even (Python's round): 1,1 over 5 documents cuts at round(2.5) = 2,
// over 3 at round(1.5) = 2.
TEST(Split, RangesRoundBookendsHalfToEven) {
  DataSplit s = parsed("969,30,1");
  EXPECT_EQ(s.documentRange(SplitPart::Train, 1000),
            std::make_pair(int64_t(0), int64_t(969)));
  EXPECT_EQ(s.documentRange(SplitPart::Validation, 1000),
            std::make_pair(int64_t(969), int64_t(999)));
  EXPECT_EQ(s.documentRange(SplitPart::Test, 1000),
            std::make_pair(int64_t(999), int64_t(1000)));
  DataSplit half = parsed("1,1");
  EXPECT_EQ(half.documentRange(SplitPart::Train, 5).second, 2);
  EXPECT_EQ(half.documentRange(SplitPart::Validation, 5),
            std::make_pair(int64_t(2), int64_t(5)));
  EXPECT_EQ(half.documentRange(SplitPart::Train, 3).second, 2);
  // A part of weight 0 is empty (megatron-core builds no dataset for it).
  EXPECT_EQ(half.documentRange(SplitPart::Test, 5),
            std::make_pair(int64_t(0), int64_t(0)));
}

// Refused, each pointing at the bad weight: too many weights, an empty one,
// one that is not a number, a negative one (Megatron's parser would drop
// the sign), weights that are all 0 (Megatron would divide by 0).
TEST(Split, BadSplitsAreRefusedAtTheWeight) {
  Problem many = refusal("90,5,4,1");
  EXPECT_NE(many.message.find("more than 3 weights"), std::string::npos);
  EXPECT_EQ(many.offset, size_t(7));
  Problem empty = refusal("90,,10");
  EXPECT_NE(empty.message.find("empty weight"), std::string::npos);
  EXPECT_EQ(empty.offset, size_t(3));
  Problem word = refusal("90,ten");
  EXPECT_NE(word.message.find("'ten' is not a number"), std::string::npos);
  EXPECT_EQ(word.offset, size_t(3));
  EXPECT_EQ(word.length, 3u);
  Problem negative = refusal("99,-1");
  EXPECT_NE(negative.message.find("negative"), std::string::npos);
  EXPECT_EQ(negative.offset, size_t(3));
  EXPECT_NE(refusal("0,0,0").message.find("all 0"), std::string::npos);
  EXPECT_NE(refusal("inf,1").message.find("not a number"), std::string::npos);
  EXPECT_NE(refusal("").message.find("empty weight"), std::string::npos);
  EXPECT_FALSE(refusal("nan").help.empty());
}
