//===- FusedAttentionTest.cpp - cuDNN's fused attention, without a GPU ----===//
//
// What can be checked of the fused attention path on a machine with cuDNN
// but no GPU: the dims, strides and ragged offsets it tells cuDNN address
// exactly hypipe's packed token-major tensors, and cuDNN's own validation
// (the frontend's graph checks, for a Hopper GPU) takes the forward and
// backward graphs of the shapes hypipe runs -- grouped-query, multi-head,
// multi-query, packed -- and refuses, with its reason, what it has no kernel
// for (head dims, an Ampere GPU's ragged backward). Running the graphs is the
// GPU kit's (attention:fused).
//
//===----------------------------------------------------------------------===//

#include "runtime/kernels/cuda/FusedAttention.h"
#include "runtime/kernels/cuda/QkvColumns.h"

#include <gtest/gtest.h>

#include <vector>

using namespace hypipe::rt::cuda::fused;

namespace {

/// Three packed sequences of 5, 7 and 18 tokens.
const std::vector<int64_t> kFirstRows = {0, 5, 12, 30};

Problem packedProblem(int64_t heads, int64_t groups, int64_t headDim) {
  Problem p;
  p.sequences = int64_t(kFirstRows.size()) - 1;
  p.tokens = kFirstRows.back();
  p.maxLength = 18;
  p.heads = heads;
  p.groups = groups;
  p.headDim = headDim;
  p.scale = 1.0f / 8.0f;
  return p;
}

/// Every element [b, h, s, d] of a layout, for s inside sequence b, is at
/// `expected(row, h, d)` of the token-major tensor (row = the token's row),
/// and no two elements share an address.
template <typename Expected>
void expectAddresses(const Layout &l, int64_t heads, int64_t width,
                     Expected expected) {
  std::vector<int> hits(size_t(kFirstRows.back() * heads * width), 0);
  for (size_t b = 0; b + 1 < kFirstRows.size(); ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t s = 0; s < kFirstRows[b + 1] - kFirstRows[b]; ++s)
        for (int64_t d = 0; d < width; ++d) {
          const int64_t address = kFirstRows[b] * l.offsetPerToken +
                                  h * l.strides[1] + s * l.strides[2] +
                                  d * l.strides[3];
          ASSERT_EQ(address, expected(kFirstRows[b] + s, h, d))
              << "b " << b << " h " << h << " s " << s << " d " << d;
          ++hits[size_t(address)];
        }
  for (int n : hits)
    EXPECT_EQ(n, 1);
}

} // namespace

TEST(FusedAttentionLayout, QueriesKeysValuesAndStatsAddressThePackedTensors) {
  const Problem p = packedProblem(/*heads=*/4, /*groups=*/2, /*headDim=*/8);
  const Layout q = queryLayout(p), kv = keyValueLayout(p), st = statsLayout(p);
  // Three sequences in a graph of four (the fourth empty), up to 64 long.
  EXPECT_EQ(q.dims, (std::array<int64_t, 4>{4, 4, 64, 8}));
  EXPECT_EQ(kv.dims, (std::array<int64_t, 4>{4, 2, 64, 8}));
  EXPECT_EQ(st.dims, (std::array<int64_t, 4>{4, 4, 64, 1}));
  expectAddresses(q, 4, 8, [](int64_t row, int64_t h, int64_t d) {
    return (row * 4 + h) * 8 + d; // [T, heads, D]
  });
  expectAddresses(kv, 2, 8, [](int64_t row, int64_t g, int64_t d) {
    return (row * 2 + g) * 8 + d; // [T, groups, D]
  });
  expectAddresses(st, 4, 1, [](int64_t row, int64_t h, int64_t) {
    return row * 4 + h; // [T, heads]: the hand-written kernels' log-sum-exp
  });
}

