//===- PackingTest.cpp - the sequence-packing schedulers ------------------===//
//
// Properties on random length sets (every sample placed once, budgets kept,
// bin counts as configured, ranks equally loaded in count), the balanced
// scheduler's worst bin against an exact solver, and the refusals.
//
//===----------------------------------------------------------------------===//

#include "core/data/Packing.h"
#include "core/data/MockSft.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

using namespace hypipe;
using namespace hypipe::packing;

namespace {

std::vector<int64_t> randomLengths(std::mt19937_64 &rng, int64_t n,
                                   int64_t maxLen) {
  std::uniform_int_distribution<int64_t> len(1, maxLen);
  std::vector<int64_t> out(n);
  for (int64_t &l : out)
    l = len(rng);
  return out;
}

void checkPlan(const Plan &plan, const std::vector<int64_t> &lengths,
               const Options &o) {
  const int64_t k = int64_t(plan.bins.size());
  EXPECT_GE(k, o.minBins);
  EXPECT_EQ(k % o.binMultiple, 0);
  std::vector<int> seen(lengths.size(), 0);
  for (const Bin &b : plan.bins) {
    EXPECT_FALSE(b.samples.empty());
    int64_t tokens = 0;
    for (int64_t s : b.samples) {
      ++seen.at(s);
      tokens += lengths[s];
    }
    EXPECT_EQ(tokens, b.tokens);
    EXPECT_LE(b.tokens, o.budget);
  }
  for (int c : seen)
    EXPECT_EQ(c, 1);
  ASSERT_EQ(int64_t(plan.ranks.size()), o.dp);
  std::vector<int> binSeen(k, 0);
  for (const auto &r : plan.ranks) {
    EXPECT_EQ(int64_t(r.size()), k / o.dp);
    for (int64_t b : r)
      ++binSeen.at(b);
  }
  for (int c : binSeen)
    EXPECT_EQ(c, 1);
}

/// The smallest possible cost of the costliest of k bins (empty bins
/// allowed), by trying every assignment.
double exactMinMaxCost(const std::vector<int64_t> &lengths, int64_t k,
                       const Options &o) {
  const int64_t n = int64_t(lengths.size());
  int64_t combos = 1;
  for (int64_t i = 0; i < n; ++i)
    combos *= k;
  double best = INFINITY;
  for (int64_t c = 0; c < combos; ++c) {
    std::vector<double> cost(k, 0);
    std::vector<int64_t> tokens(k, 0);
    int64_t code = c;
    for (int64_t s = 0; s < n; ++s, code /= k) {
      cost[code % k] += o.cost.of(lengths[s]);
      tokens[code % k] += lengths[s];
    }
    if (*std::max_element(tokens.begin(), tokens.end()) <= o.budget)
      best = std::min(best, *std::max_element(cost.begin(), cost.end()));
  }
  return best;
}

} // namespace

TEST(Packing, EverySchedulerPlacesEverySampleOnceWithinTheBudget) {
  std::mt19937_64 rng(7);
  for (Scheduler sched : {Scheduler::Balanced, Scheduler::FirstFitDecreasing})
    for (int trial = 0; trial < 40; ++trial) {
      Options o;
      o.scheduler = sched;
      o.dp = 1 + trial % 3;
      int64_t pp = 1 + trial % 4;
      o.minBins = o.binMultiple = o.dp * pp;
      o.budget = 64 + 37 * trial;
      o.cost = {1.0, trial % 2 ? 0.01 : 0.0};
      std::vector<int64_t> lengths =
          randomLengths(rng, 30 + trial * 7, o.budget);
      Expected<Plan> plan = pack(lengths, o);
      ASSERT_TRUE(bool(plan)) << toString(plan.takeError());
      checkPlan(*plan, lengths, o);
      // The same lengths give the same bins (every rank packs alone).
      Expected<Plan> again = pack(lengths, o);
      ASSERT_TRUE(bool(again));
      for (size_t b = 0; b < plan->bins.size(); ++b)
        EXPECT_EQ(plan->bins[b].samples, again->bins[b].samples);
      EXPECT_EQ(plan->ranks, again->ranks);
    }
}

