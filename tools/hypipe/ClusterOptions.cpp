//===- ClusterOptions.cpp - the device and link options of plan, explain --===//
#include "tools/common/CliChecks.h"
#include "tools/hypipe/Commands.h"

#include <fmt/format.h>

namespace hypipe::cli {

void addClusterOptions(CLI::App *sub, ClusterOptions &o) {
  std::string names;
  for (const DeviceRates &d : deviceTable())
    names += (names.empty() ? "" : "|") + d.name;
  sub->add_option("--device", o.device,
                  fmt::format("{}: time the step in seconds on this device "
                              "and its links (docs/plan.md, \"The device "
                              "table\")",
                              names));
  sub->add_option_function<int64_t>(
         "--ranks-per-node",
         [&o](const int64_t &v) { o.overrides.perNode = v; },
         "devices in one node (default: the device's; ranks fill nodes in "
         "order, data parallel inner to pipeline)")
      ->check(wholeBetween(1, ClusterBounds::kMostRanksPerNode));
  sub->add_option_function<std::string>(
      "--intra-node", [&o](const std::string &v) { o.overrides.intraNode = v; },
      "the link within a node: GB/s[,latency in us], e.g. 360,8");
  sub->add_option_function<std::string>(
      "--inter-node", [&o](const std::string &v) { o.overrides.interNode = v; },
      "the link between nodes, per device: GB/s[,latency in us], e.g. 45,15");
  sub->add_option_function<double>(
      "--mfu", [&o](const double &v) { o.overrides.achieved = v; },
      "the share of the device's peak a step's FLOPs reach (default: the "
      "device's)");
}

Expected<std::optional<Cluster>> clusterOf(const ClusterOptions &o) {
  const ClusterOverrides &v = o.overrides;
  if (!o.device) {
    if (v.perNode || v.intraNode || v.interNode || v.achieved)
      return Error(Problem{
          "--ranks-per-node, --intra-node, --inter-node and --mfu change a "
          "device's row; no --device was given",
          "add --device h100 (or h200, a100, cpu)"});
    return std::optional<Cluster>();
  }
  Expected<Cluster> cluster = makeCluster(*o.device, v);
  if (!cluster)
    return cluster.takeError();
  return std::optional<Cluster>(std::move(*cluster));
}

} // namespace hypipe::cli
