//===- HybridPatternTest.cpp - the hybrid layer pattern parser ------------===//
#include "core/lang/HybridPattern.h"
#include "test/unit/TestHelpers.h"

namespace hypipe {
namespace {

using testing::expectSourceError;

TEST(HybridPattern, SplitsSegmentsAndMtp) {
  auto p = parseHybridPattern("M-M*|M-M-/*E/*E");
  ASSERT_TRUE(static_cast<bool>(p)) << toString(p.takeError());
  EXPECT_EQ(p->segments, (std::vector<std::string>{"M-M*", "M-M-"}));
  EXPECT_EQ(p->segmentOffsets, (std::vector<size_t>{0, 5}));
  EXPECT_EQ(p->layers(), "M-M*M-M-");
  EXPECT_EQ(p->mtp, "*E");
  EXPECT_EQ(p->mtpDepths, 2);
  EXPECT_EQ(p->mtpOffset, 10u);
  EXPECT_EQ(p->layerCounts()['E'], 2);
  EXPECT_EQ(p->layerCounts()['M'], 4);
}

TEST(HybridPattern, BadSymbolPointsAtIt) {
  Problem e = expectSourceError(parseHybridPattern("M*Mx-"));
  EXPECT_EQ(e.offset, 3u);
  EXPECT_NE(e.message.find("'x' is not a layer symbol"), std::string::npos)
      << e.message;
  EXPECT_NE(e.help.find("M (Mamba-2)"), std::string::npos);
}

TEST(HybridPattern, NonPrintableSymbolIsShownAsByte) {
  Problem e =
      expectSourceError(parseHybridPattern(std::string_view("M\0M", 3)));
  EXPECT_EQ(e.offset, 1u);
  EXPECT_NE(e.message.find("byte 0x00"), std::string::npos) << e.message;
}

// A pasted Unicode minus (U+2212) is named whole, with its code point and
// the ASCII symbol it looks like; the error spans its three bytes. A
// character like no symbol is named without a guess, and a broken UTF-8
// sequence stays a byte.
TEST(HybridPattern, CharacterPastAsciiIsNamed) {
  Problem e = expectSourceError(parseHybridPattern("M\xe2\x88\x92M"));
  EXPECT_EQ(e.offset, 1u);
  EXPECT_EQ(e.length, 3u);
  EXPECT_NE(e.message.find("'\xe2\x88\x92' (U+2212) is not a layer symbol"),
            std::string::npos)
      << e.message;
  EXPECT_NE(e.help.find("it looks like '-': type the ASCII '-'"),
            std::string::npos)
      << e.help;
  Problem accent = expectSourceError(parseHybridPattern("M\xc3\xa9"));
  EXPECT_NE(accent.message.find("(U+00E9)"), std::string::npos);
  EXPECT_EQ(accent.help.find("looks like"), std::string::npos);
  Problem cut = expectSourceError(parseHybridPattern("M\xe2\x88"));
  EXPECT_NE(cut.message.find("byte 0xe2"), std::string::npos) << cut.message;
  EXPECT_EQ(cut.length, 1u);
}

TEST(HybridPattern, PipeInMtpPartIsRejected) {
  Problem e = expectSourceError(parseHybridPattern("MM/M|M/M|M"));
  EXPECT_EQ(e.offset, 4u);
}

TEST(HybridPattern, MismatchedMtpPartPointsAtThatPart) {
  Problem e = expectSourceError(parseHybridPattern("M*M*/MM/M*"));
  EXPECT_EQ(e.offset, 8u);
  EXPECT_EQ(e.length, 2u);
}

TEST(HybridPattern, AttentionWithMlaPointsAtTheLaterOne) {
  Problem e = expectSourceError(parseHybridPattern("M+M*-"));
  EXPECT_EQ(e.offset, 3u);
}

TEST(HybridPlacement, SegmentsGoVpMajor) {
  auto p = parseHybridPattern("ME|M*|E-|*M|MM|E*");
  ASSERT_TRUE(static_cast<bool>(p));
  auto placement =
      placeHybridPattern(*p, {3, std::nullopt, std::nullopt, std::nullopt});
  ASSERT_TRUE(static_cast<bool>(placement)) << toString(placement.takeError());
  EXPECT_EQ(placement->vpp, 2);
  EXPECT_EQ(placement->stages[4].ppRank, 1);
  EXPECT_EQ(placement->stages[4].vpStage, 1);
  EXPECT_EQ(placement->stages[4].layerNumbers, (std::vector<int64_t>{9, 10}));
}

TEST(HybridPlacement, ExplicitVppMustMatchSegments) {
  auto p = parseHybridPattern("M|M|M|M");
  ASSERT_TRUE(static_cast<bool>(p));
  Problem e = expectSourceError(
      placeHybridPattern(*p, {2, 4, std::nullopt, std::nullopt}));
  EXPECT_NE(e.message.find("pp * vpp = 2 * 4 = 8"), std::string::npos)
      << e.message;
  EXPECT_NE(e.help.find("vpp=2"), std::string::npos) << e.help;
}

TEST(HybridPlacement, UnevenSplitBoundsAreChecked) {
  auto p = parseHybridPattern("MMMM");
  ASSERT_TRUE(static_cast<bool>(p));
  Problem e =
      expectSourceError(placeHybridPattern(*p, {2, std::nullopt, 3, 3}));
  EXPECT_NE(e.message.find("exceed"), std::string::npos) << e.message;
  e = expectSourceError(placeHybridPattern(*p, {2, std::nullopt, 1, 1}));
  EXPECT_NE(e.message.find("add up"), std::string::npos) << e.message;
  e = expectSourceError(
      placeHybridPattern(*p, {1, std::nullopt, 1, std::nullopt}));
  EXPECT_NE(e.message.find("need pp > 1"), std::string::npos) << e.message;
}

TEST(HybridPlacement, OutOfRangeLookupIsAnError) {
  auto p = parseHybridPattern("M|M");
  ASSERT_TRUE(static_cast<bool>(p));
  auto placement =
      placeHybridPattern(*p, {2, std::nullopt, std::nullopt, std::nullopt});
  ASSERT_TRUE(static_cast<bool>(placement));
  auto stage = placement->stage(0, 1);
  EXPECT_FALSE(static_cast<bool>(stage));
  EXPECT_FALSE(stage.problem().message.empty());
  EXPECT_TRUE(static_cast<bool>(placement->stage(1, 0)));
}

TEST(RatioAllocation, RejectsImpossibleRatios) {
  auto r = patternFromRatios(10, 0.7, 0.5);
  EXPECT_FALSE(static_cast<bool>(r));
  EXPECT_FALSE(r.problem().message.empty());
  r = patternFromRatios(0, 0.1, 0.1);
  EXPECT_FALSE(static_cast<bool>(r));
  EXPECT_FALSE(r.problem().message.empty());
}

} // namespace
} // namespace hypipe
