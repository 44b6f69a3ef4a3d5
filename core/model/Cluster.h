//===- Cluster.h - devices, link classes and what communication costs -----===//
//
// What `hypipe plan --device` and `hypipe explain --device` time a step
// with when no run measured it: a device's FLOP rate (its dense peak times
// the fraction a training step reaches), its memory, how many sit in a node,
// and two link classes (within a node, between nodes), each a bandwidth and
// a latency. Ranks are numbered as Megatron-LM numbers them (tensor parallel
// innermost, then data parallel, then pipeline: global rank =
// (pp_rank * dp + dp_rank) * tp + tp_rank, core/model/RankGrid.h, hypipe-run's
// order too), and filled into nodes in that order, so whether a pipeline
// hand-off, a data-parallel or a tensor-parallel group crosses a node follows
// from the layout.
// docs/plan.md lists every number of the table with where it comes from.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_MODEL_CLUSTER_H
#define HYPIPE_CORE_MODEL_CLUSTER_H

#include "core/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hypipe {

/// One link class: a transfer of B bytes takes latency + B / bandwidth.
struct Link {
  double bytesPerSecond = 0;
  double latencySeconds = 0;

  double seconds(double bytes) const {
    return latencySeconds + (bytesPerSecond > 0 ? bytes / bytesPerSecond : 0);
  }
};

/// A row of the device table.
struct DeviceRates {
  std::string name;
  double peakBf16Flops = 0; ///< dense, per device, FLOP/s
  double peakFp32Flops = 0; ///< dense, without tensor cores (hypipe's fp32)
  /// Share of the peak a training step's model FLOPs reach (MFU).
  double achieved = 0;
  double memoryGiB = 0;
  int64_t perNode = 1;
  Link intraNode, interNode;
  bool gpu = true;
};

/// The table: h100, h200, a100, cpu (docs/plan.md gives the sources).
const std::vector<DeviceRates> &deviceTable();
/// The row named `name`, or an error listing the names.
Expected<DeviceRates> findDevice(std::string_view name);

/// A device table row with the user's overrides applied.
struct Cluster {
  DeviceRates device;

  /// FLOP/s one rank reaches on the model.
  double flopsPerSecond(bool bf16) const {
    return (bf16 ? device.peakBf16Flops : device.peakFp32Flops) *
           device.achieved;
  }
  int64_t nodeOf(int64_t globalRank) const {
    return globalRank / device.perNode;
  }
  /// The link between two global ranks.
  const Link &link(int64_t a, int64_t b) const {
    return nodeOf(a) == nodeOf(b) ? device.intraNode : device.interNode;
  }
  /// The link a hand-off from pipeline rank `fromPp` to `toPp` takes: the
  /// slowest over the data- and tensor-parallel ranks, since the step waits
  /// for it.
  const Link &pipelineLink(int64_t fromPp, int64_t toPp, int64_t dp,
                           int64_t tp = 1) const;
  /// The link a data-parallel group of pipeline rank `ppRank` reduces over:
  /// between nodes when a group spans nodes (its rings cross them).
  const Link &dataParallelLink(int64_t ppRank, int64_t dp,
                               int64_t tp = 1) const;
  /// The link a tensor-parallel group of `tp` consecutive ranks runs its
  /// collectives over: within a node when every group fits in one (tp
  /// divides the ranks of a node), else between nodes.
  const Link &tensorParallelLink(int64_t tp) const {
    return device.perNode % tp == 0 ? device.intraNode : device.interNode;
  }
};

/// Megatron-LM's and hypipe-run's global rank of (pp_rank, dp_rank,
/// tp_rank) among dp x tp ranks a pipeline rank.
inline int64_t globalRank(int64_t ppRank, int64_t dpRank, int64_t dp,
                          int64_t tp = 1, int64_t tpRank = 0) {
  return (ppRank * dp + dpRank) * tp + tpRank;
}

/// Ring collectives over `ranks` ranks (NCCL's and Open MPI's large-message
/// algorithms): an all-reduce moves 2 (n-1)/n of the bytes through each
/// rank's link in 2 (n-1) steps, a reduce-scatter or an all-gather half of
/// that. Zero for one rank.
double allReduceSeconds(int64_t ranks, double bytes, const Link &link);
double reduceScatterSeconds(int64_t ranks, double bytes, const Link &link);
double allGatherSeconds(int64_t ranks, double bytes, const Link &link);
/// An all-to-all over `ranks` ranks of `bytes` a rank (pairwise exchange,
/// each of its n-1 peers sent a 1/n): as a reduce-scatter's traffic.
double allToAllSeconds(int64_t ranks, double bytes, const Link &link);

/// The range of what a device's row may be changed to, and of a link a run
/// measured: past these a step's time is infinite, zero or not a number
/// (`--mfu 5e-324`, `--intra-node 1e-300`), not a time a plan can rank.
/// Each bound is far beyond any real device (docs/plan.md).
struct ClusterBounds {
  static constexpr int64_t kMostRanksPerNode = 1024;
  static constexpr double kLeastMfu = 1e-3; ///< 0.1% of the peak
  /// A link: 1 MB/s (a slow WAN) to 100 TB/s (100x NVLink 4), latency at
  /// most 1 s.
  static constexpr double kLeastBytesPerSecond = 1e6;
  static constexpr double kMostBytesPerSecond = 1e14;
  static constexpr double kMostLatencySeconds = 1;
};

/// What is wrong with `link` against ClusterBounds, in words ("" if
/// nothing): "a bandwidth of 1e-300 GB/s, outside 0.001 to 100000 GB/s".
std::string linkProblem(const Link &link);

/// What a user may change of a device's row (hypipe plan and explain's
/// --ranks-per-node, --intra-node, --inter-node, --mfu).
struct ClusterOverrides {
  std::optional<int64_t> perNode;
  std::optional<std::string> intraNode, interNode; ///< parseLink's text
  std::optional<double> achieved;
};

/// The device `name`'s row with `overrides` applied, each checked.
Expected<Cluster> makeCluster(std::string_view name,
                              const ClusterOverrides &overrides = {});

/// A cluster of one link class everywhere, measured by a run
/// (MeasuredCosts::link): named "measured", no memory cap, one node.
Cluster measuredCluster(const Link &link);

/// Parses a link class `GBPS[,LATENCY_US]` (decimal GB/s, microseconds),
/// e.g. `45,15`; `what` names the option in errors.
Expected<Link> parseLink(std::string_view text, std::string_view what);

} // namespace hypipe

#endif
