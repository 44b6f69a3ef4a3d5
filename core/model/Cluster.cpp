//===- Cluster.cpp - the device table and collective costs ----------------===//
#include "core/model/Cluster.h"

#include "core/Text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>

namespace hypipe {

namespace {

constexpr double kGB = 1e9, kUs = 1e-6, kT = 1e12;

/// docs/plan.md, "The device table", gives each number's source.
std::vector<DeviceRates> makeTable() {
  // NVLink 4 (18 links of 50 GB/s, 900 GB/s both ways: 450 one way), of
  // which NCCL's bus bandwidth reaches about 360 GB/s; 8 ConnectX-7 NICs of
  // 400 Gb/s a node (50 GB/s a GPU), about 45 GB/s reached.
  const Link nvlink4{360 * kGB, 8 * kUs}, ndr{45 * kGB, 15 * kUs};
  // NVLink 3 (600 GB/s both ways), about 230 GB/s bus bandwidth; 8 HDR
  // NICs of 200 Gb/s a node (25 GB/s a GPU), about 22 GB/s reached.
  const Link nvlink3{230 * kGB, 8 * kUs}, hdr{22 * kGB, 15 * kUs};
  std::vector<DeviceRates> table;
  table.push_back({"h100", 989 * kT, 67 * kT, 0.40, 80, 8, nvlink4, ndr, true});
  table.push_back(
      {"h200", 989 * kT, 67 * kT, 0.40, 141, 8, nvlink4, ndr, true});
  table.push_back(
      {"a100", 312 * kT, 19.5 * kT, 0.45, 80, 8, nvlink3, hdr, true});
  // One rank a core of this project's 2-core machines: OpenBLAS sgemm at
  // one thread, the share of it hypipe's model FLOPs reach, bf16 emulated
  // at 0.8 of fp32 (bench/results/train.md, bf16.md); Open MPI's shared
  // memory between two ranks (bench/results/cluster.md) and a 10 Gb/s
  // Ethernet between hosts.
  table.push_back({"cpu", 96e9, 120e9, 0.70, 24, 2, Link{6 * kGB, 0.3 * kUs},
                   Link{1.1 * kGB, 30 * kUs}, false});
  return table;
}

} // namespace

const std::vector<DeviceRates> &deviceTable() {
  static const std::vector<DeviceRates> table = makeTable();
  return table;
}

Expected<DeviceRates> findDevice(std::string_view name) {
  std::string names;
  for (const DeviceRates &d : deviceTable()) {
    if (d.name == name)
      return d;
    names += (names.empty() ? "" : ", ") + d.name;
  }
  return Error(Problem{fmt::format("unknown device '{}'", name),
                       fmt::format("use one of {} (docs/plan.md, \"The "
                                   "device table\")",
                                   names)});
}

const Link &Cluster::pipelineLink(int64_t fromPp, int64_t toPp, int64_t dp,
                                  int64_t tp) const {
  for (int64_t d = 0; d < dp; ++d)
    for (int64_t t = 0; t < tp; ++t)
      if (nodeOf(globalRank(fromPp, d, dp, tp, t)) !=
          nodeOf(globalRank(toPp, d, dp, tp, t)))
        return device.interNode;
  return device.intraNode;
}

const Link &Cluster::dataParallelLink(int64_t ppRank, int64_t dp,
                                      int64_t tp) const {
  for (int64_t t = 0; t < tp; ++t)
    if (nodeOf(globalRank(ppRank, 0, dp, tp, t)) !=
        nodeOf(globalRank(ppRank, dp - 1, dp, tp, t)))
      return device.interNode;
  return device.intraNode;
}

double reduceScatterSeconds(int64_t ranks, double bytes, const Link &link) {
  if (ranks <= 1)
    return 0;
  const double n = double(ranks);
  return (n - 1) * link.latencySeconds +
         (link.bytesPerSecond > 0 ? (n - 1) / n * bytes / link.bytesPerSecond
                                  : 0);
}

double allGatherSeconds(int64_t ranks, double bytes, const Link &link) {
  return reduceScatterSeconds(ranks, bytes, link);
}

double allToAllSeconds(int64_t ranks, double bytes, const Link &link) {
  return reduceScatterSeconds(ranks, bytes, link);
}

double allReduceSeconds(int64_t ranks, double bytes, const Link &link) {
  return 2 * reduceScatterSeconds(ranks, bytes, link);
}

std::string linkProblem(const Link &link) {
  using B = ClusterBounds;
  const double gbps = link.bytesPerSecond / kGB;
  if (!(link.bytesPerSecond >= B::kLeastBytesPerSecond &&
        link.bytesPerSecond <= B::kMostBytesPerSecond))
    return fmt::format("a bandwidth of {:g} GB/s, outside {:g} to {:g} GB/s",
                       gbps, B::kLeastBytesPerSecond / kGB,
                       B::kMostBytesPerSecond / kGB);
  if (!(link.latencySeconds >= 0 &&
        link.latencySeconds <= B::kMostLatencySeconds))
    return fmt::format("a latency of {:g} us, outside 0 to {:g} us",
                       link.latencySeconds / kUs, B::kMostLatencySeconds / kUs);
  return std::string();
}

Expected<Link> parseLink(std::string_view text, std::string_view what) {
  auto bad = [&](std::string why = "") {
    return Error(Problem{
        why.empty() ? fmt::format("{} '{}' is not a link class", what, text)
                    : fmt::format("{} '{}' gives {}", what, text, why),
        fmt::format("write the bandwidth in GB/s and, after a comma, the "
                    "latency in microseconds, e.g. {} 45,15",
                    what)});
  };
  std::vector<std::string_view> parts = text::split(text, ',');
  if (parts.empty() || parts.size() > 2)
    return bad();
  double gbps = 0, us = 0;
  if (!text::parseDouble(text::trim(parts[0]), gbps) || !(gbps > 0) ||
      !std::isfinite(gbps))
    return bad();
  if (parts.size() == 2 && (!text::parseDouble(text::trim(parts[1]), us) ||
                            !(us >= 0) || !std::isfinite(us)))
    return bad();
  Link link{gbps * kGB, us * kUs};
  if (std::string why = linkProblem(link); !why.empty())
    return bad(why);
  return link;
}

Cluster measuredCluster(const Link &link) {
  DeviceRates d;
  d.name = "measured";
  d.achieved = 1;
  d.perNode = int64_t(1) << 40;
  d.intraNode = d.interNode = link;
  d.gpu = false;
  return Cluster{d};
}

Expected<Cluster> makeCluster(std::string_view name,
                              const ClusterOverrides &o) {
  Expected<DeviceRates> device = findDevice(name);
  if (!device)
    return device.takeError();
  Cluster c{std::move(*device)};
  if (o.perNode) {
    if (*o.perNode < 1 || *o.perNode > ClusterBounds::kMostRanksPerNode)
      return Error(Problem{
          fmt::format("--ranks-per-node is {}; a node holds 1 to {} ranks",
                      *o.perNode, ClusterBounds::kMostRanksPerNode),
          "give the number of devices in one node (8 on a DGX)"});
    c.device.perNode = *o.perNode;
  }
  if (o.achieved) {
    if (!(*o.achieved >= ClusterBounds::kLeastMfu && *o.achieved <= 1))
      return Error(Problem{
          fmt::format("--mfu is {}; it is a share of the peak, from {} to 1",
                      *o.achieved, ClusterBounds::kLeastMfu),
          "give e.g. --mfu 0.4 for 40% of the device's peak"});
    c.device.achieved = *o.achieved;
  }
  for (auto [text, link, what] :
       {std::tuple{&o.intraNode, &c.device.intraNode, "--intra-node"},
        std::tuple{&o.interNode, &c.device.interNode, "--inter-node"}}) {
    if (!*text)
      continue;
    Expected<Link> parsed = parseLink(**text, what);
    if (!parsed)
      return parsed.takeError();
    *link = *parsed;
  }
  return c;
}

} // namespace hypipe
