//===- ShardLayoutTest.cpp - the distributed optimizer's per-bucket shards ===//
#include "runtime/exec/ShardLayout.h"

#include <gtest/gtest.h>

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
          EXPECT_NE(owner[size_t(i)], -1) << "float " << i << " n " << n
                                          << " dp " << dp << " bucket "
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

} // namespace
} // namespace hypipe::rt
