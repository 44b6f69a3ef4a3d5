//===- ShardLayoutTest.cpp - the distributed optimizer's per-bucket shards ===//
#include "core/model/ShardLayout.h"

#include <gtest/gtest.h>

#include <array>
#include <numeric>
#include <set>

namespace hypipe::rt {
namespace {

// 23 floats over dp 2 in buckets of 9 (rounded to 10, a multiple of dp):
// buckets [0,10) [10,20) [20,24), the last 3 floats padded to 4. Rank 1
// owns [5,10) [15,20) [22,24) and keeps them in its moments at 0, 5, 10.
TEST(ShardLayout, EachBucketIsCutIntoDpParts) {
  const ShardLayout l(23, 2, 1, 9);
  EXPECT_EQ(l.stride(), 10);
  EXPECT_EQ(l.buckets(), 3);
  EXPECT_EQ(l.bufferFloats(), 24);
  EXPECT_EQ(l.shardFloats(), 12);
  EXPECT_EQ(l.bucketFloats(2), 4);
  EXPECT_EQ(l.partFloats(0), 5);
  EXPECT_EQ(l.partFloats(2), 2);
  EXPECT_EQ(l.ownBegin(0), 5);
  EXPECT_EQ(l.ownBegin(1), 15);
  EXPECT_EQ(l.ownBegin(2), 22);
  EXPECT_EQ(l.momentBegin(0), 0);
  EXPECT_EQ(l.momentBegin(1), 5);
  EXPECT_EQ(l.momentBegin(2), 10);
}

// One bucket over the whole buffer is the shard a rank had before buckets
// cut it: ceil(n / dp) floats from rank x ceil(n / dp).
TEST(ShardLayout, OneBucketIsOneBlockPerRank) {
  for (int64_t n : {1, 7, 100, 101}) {
    for (int64_t dp : {2, 3, 4}) {
      const int64_t block = (n + dp - 1) / dp;
      for (int64_t r = 0; r < dp; ++r) {
        const ShardLayout l(n, dp, r, int64_t(1) << 30);
        EXPECT_EQ(l.buckets(), 1);
        EXPECT_EQ(l.bufferFloats(), block * dp);
        EXPECT_EQ(l.shardFloats(), block);
        EXPECT_EQ(l.ownBegin(0), r * block);
        EXPECT_EQ(l.momentBegin(0), 0);
      }
    }
  }
}

// The ranks' parts tile the buffer: every float in exactly one rank's part,
// every part inside its bucket, every moment index used once per rank.
TEST(ShardLayout, TheRanksPartsTileTheBuffer) {
  for (int64_t n : {1, 5, 64, 1000, 1001}) {
    for (int64_t dp : {1, 2, 3, 8}) {
      for (int64_t bucket : {1, 4, 7, 64, 5000}) {
        std::vector<int> owner(0);
        int64_t floats = -1;
        for (int64_t r = 0; r < dp; ++r) {
          const ShardLayout l(n, dp, r, bucket);
          if (floats < 0) {
            floats = l.bufferFloats();
            owner.assign(size_t(floats), -1);
            ASSERT_GE(floats, n);
            ASSERT_LT(floats - n, dp) << "padding is only the last bucket's";
          }
          std::set<int64_t> moments;
          for (int64_t b = 0; b < l.buckets(); ++b) {
            EXPECT_EQ(l.bucketFloats(b) % dp, 0);
            EXPECT_EQ(l.partBegin(b, r), l.ownBegin(b));
            for (int64_t i = 0; i < l.partFloats(b); ++i) {
              const int64_t at = l.ownBegin(b) + i;
              ASSERT_LT(at, floats);
              EXPECT_GE(at, l.bucketBegin(b));
              EXPECT_LT(at, l.bucketBegin(b) + l.bucketFloats(b));
              EXPECT_EQ(owner[size_t(at)], -1) << "float " << at;
              owner[size_t(at)] = int(r);
              EXPECT_TRUE(moments.insert(l.momentBegin(b) + i).second);
            }
          }
          EXPECT_EQ(int64_t(moments.size()), l.shardFloats());
          if (!moments.empty())
            EXPECT_EQ(*moments.rbegin(), l.shardFloats() - 1);
        }
        for (int64_t i = 0; i < floats; ++i)
          EXPECT_NE(owner[size_t(i)], -1)
              << "float " << i << " n " << n << " dp " << dp << " bucket "
              << bucket;
      }
    }
  }
}

// shardOf and wholeOf undo each other: the checkpoint's whole buffer from
// the ranks' moments, and each rank's moments from the checkpoint.
TEST(ShardLayout, ShardsGatherBackIntoTheWholeBuffer) {
  const int64_t n = 37, dp = 3, bucket = 8;
  const ShardLayout first(n, dp, 0, bucket);
  std::vector<float> whole(size_t(first.bufferFloats()));
  std::iota(whole.begin(), whole.end(), 1.0f);
  std::vector<float> gathered;
  for (int64_t r = 0; r < dp; ++r) {
    const ShardLayout l(n, dp, r, bucket);
    const std::vector<float> mine = l.shardOf(whole);
    ASSERT_EQ(int64_t(mine.size()), l.shardFloats());
    for (int64_t b = 0; b < l.buckets(); ++b)
      EXPECT_EQ(mine[size_t(l.momentBegin(b))], whole[size_t(l.ownBegin(b))]);
    gathered.insert(gathered.end(), mine.begin(), mine.end());
  }
  EXPECT_EQ(first.wholeOf(gathered), whole);
}

TEST(ShardLayout, AStageWithoutParametersHasNoBuckets) {
  const ShardLayout l(0, 4, 2, 16);
  EXPECT_EQ(l.buckets(), 0);
  EXPECT_EQ(l.bufferFloats(), 0);
  EXPECT_EQ(l.shardFloats(), 0);
  EXPECT_TRUE(l.wholeOf(std::vector<float>()).empty());
}

// An expert grid over m = 2 replicas at dp 4 (edp 2): 23 floats in buckets
// of 12, the experts' slots [3, 8) and [14, 20). Dp rank 2 (expert-data-
// parallel rank 1, first replica) updates the dense floats of its dp parts
// [6, 9) and [18, 21) and the experts' of its expert-data-parallel parts
// [6, 12) and [18, 24): pieces [8, 9) [6, 8) [20, 21) [18, 20), in that
// order in its moments.
TEST(ExpertShardLayout, EachRankKeepsItsDenseAndExpertPieces) {
  const ShardLayout dense(23, 4, 2, 9);
  ASSERT_EQ(dense.stride(), 12);
  ASSERT_EQ(dense.bufferFloats(), 24);
  const ExpertShardLayout x(dense, {{3, 8}, {14, 20}}, 2, 2, 1);
  EXPECT_EQ(x.replicas(), 2);
  EXPECT_EQ(x.expertDpParts().ownBegin(0), 6);
  EXPECT_EQ(x.expertDpParts().ownBegin(1), 18);
  EXPECT_EQ(x.expertDpParts().partFloats(1), 6);
  auto pieces = [](const std::vector<ExpertShardLayout::Piece> &ps) {
    std::vector<std::array<int64_t, 3>> out;
    for (const ExpertShardLayout::Piece &p : ps)
      out.push_back({p.begin, p.end, p.moment});
    return out;
  };
  using Pieces = std::vector<std::array<int64_t, 3>>;
  EXPECT_EQ(pieces(x.densePiecesOf(0)), (Pieces{{8, 9, 0}}));
  EXPECT_EQ(pieces(x.expertPiecesOf(0)), (Pieces{{6, 8, 1}}));
  EXPECT_EQ(pieces(x.densePiecesOf(1)), (Pieces{{20, 21, 3}}));
  EXPECT_EQ(pieces(x.expertPiecesOf(1)), (Pieces{{18, 20, 4}}));
  EXPECT_EQ(x.momentsFloats(), 6);
  std::vector<std::pair<int64_t, int64_t>> runs;
  x.forEachDenseRun(0, 12, [&](int64_t a, int64_t z) {
    runs.push_back({a, z});
  });
  EXPECT_EQ(runs, (std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {8, 12}}));
}

// Over the dp ranks every dense float (the padding too) is in one dense piece,
// and over each replica's expert-data-parallel group every expert float in one
// expert piece; a rank's pieces lie in its parts and use each of its moments
// once; dense and expert runs tile any range.
TEST(ExpertShardLayout, ThePiecesTileTheBuffer) {
  const std::vector<std::pair<int64_t, int64_t>> runs{
      {0, 5}, {9, 30}, {31, 32}, {40, 77}, {90, 101}};
  auto isExpert = [&](int64_t i) {
    for (const auto &[a, z] : runs)
      if (a <= i && i < z)
        return true;
    return false;
  };
  for (int64_t m : {1, 2, 4}) {
    for (int64_t edp : {1, 2, 3}) {
      for (int64_t bucket : {1, 8, 13, 64, 5000}) {
        std::vector<int> dense(128, 0);
        std::vector<std::vector<int>> experts(size_t(m), std::vector<int>(128));
        for (int64_t e = 0; e < edp; ++e) {
          for (int64_t j = 0; j < m; ++j) {
            const ShardLayout l(101, m * edp, e * m + j, bucket);
            const ExpertShardLayout x(l, runs, m, edp, e);
            std::vector<int> moment(size_t(x.momentsFloats()), 0);
            for (int64_t b = 0; b < l.buckets(); ++b) {
              auto visit = [&](const std::vector<ExpertShardLayout::Piece> &ps,
                               int64_t lo, int64_t hi, std::vector<int> &seen) {
                for (const ExpertShardLayout::Piece &p : ps) {
                  EXPECT_LE(lo, p.begin);
                  EXPECT_LT(p.begin, p.end);
                  EXPECT_LE(p.end, hi);
                  for (int64_t i = p.begin; i < p.end; ++i) {
                    ++seen[size_t(i)];
                    ++moment[size_t(p.moment + i - p.begin)];
                  }
                }
              };
              visit(x.densePiecesOf(b), l.ownBegin(b),
                    l.ownBegin(b) + l.partFloats(b), dense);
              const ShardLayout &part = x.expertDpParts();
              visit(x.expertPiecesOf(b), part.ownBegin(b),
                    part.ownBegin(b) + part.partFloats(b), experts[size_t(j)]);
            }
            for (int used : moment)
              EXPECT_EQ(used, 1);
          }
        }
        // (The padding after the last float is dense: a rank's dp part.)
        const int64_t padded =
            ShardLayout(101, m * edp, 0, bucket).bufferFloats();
        for (int64_t i = 0; i < 128; ++i) {
          const bool inBuffer = i < padded;
          EXPECT_EQ(dense[size_t(i)], inBuffer && !isExpert(i) ? 1 : 0)
              << "float " << i << " m " << m << " edp " << edp;
          for (int64_t j = 0; j < m; ++j)
            EXPECT_EQ(experts[size_t(j)][size_t(i)], isExpert(i) ? 1 : 0)
                << "float " << i << " replica " << j;
        }
        const ExpertShardLayout x(ShardLayout(101, m * edp, 0, bucket), runs, m,
                                  edp, 0);
        std::vector<int> tiled(101, 0);
        x.forEachDenseRun(3, 95, [&](int64_t a, int64_t z) {
          for (int64_t i = a; i < z; ++i)
            tiled[size_t(i)] += 1;
        });
        x.forEachExpertRun(3, 95, [&](int64_t a, int64_t z) {
          for (int64_t i = a; i < z; ++i)
            tiled[size_t(i)] += 2;
        });
        for (int64_t i = 0; i < 101; ++i)
          EXPECT_EQ(tiled[size_t(i)], i < 3 || i >= 95 ? 0
                                      : isExpert(i)    ? 2
                                                       : 1)
              << "float " << i;
      }
    }
  }
}

} // namespace
} // namespace hypipe::rt
