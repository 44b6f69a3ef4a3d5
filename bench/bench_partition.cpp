//===- bench_partition.cpp - partitioner and explain at scale -------------===//
//
// 1. Splitting a 10,000-layer pattern into 1,024 segments (pp=128, vpp=8) by
//    FLOPs, with and without a memory cap.
// 2. Everything `hypipe explain` computes for the 56-layer 8B hybrid of
//    Megatron-LM's README without '|' (load, auto-partition over pp=4, stage
//    costs and rank memory).
// Median of --reps runs; run through bench/run_partition.sh.
//
//===----------------------------------------------------------------------===//
#include "core/partition/AutoPartition.h"
#include "frontend/Spec.h"

#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <vector>

namespace {

double medianMs(int reps, const std::function<void()> &work) {
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    auto start = std::chrono::steady_clock::now();
    work();
    times.push_back(std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - start)
                        .count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

const char *k8bSpec = R"(model:
  pattern: "M-M-M--M-M*-M-M-M-M--M*-M-M-M-M-M*--M-M-M-M-M*-M--M-M-M-"
  hidden_size: 4096
  ffn_hidden_size: 21504
  num_attention_heads: 32
  num_query_groups: 8
  mamba_num_heads: 128
  mamba_head_dim: 64
  mamba_state_dim: 128
  mamba_num_groups: 8
  vocab_size: 131072
  tie_embeddings: false
parallel:
  pp: 4
  microbatches: 16
training:
  seq_length: 4096
  dtype: bf16
)";

} // namespace

int main(int argc, char **argv) {
  int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  hypipe::AutoPartitionRequest request;
  request.dims.hidden = 1024;
  request.dims.numHeads = 8;
  request.dims.numQueryGroups = 8;
  request.dims.numExperts = 8;
  request.dims.moeTopK = 2;
  const std::string cycle = "M-M*M-M-ME";
  for (int i = 0; i < 10000; ++i)
    request.layers += cycle[i % cycle.size()];
  request.pp = 128;
  request.vpp = 8;
  request.schedule = hypipe::schedule::ScheduleKind::Interleaved1F1B;
  request.microbatches = 128;

  int64_t maxCost = 0;
  double plain = medianMs(reps, [&] {
    auto result = hypipe::autoPartition(request);
    if (!result) {
      llvm::errs() << toString(result.takeError()) << "\n";
      std::exit(1);
    }
    maxCost = result->partition.maxSegmentCost;
  });
  hypipe::AutoPartitionRequest capped = request;
  capped.maxMemoryGiB = 64.0;
  double withCap = medianMs(reps, [&] {
    auto result = hypipe::autoPartition(capped);
    if (!result) {
      llvm::errs() << toString(result.takeError()) << "\n";
      std::exit(1);
    }
  });
  double explain8b = medianMs(reps, [&] {
    auto spec = hypipe::parseSpec(k8bSpec, "8b.yaml");
    if (!spec) {
      llvm::errs() << toString(spec.takeError()) << "\n";
      std::exit(1);
    }
    auto r = spec->partitionRequest();
    auto items = hypipe::modelItems(r.dims, r.settings, r.layers, r.mtpLayers,
                                    r.mtpDepths);
    auto ranges = hypipe::stageItemRanges(spec->placement);
    int64_t total = 0;
    for (int64_t rank = 0; rank < r.pp; ++rank)
      total += hypipe::rankMemoryBytes(items, {ranges[rank]}, r, rank);
    if (total <= 0)
      std::exit(1);
  });

  fmt::print("median of {} runs\n", reps);
  fmt::print("{:<62} {:>10}\n", "case", "ms");
  fmt::print("{:<62} {:>10.2f}\n",
             "partition 10,000 layers into 1,024 segments (time)", plain);
  fmt::print("{:<62} {:>10.2f}\n", "  same, with max_memory_gib 64", withCap);
  fmt::print("{:<62} {:>10.2f}\n",
             "explain the 56-layer 8B hybrid (load, auto-partition, costs)",
             explain8b);
  fmt::print("bottleneck segment: {} FLOPs\n", maxCost);
  return 0;
}