// The compiler writes a schedule program for each count microbatchCounts
// lists; every plan pack() makes must have one of them.
TEST(Packing, MicrobatchCountsHoldEveryCountPackGives) {
  std::mt19937_64 rng(11);
  for (Scheduler sched : {Scheduler::Balanced, Scheduler::FirstFitDecreasing,
                          Scheduler::Unpacked})
    for (int trial = 0; trial < 60; ++trial) {
      Options o;
      o.scheduler = sched;
      o.dp = 1 + trial % 2;
      o.minBins = o.dp * (1 + trial % 3);
      o.binMultiple = o.dp * (1 + trial % 2);
      o.budget = 16 + 5 * trial;
      const int64_t samples = 4 * o.binMultiple * (1 + trial % 3);
      const std::vector<int64_t> counts = microbatchCounts(o, samples);
      EXPECT_TRUE(std::is_sorted(counts.begin(), counts.end()));
      std::vector<int64_t> lengths = randomLengths(rng, samples, o.budget);
      Expected<Plan> plan = pack(lengths, o);
      if (!plan)
        continue;
      EXPECT_NE(
          std::find(counts.begin(), counts.end(), plan->microbatchesPerRank()),
          counts.end())
          << "pack gave " << plan->microbatchesPerRank()
          << " microbatches per rank";
    }
}

TEST(Packing, BalancedWorstBinIsWithinGrahamsBoundOfTheOptimum) {
  // With a budget that never binds, the balanced scheduler is Graham's LPT
  // rule, whose costliest bin is at most (4/3 - 1/(3k)) of the optimum.
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 60; ++trial) {
    Options o;
    o.budget = 1 << 20;
    o.cost = {1.0, 0.05};
    o.minBins = o.binMultiple = 2 + trial % 2;
    std::vector<int64_t> lengths = randomLengths(rng, 5 + trial % 4, 200);
    Expected<Plan> plan = pack(lengths, o);
    ASSERT_TRUE(bool(plan));
    int64_t k = int64_t(plan->bins.size());
    ASSERT_EQ(k, o.minBins);
    double opt = exactMinMaxCost(lengths, k, o);
    EXPECT_LE(plan->maxBinCost(), (4.0 / 3.0 - 1.0 / (3.0 * k)) * opt + 1e-9)
        << "trial " << trial;
  }
}

TEST(Packing, QuadraticCostSpreadsLongSamples) {
  // Four samples of 512 and many of 32: by tokens alone two bins could hold
  // two long samples each; with attention's quadratic cost the balanced
  // scheduler gives each of four bins one long sample.
  std::vector<int64_t> lengths = {512, 512, 512, 512};
  for (int i = 0; i < 32; ++i)
    lengths.push_back(32);
  Options o;
  o.budget = 2048;
  o.minBins = o.binMultiple = 4;
  o.cost = {1.0, 0.01};
  Expected<Plan> plan = pack(lengths, o);
  ASSERT_TRUE(bool(plan));
  checkPlan(*plan, lengths, o);
  for (const Bin &b : plan->bins)
    EXPECT_EQ(std::count_if(b.samples.begin(), b.samples.end(),
                            [&](int64_t s) { return lengths[s] == 512; }),
              1);
}

TEST(Packing, FirstFitDecreasingFillsBinsExactlyWhenTheLengthsPair) {
  // 5 samples of 120 and 5 of 80: the tokens allow 5 bins of 200, and
  // first-fit puts one 80 beside each 120.
  std::vector<int64_t> lengths;
  for (int i = 0; i < 5; ++i) {
    lengths.push_back(80);
    lengths.push_back(120);
  }
  Options o;
  o.budget = 200;
  o.scheduler = Scheduler::FirstFitDecreasing;
  Expected<Plan> plan = pack(lengths, o);
  ASSERT_TRUE(bool(plan));
  EXPECT_EQ(plan->bins.size(), 5u);
  for (const Bin &b : plan->bins)
    EXPECT_EQ(b.tokens, 200);
}

TEST(Packing, BinCountGrowsByTheMultipleWhenTheSamplesDoNotFit) {
  // Three samples of 70 in bins of 100: the tokens say 3 bins (210 / 100),
  // one per sample; a multiple of 2 makes it 4, leaving one sample short
  // of the 4 bins it needs to be non-empty: refused.
  Options o;
  o.budget = 100;
  o.binMultiple = 2;
  Expected<Plan> plan = pack({70, 70, 70}, o);
  ASSERT_FALSE(bool(plan));
  EXPECT_NE(plan.problem().message.find("3 samples cannot fill 4"),
            std::string::npos)
      << plan.problem().message;
  Expected<Plan> four = pack({70, 70, 70, 70}, o);
  ASSERT_TRUE(bool(four));
  EXPECT_EQ(four->bins.size(), 4u);
}

