//===- Packing.cpp - variable-length samples packed into microbatches -----===//

#include "core/data/Packing.h"

#include "core/model/CostModel.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <utility>

namespace hypipe::packing {

const char *schedulerName(Scheduler s) {
  switch (s) {
  case Scheduler::Balanced:
    return "balanced";
  case Scheduler::FirstFitDecreasing:
    return "first-fit-decreasing";
  case Scheduler::Unpacked:
    return "unpacked";
  }
  return "?";
}

std::string schedulerNames() {
  return "balanced, first-fit-decreasing, unpacked";
}

Expected<Scheduler> parseScheduler(const std::string &name) {
  for (Scheduler s : {Scheduler::Balanced, Scheduler::FirstFitDecreasing,
                      Scheduler::Unpacked})
    if (name == schedulerName(s))
      return s;
  return makeError(fmt::format("unknown packing scheduler '{}'; the "
                               "schedulers are {}",
                               name, schedulerNames()));
}

SampleCost modelSampleCost(const ModelDims &dims, const std::string &layers,
                           const std::string &mtpLayers, int mtpDepths) {
  // FLOPs are a*n + b*n^2 in the length n; two lengths determine a and b.
  auto flops = [&](int64_t n) {
    CostSettings settings;
    settings.seqLength = n;
    settings.microBatchSize = 1;
    double total = 0;
    for (const ItemCost &item :
         modelItems(dims, settings, layers, mtpLayers, mtpDepths))
      total += double(item.totalFlops());
    return total;
  };
  const double n1 = 64, n2 = 128, f1 = flops(64), f2 = flops(128);
  SampleCost c;
  c.perSquaredToken = (f2 - f1 * n2 / n1) / (n2 * n2 - n1 * n2);
  c.perToken = (f1 - c.perSquaredToken * n1 * n1) / n1;
  return c;
}

int64_t Plan::tokens() const {
  int64_t n = 0;
  for (const Bin &b : bins)
    n += b.tokens;
  return n;
}

double Plan::maxBinCost() const {
  double m = 0;
  for (const Bin &b : bins)
    m = std::max(m, b.cost);
  return m;
}

Error checkOptions(const Options &o) {
  if (o.budget < 1)
    return makeError(fmt::format(
        "the token budget per microbatch must be positive, got {}", o.budget));
  if (o.dp < 1 || o.minBins < 1 || o.binMultiple < 1)
    return makeError("dp, the minimum bin count and the bin count multiple "
                     "must be positive");
  if (o.binMultiple % o.dp != 0)
    return makeError(fmt::format(
        "the bin count multiple ({}) must be a multiple of dp ({}) so that "
        "every data-parallel rank gets as many microbatches",
        o.binMultiple, o.dp));
  return Error::success();
}

namespace {

/// Largest remaining room of the bins, in a max segment tree, so that
/// first-fit finds the first bin with room for n tokens in O(log k).
class RoomTree {
public:
  RoomTree(int64_t bins, int64_t room) : size(1) {
    while (size < bins)
      size *= 2;
    tree.assign(2 * size, -1);
    for (int64_t i = 0; i < bins; ++i)
      tree[size + i] = room;
    for (int64_t i = size - 1; i > 0; --i)
      tree[i] = std::max(tree[2 * i], tree[2 * i + 1]);
  }
  /// First bin with room >= n, or -1.
  int64_t firstWithRoom(int64_t n) const {
    if (tree[1] < n)
      return -1;
    int64_t i = 1;
    while (i < size)
      i = tree[2 * i] >= n ? 2 * i : 2 * i + 1;
    return i - size;
  }
  void take(int64_t bin, int64_t n) {
    int64_t i = size + bin;
    tree[i] -= n;
    for (i /= 2; i > 0; i /= 2)
      tree[i] = std::max(tree[2 * i], tree[2 * i + 1]);
  }

private:
  int64_t size;
  std::vector<int64_t> tree;
};

/// Samples in the order a scheduler places them: descending `key`, then
/// ascending index (deterministic).
template <typename Key> std::vector<int64_t> orderBy(size_t n, const Key &key) {
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return key(a) > key(b); });
  return order;
}