TEST(FusedAttentionLayout, SplittingQkvPutsEveryColumnWhereTheKernelsReadIt) {
  // The hand-written kernels' offsets (cpu/Attention.cpp, cuda Heads):
  // query head h at (g (qpg + 2) + h % qpg) D, group g's key at
  // (g (qpg + 2) + qpg) D and its value D further.
  using hypipe::rt::cuda::qkvColumn;
  struct Case {
    int heads, groups, headDim;
  };
  for (Case c : {Case{8, 2, 4}, Case{4, 4, 8}, Case{6, 1, 2}}) {
    const int qpg = c.heads / c.groups, D = c.headDim;
    const int width = (c.heads + 2 * c.groups) * D;
    std::vector<int> seen(size_t(width), 0);
    auto expect = [&](int offset, int which, int head) {
      for (int d = 0; d < D; ++d) {
        const auto got = qkvColumn(c.heads, c.groups, D, offset + d);
        EXPECT_EQ(got.which, which) << "column " << offset + d;
        EXPECT_EQ(got.head, head) << "column " << offset + d;
        EXPECT_EQ(got.d, d) << "column " << offset + d;
        ++seen[size_t(offset + d)];
      }
    };
    for (int h = 0; h < c.heads; ++h)
      expect((h / qpg * (qpg + 2) + h % qpg) * D, 0, h);
    for (int g = 0; g < c.groups; ++g) {
      expect((g * (qpg + 2) + qpg) * D, 1, g);
      expect((g * (qpg + 2) + qpg) * D + D, 2, g);
    }
    for (int n : seen)
      EXPECT_EQ(n, 1); // every column once
  }
}

TEST(FusedAttentionLayout, GraphShapesRoundUpSoCloseCallsSharePlans) {
  EXPECT_EQ(graphLength(1), 64);
  EXPECT_EQ(graphLength(64), 64);
  EXPECT_EQ(graphLength(65), 128);
  EXPECT_EQ(graphLength(4096), 4096);
  EXPECT_EQ(graphSequences(1), 1);
  EXPECT_EQ(graphSequences(2), 2);
  EXPECT_EQ(graphSequences(3), 4);
  EXPECT_EQ(graphSequences(5), 8);
  EXPECT_EQ(graphSequences(64), 64);
  EXPECT_EQ(graphTokens(30), 256);
  EXPECT_EQ(graphTokens(4096), 4096);
  EXPECT_EQ(graphTokens(4097), 4352);
}

class FusedAttentionGraphs : public ::testing::Test {
protected:
  void SetUp() override {
    if (std::string missing = loadLibrary(); !missing.empty())
      GTEST_SKIP() << "no cuDNN 9 here: " << missing;
  }
};

TEST_F(FusedAttentionGraphs, CudnnTakesTheShapesHypipeRunsOnHopper) {
  struct Case {
    int64_t heads, groups, headDim;
  };
  for (Case c : {Case{16, 4, 128}, Case{8, 8, 64}, Case{8, 1, 64},
                 Case{32, 8, 128}, Case{4, 2, 32}}) {
    Problem p = packedProblem(c.heads, c.groups, c.headDim);
    EXPECT_EQ(validate(p, 90), "") << c.heads << " heads, " << c.groups
                                   << " groups, head dim " << c.headDim;
    p.sequences = 1; // one unpacked sequence of 4096 tokens
    p.tokens = p.maxLength = 4096;
    EXPECT_EQ(validate(p, 90), "") << "one sequence of 4096";
  }
}

TEST_F(FusedAttentionGraphs, WhatCudnnHasNoKernelForIsRefusedWithItsReason) {
  // Head dims off cuDNN's multiples of 8, or over its 256 on Hopper.
  EXPECT_NE(validate(packedProblem(8, 2, 12), 90).find("multiple of 8"),
            std::string::npos);
  EXPECT_NE(validate(packedProblem(8, 2, 520), 90).find("256"),
            std::string::npos);
  EXPECT_EQ(validate(packedProblem(8, 2, 256), 90), "");
  // Query heads not a multiple of the key/value groups.
  EXPECT_NE(validate(packedProblem(8, 3, 64), 90), "");
  // Offsets past int32 (2^20 tokens x 32 heads x 128): hypipe's refusal.
  Problem huge = packedProblem(32, 8, 128);
  huge.tokens = int64_t(1) << 20;
  EXPECT_NE(validate(huge, 90).find("int32"), std::string::npos);
  // An Ampere GPU has no backward for ragged softmax statistics: there the
  // hand-written kernels run bf16 attention (prepare() finds no plan).
  EXPECT_NE(validate(packedProblem(8, 2, 64), 80).find("SM8X"),
            std::string::npos);
}
