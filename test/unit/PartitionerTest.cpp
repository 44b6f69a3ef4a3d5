//===- PartitionerTest.cpp - exact min-max partitioning -------------------===//
#include "core/partition/Partitioner.h"
#include "core/partition/AutoPartition.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>

namespace hypipe {
namespace {

struct Optimum {
  int64_t maxCost = INT64_MAX;
  /// With at least k items: the smallest sum of squared segment costs among
  /// the splits into non-empty segments that reach `maxCost`.
  double sumOfSquares = std::numeric_limits<double>::infinity();
};

/// The optimum by trying every split of `costs` into `k` contiguous
/// segments (empty ones allowed) that keeps the first item in segment 0 and
/// the last in segment k-1.
Optimum bruteForce(const std::vector<int64_t> &costs, int64_t k) {
  auto n = static_cast<int64_t>(costs.size());
  Optimum best;
  std::vector<std::pair<int64_t, double>> nonEmpty; // (max, sum of squares)
  std::vector<int64_t> cuts(k + 1, 0); // segment s is [cuts[s], cuts[s+1])
  cuts[k] = n;
  std::function<void(int64_t, int64_t)> place = [&](int64_t s, int64_t from) {
    if (s == k) {
      if (cuts[1] == 0 || cuts[k - 1] == n) // item 0 in segment 0, last in k-1
        return;
      int64_t worst = 0;
      double squares = 0;
      bool allNonEmpty = true;
      for (int64_t i = 0; i < k; ++i) {
        int64_t sum = 0;
        for (int64_t j = cuts[i]; j < cuts[i + 1]; ++j)
          sum += costs[j];
        worst = std::max(worst, sum);
        squares += static_cast<double>(sum) * static_cast<double>(sum);
        allNonEmpty = allNonEmpty && cuts[i + 1] > cuts[i];
      }
      best.maxCost = std::min(best.maxCost, worst);
      if (allNonEmpty)
        nonEmpty.push_back({worst, squares});
      return;
    }
    for (int64_t c = from; c <= n; ++c) {
      cuts[s] = c;
      place(s + 1, c);
    }
  };
  cuts[0] = 0;
  place(1, 0);
  for (auto [worst, squares] : nonEmpty)
    if (worst == best.maxCost)
      best.sumOfSquares = std::min(best.sumOfSquares, squares);
  return best;
}

TEST(Partitioner, MatchesBruteForceOnRandomInstances) {
  std::mt19937_64 rng(20261122);
  for (int trial = 0; trial < 400; ++trial) {
    int64_t n = 2 + rng() % 9, k = 1 + rng() % 6;
    std::vector<int64_t> costs(n);
    for (int64_t &c : costs)
      c = rng() % 4 == 0 ? 0 : static_cast<int64_t>(rng() % 100);
    auto got = partitionMinMax(costs, k);
    ASSERT_TRUE(static_cast<bool>(got)) << toString(got.takeError());
    Optimum optimum = bruteForce(costs, k);
    EXPECT_EQ(got->maxSegmentCost, optimum.maxCost) << "trial " << trial;
    ASSERT_EQ(static_cast<int64_t>(got->segmentSizes.size()), k);
    int64_t total = 0, worst = 0, item = 0;
    for (int64_t size : got->segmentSizes) {
      int64_t sum = 0;
      for (int64_t j = 0; j < size; ++j)
        sum += costs[item++];
      worst = std::max(worst, sum);
      total += size;
    }
    EXPECT_EQ(total, n);
    EXPECT_EQ(worst, got->maxSegmentCost);
    if (n >= k) {
      double squares = 0;
      item = 0;
      for (int64_t size : got->segmentSizes) {
        int64_t sum = 0;
        for (int64_t j = 0; j < size; ++j)
          sum += costs[item++];
        squares += static_cast<double>(sum) * static_cast<double>(sum);
      }
      EXPECT_EQ(squares, optimum.sumOfSquares)
          << "trial " << trial << ": not the most even";
    }
    EXPECT_GT(got->segmentSizes.front(), 0);
    EXPECT_GT(got->segmentSizes.back(), 0);
    if (n >= k)
      for (int64_t size : got->segmentSizes)
        EXPECT_GT(size, 0);
  }
}

TEST(Partitioner, FitsConstraintIsRespectedAndExplained) {
  std::vector<int64_t> costs{1, 1, 1, 1, 1, 1};
  // Segment 0 can hold at most 2 items, segment 1 any number.
  SegmentFits fits = [](int64_t segment, int64_t begin, int64_t end) {
    return segment != 0 || end - begin <= 2;
  };
  auto got = partitionMinMax(costs, 2, fits);
  ASSERT_TRUE(static_cast<bool>(got));
  EXPECT_EQ(got->segmentSizes, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(got->maxSegmentCost, 4);

  SegmentFits tight = [](int64_t, int64_t begin, int64_t end) {
    return end - begin <= 2;
  };
  PartitionInfeasible e{-1, 0, 0};
  auto none = partitionMinMax(costs, 2, tight, &e);
  ASSERT_FALSE(static_cast<bool>(none));
  EXPECT_EQ(e.segment, 1);
  EXPECT_EQ(e.begin, 2);
  EXPECT_EQ(e.end, 6);
}

TEST(Partitioner, FewerItemsThanSegments) {
  auto got = partitionMinMax({5, 3, 7}, 5);
  ASSERT_TRUE(static_cast<bool>(got));
  EXPECT_EQ(got->segmentSizes, (std::vector<int64_t>{1, 1, 0, 0, 1}));
  EXPECT_EQ(got->maxSegmentCost, 7);
}

TEST(AutoPartition, BalancesAndWritesThePattern) {
  AutoPartitionRequest r;
  r.dims.hidden = 64;
  r.dims.numHeads = 4;
  r.dims.numQueryGroups = 4;
  r.dims.mambaNumHeads = 2;
  r.dims.mambaHeadDim = 64;
  r.layers = "MMMMMMMM";
  r.pp = 2;
  r.objective = PartitionObjective::Params;
  auto got = autoPartition(r);
  ASSERT_TRUE(static_cast<bool>(got)) << toString(got.takeError());
  EXPECT_EQ(got->pattern.find('|'), got->pattern.rfind('|')); // one '|'
  EXPECT_EQ(got->placement.stages.size(), 2u);
  auto ranges = stageItemRanges(got->placement);
  EXPECT_EQ(ranges.front().first, 0);
  EXPECT_EQ(ranges.back().second, 10); // embedding, 8 layers, head
  EXPECT_EQ(ranges[0].second, ranges[1].first);
}

TEST(AutoPartition, ImpossibleMemoryCapNamesTheRank) {
  AutoPartitionRequest r;
  r.layers = "MM";
  r.pp = 2;
  r.maxMemoryGiB = 1e-6;
  auto got = autoPartition(r);
  ASSERT_FALSE(static_cast<bool>(got));
  std::string message = toString(got.takeError());
  EXPECT_NE(message.find("pp_rank 0 cannot fit the embedding"),
            std::string::npos)
      << message;
  // The shortfall in its own unit: never "0.00 GiB short".
  EXPECT_NE(message.find(" short)"), std::string::npos) << message;
  EXPECT_EQ(message.find("0.00 GiB"), std::string::npos) << message;
}

} // namespace
} // namespace hypipe