/// Fills k bins; false when some sample fits in none.
bool fill(const std::vector<int64_t> &lengths, const Options &o, int64_t k,
          std::vector<Bin> &bins) {
  bins.assign(k, Bin{});
  auto place = [&](int64_t bin, int64_t s) {
    bins[bin].samples.push_back(s);
    bins[bin].tokens += lengths[s];
    bins[bin].cost += o.cost.of(lengths[s]);
  };
  if (o.scheduler == Scheduler::Unpacked) {
    for (int64_t s = 0; s < int64_t(lengths.size()); ++s)
      place(s, s);
    return true;
  }
  if (o.scheduler == Scheduler::FirstFitDecreasing) {
    std::vector<int64_t> order =
        orderBy(lengths.size(), [&](int64_t s) { return lengths[s]; });
    RoomTree room(k, o.budget);
    for (size_t i = 0; i < order.size(); ++i) {
      // The k longest samples open the k bins, so none stays empty.
      int64_t bin =
          i < size_t(k) ? int64_t(i) : room.firstWithRoom(lengths[order[i]]);
      if (bin < 0)
        return false;
      room.take(bin, lengths[order[i]]);
      place(bin, order[i]);
    }
    return true;
  }
  // Balanced: the costliest sample goes to the cheapest bin with room.
  std::vector<int64_t> order =
      orderBy(lengths.size(), [&](int64_t s) { return o.cost.of(lengths[s]); });
  std::set<std::pair<double, int64_t>> byCost;
  for (int64_t b = 0; b < k; ++b)
    byCost.insert({0.0, b});
  for (int64_t s : order) {
    auto it = byCost.begin();
    while (it != byCost.end() &&
           bins[it->second].tokens + lengths[s] > o.budget)
      ++it;
    if (it == byCost.end())
      return false;
    int64_t bin = it->second;
    byCost.erase(it);
    place(bin, s);
    byCost.insert({bins[bin].cost, bin});
  }
  return true;
}

int64_t roundUp(int64_t n, int64_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

} // namespace

Expected<Plan> pack(const std::vector<int64_t> &lengths, const Options &o) {
  if (Error err = checkOptions(o))
    return err;
  const int64_t n = int64_t(lengths.size());
  int64_t total = 0;
  for (int64_t s = 0; s < n; ++s) {
    if (lengths[s] < 1)
      return makeError(fmt::format("sample {} of the batch is empty", s));
    if (lengths[s] > o.budget)
      return makeError(fmt::format(
          "sample {} has {} tokens, more than the {} a microbatch holds", s,
          lengths[s], o.budget));
    total += lengths[s];
  }
  int64_t k = std::max(o.minBins, (total + o.budget - 1) / o.budget);
  if (o.scheduler == Scheduler::Unpacked) {
    if (n < o.minBins || n % o.binMultiple != 0)
      return makeError(fmt::format(
          "the unpacked scheduler makes one microbatch per sample, and {} "
          "samples are not a multiple of {} of at least {} microbatches",
          n, o.binMultiple, o.minBins));
    k = n;
  }
  k = roundUp(k, o.binMultiple);
  Plan plan;
  while (true) {
    if (k > n)
      return makeError(fmt::format(
          "{} samples cannot fill {} microbatches (each holds at least one "
          "sample, and the count is a multiple of {})",
          n, k, o.binMultiple));
    if (fill(lengths, o, k, plan.bins))
      break;
    k += o.binMultiple;
  }
  for (Bin &b : plan.bins)
    std::sort(b.samples.begin(), b.samples.end());

  // Bins to data-parallel ranks: costliest first, to the least-loaded rank
  // that still has room; each rank runs its bins costliest first.
  const int64_t perRank = k / o.dp;
  std::vector<int64_t> order(k);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return plan.bins[a].cost > plan.bins[b].cost;
  });
  plan.ranks.assign(o.dp, {});
  std::vector<double> load(o.dp, 0.0);
  for (int64_t b : order) {
    int64_t best = -1;
    for (int64_t d = 0; d < o.dp; ++d)
      if (int64_t(plan.ranks[d].size()) < perRank &&
          (best < 0 || load[d] < load[best]))
        best = d;
    plan.ranks[best].push_back(b);
    load[best] += plan.bins[b].cost;
  }
  return plan;
}

std::vector<int64_t> microbatchCounts(const Options &o, int64_t samples) {
  std::vector<int64_t> counts;
  if (o.scheduler == Scheduler::Unpacked) {
    if (samples >= o.minBins && samples % o.binMultiple == 0)
      counts.push_back(samples / o.dp);
    return counts;
  }
  // As pack() starts: every sample holds at least one token.
  const int64_t fewest =
      std::max(o.minBins, (samples + o.budget - 1) / o.budget);
  for (int64_t k = roundUp(fewest, o.binMultiple); k <= samples;
       k += o.binMultiple)
    counts.push_back(k / o.dp);
  return counts;
}

} // namespace hypipe::packing