TEST(Packing, UnpackedIsOneSamplePerBin) {
  Options o;
  o.budget = 100;
  o.dp = 2;
  o.minBins = o.binMultiple = 2;
  o.scheduler = Scheduler::Unpacked;
  std::vector<int64_t> lengths = {5, 90, 17, 3};
  Expected<Plan> plan = pack(lengths, o);
  ASSERT_TRUE(bool(plan));
  checkPlan(*plan, lengths, o);
  for (size_t b = 0; b < plan->bins.size(); ++b)
    EXPECT_EQ(plan->bins[b].samples, std::vector<int64_t>{int64_t(b)});
  EXPECT_FALSE(bool(pack({5, 90, 17}, o)));
}

TEST(Packing, RefusesEmptyAndOverlongSamplesAndBadOptions) {
  Options o;
  o.budget = 100;
  Expected<Plan> empty = pack({5, 0, 7}, o);
  ASSERT_FALSE(bool(empty));
  EXPECT_EQ(empty.problem().message, "sample 1 of the batch is empty");
  Expected<Plan> tooLong = pack({5, 101}, o);
  ASSERT_FALSE(bool(tooLong));
  EXPECT_EQ(tooLong.problem().message,
            "sample 1 has 101 tokens, more than the 100 a microbatch holds");
  o.dp = 2;
  o.binMultiple = 3;
  EXPECT_TRUE(bool(checkOptions(o)));
  EXPECT_FALSE(bool(parseScheduler("best-fit")));
  EXPECT_EQ(*parseScheduler("first-fit-decreasing"),
            Scheduler::FirstFitDecreasing);
}

// Megatron's mock SFT lengths: a lognormal draw clipped to [min, max] then
// truncated (np.clip(...).astype(int)), counting the sample's EOD.

namespace {

MockSftConfig lognormal(int64_t minLen, int64_t maxLen, double mean,
                        double sigma) {
  std::string json = "{\"mode\": \"distribution\", \"type\": \"lognormal\", "
                     "\"min_seq_len\": " +
                     std::to_string(minLen) +
                     ", \"max_seq_len\": " + std::to_string(maxLen) +
                     ", \"mean_seq_len\": " + std::to_string(mean) +
                     ", \"lognormal_sigma\": " + std::to_string(sigma) + "}";
  Expected<MockSftConfig> c = parseMockSftConfig(json, 1 << 20);
  EXPECT_TRUE(bool(c)) << json;
  return *c;
}

} // namespace

TEST(MockSftLengths, AreClippedThenTruncatedAndCountTheEod) {
  // sigma 0: every draw is the mean itself; truncation, not rounding.
  MockSftConfig c = lognormal(2, 1000, 100.75, 0);
  for (int64_t i = 0; i < 20; ++i) {
    EXPECT_EQ(mockSftLength(c, 7, i), 100);
    EXPECT_EQ(mockSftPositions(c, 7, i), 99);
  }
  // Clipped to max_seq_len, then truncated: max itself.
  EXPECT_EQ(mockSftLength(lognormal(2, 50, 80.9, 0), 7, 0), 50);
  // Clipped up to min_seq_len.
  EXPECT_EQ(mockSftLength(lognormal(9, 50, 3.2, 0), 7, 0), 9);
  // A length of 1 is an EOD alone: refused.
  EXPECT_FALSE(bool(parseMockSftConfig(
      R"({"mode": "distribution", "type": "lognormal", "min_seq_len": 1,
          "max_seq_len": 8, "mean_seq_len": 4, "lognormal_sigma": 1})",
      100)));
}

TEST(MockSftLengths, HaveTheMeanOfMegatronsDistribution) {
  // E[trunc(clip(X, a, b))] for X = exp(mu + sigma Z), mu = ln(mean) -
  // sigma^2/2, in float64: a + sum over k in (a, b] of P(X >= k).
  const int64_t a = 8, b = 256;
  const double mean = 64, sigma = 0.8, mu = std::log(mean) - sigma * sigma / 2;
  double expected = double(a);
  for (int64_t k = a + 1; k <= b; ++k)
    expected +=
        0.5 * std::erfc((std::log(double(k)) - mu) / (sigma * std::sqrt(2.0)));
  MockSftConfig c = lognormal(a, b, mean, sigma);
  const int64_t n = 1600000;
  double sum = 0, sumSq = 0;
  for (int64_t i = 0; i < n; ++i) {
    double l = double(mockSftLength(c, 1234, i));
    sum += l;
    sumSq += l * l;
  }
  const double got = sum / n;
  const double standardError = std::sqrt((sumSq / n - got * got) / n);
  // Five standard errors (about 0.25): the rounding the lengths had before
  // (+0.5 on average) is outside.
  EXPECT_NEAR(got, expected, 5 * standardError)
      << "standard error " << standardError;
  EXPECT_LT(5 * standardError, 0.3);
}
