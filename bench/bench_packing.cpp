//===- bench_packing.cpp - the packing schedulers on a large global batch -===//
//
// 100,000 samples of Megatron's mock SFT lengths (lognormal, mean 1k, max
// 8k) packed into microbatches of 8,192 tokens for dp x pp = 8: how long
// each scheduler takes, how many bins it makes, how full they are and how
// even their cost (the cost model's per-token and per-squared-token FLOPs of
// a 2k-hidden hybrid) is. The step that trains these samples takes minutes;
// the scheduler must not show in it.
//
// Usage: bench-packing [samples]
//
//===----------------------------------------------------------------------===//

#include "core/data/MockSft.h"
#include "core/data/Packing.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

using namespace hypipe;
using namespace hypipe::packing;

int main(int argc, char **argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 100000;
  Expected<MockSftConfig> config = parseMockSftConfig(
      R"({"mode": "distribution", "type": "lognormal", "min_seq_len": 16,
          "max_seq_len": 8192, "mean_seq_len": 1024, "lognormal_sigma": 1.0})",
      8192);
  if (!config) {
    fmt::print(stderr, "{}\n", toString(config.takeError()));
    return 1;
  }
  std::vector<int64_t> lengths(n);
  int64_t total = 0, longest = 0;
  for (int64_t i = 0; i < n; ++i) {
    lengths[i] = mockSftLength(*config, 1234, i);
    total += lengths[i];
    longest = std::max(longest, lengths[i]);
  }
  ModelDims dims;
  dims.hidden = 2048;
  dims.ffnHidden = 8192;
  dims.numHeads = 16;
  dims.numQueryGroups = 8;
  dims.mambaNumHeads = 64;
  dims.mambaHeadDim = 64;
  dims.mambaState = 128;
  dims.vocab = 32000;
  SampleCost cost = modelSampleCost(dims, "M-M*M-M-", "", 0);
  fmt::print("{} samples, {} tokens (mean {:.0f}, longest {}), budget 8192, "
             "dp x pp = 8; cost per sample {:.3g} n + {:.3g} n^2 FLOPs\n\n",
             n, total, double(total) / double(n), longest, cost.perToken,
             cost.perSquaredToken);
  fmt::print("{:<22} {:>10} {:>8} {:>10} {:>18} {:>14}\n", "scheduler",
             "time (ms)", "bins", "fill", "max / mean cost", "padded (x)");
  for (Scheduler s : {Scheduler::Balanced, Scheduler::FirstFitDecreasing}) {
    Options o;
    o.budget = 8192;
    o.dp = 2;
    o.minBins = o.binMultiple = 8;
    o.scheduler = s;
    o.cost = cost;
    auto start = std::chrono::steady_clock::now();
    Expected<Plan> plan = pack(lengths, o);
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - start)
                    .count();
    if (!plan) {
      fmt::print(stderr, "{}\n", toString(plan.takeError()));
      return 1;
    }
    double sumCost = 0;
    for (const Bin &b : plan->bins)
      sumCost += b.cost;
    double k = double(plan->bins.size());
    fmt::print("{:<22} {:>10.1f} {:>8} {:>9.1f}% {:>18.3f} {:>14.2f}\n",
               schedulerName(s), ms, plan->bins.size(),
               100.0 * double(total) / (k * 8192.0),
               plan->maxBinCost() / (sumCost / k),
               double(n) * double(longest) / double(total));
  }
  fmt::print("\npadded (x): tokens computed when every sample is padded to "
             "the longest, over the real tokens\n");
  return 0;
}
