//===- GradientBucketsTest.cpp - when each gradient bucket is final -------===//
#include "runtime/exec/GradientBuckets.h"

#include <gtest/gtest.h>

namespace hypipe::rt {
namespace {

/// A stage of layers whose parameters lie one after another, `floats[i]`
/// for layer i, with the weight-gradient pass running them last first (as
/// the compiler orders a backward).
StageProgram stageOf(const std::vector<int64_t> &floats,
                     const std::vector<LayerKind> &kinds = {}) {
  StageProgram p;
  int64_t at = 0;
  for (size_t i = 0; i < floats.size(); ++i) {
    ProgramLayer l;
    l.kind = i < kinds.size() ? kinds[i] : LayerKind::Mlp;
    l.params = {at * 4, floats[i] * 4, DType::F32};
    at += floats[i];
    p.layers.push_back(l);
  }
  for (size_t i = floats.size(); i-- > 0;)
    p.backwardWeight.push_back({int32_t(i), Slot::None, Slot::None});
  return p;
}

// Layers of 10, 10 and 10 floats in buckets of 8: buckets 0-3 cover
// [0,8) [8,16) [16,24) [24,30). The pass runs layer 2 first: bucket 3 is
// only its; bucket 2 is also layer 1's, which runs next; buckets 1 and 0
// wait for layer 0, the last call.
TEST(GradientBuckets, ABucketStartsAfterTheLastCallWritingIt) {
  auto after = bucketsFinalAfter(stageOf({10, 10, 10}), 30, 8);
  ASSERT_EQ(after.size(), 4u);
  EXPECT_EQ(after[2], (std::vector<int64_t>{3}));
  EXPECT_EQ(after[1], (std::vector<int64_t>{2}));
  EXPECT_EQ(after[0], (std::vector<int64_t>{1, 0}));
  EXPECT_TRUE(after[3].empty());
}

// An MTP depth writes the output layer it shares with the head: the head's
// buckets wait for it, when it runs after the head.
TEST(GradientBuckets, SharedRangesWaitForEveryWriter) {
  StageProgram p = stageOf(
      {8, 8, 8}, {LayerKind::Mlp, LayerKind::Head, LayerKind::MtpOutput});
  p.sharedOutput = p.layers[1].params; // floats [8, 16)
  // Head (layer 1) first, then the MTP depth (2), then layer 0.
  p.backwardWeight = {{1, Slot::None, Slot::None},
                      {2, Slot::None, Slot::None},
                      {0, Slot::None, Slot::None}};
  auto after = bucketsFinalAfter(p, 24, 8);
  EXPECT_TRUE(after[1].empty());
  EXPECT_EQ(after[2], (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(after[0], (std::vector<int64_t>{0}));
}

// Every bucket starts exactly once, whatever the bucket size, and floats no
// call writes (past the layers) start after the pass.
TEST(GradientBuckets, EveryBucketOnce) {
  for (int64_t size : {1, 3, 7, 16, 64, 1000}) {
    auto after = bucketsFinalAfter(stageOf({5, 17, 1, 40}), 70, size);
    std::vector<int> seen((70 + size - 1) / size, 0);
    for (const auto &buckets : after)
      for (int64_t b : buckets)
        ++seen.at(size_t(b));
    for (int n : seen)
      EXPECT_EQ(n, 1) << "bucket size " << size;
    // Floats 63..69 belong to no layer.
    if (size == 7)
      EXPECT_EQ(after[4], (std::vector<int64_t>{9}));
  }
}

} // namespace
} // namespace hypipe::rt
