//===- AutoPartition.cpp --------------------------------------------------===//
#include "core/partition/AutoPartition.h"

#include "core/Saturating.h"
#include "core/io/Files.h"

#include <fmt/format.h>

#include <cmath>

namespace hypipe {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

Error fail(std::string message) { return makeError(message); }

std::string describeItems(const std::vector<ItemCost> &items, int64_t begin,
                          int64_t end) {
  auto name = [&](int64_t i) {
    if (i == 0)
      return std::string("the embedding");
    if (i + 1 == static_cast<int64_t>(items.size()))
      return std::string("the head");
    return fmt::format("layer {} ('{}')", i, items[i].name);
  };
  if (end - begin == 1)
    return name(begin);
  return fmt::format("{} to {}", name(begin), name(end - 1));
}

} // namespace

namespace {

/// A segment's activations: what each microbatch in flight keeps, and
/// what exists once (recompute's largest chunk, during its backward).
struct SegmentActivations {
  int64_t perMicrobatch = 0, once = 0;
};

/// The per-rank memory estimate with the request's terms computed once.
struct MemoryModel {
  MemoryModel(const AutoPartitionRequest &r, const std::vector<ItemCost> &items)
      : bytesPerParam(trainingBytesPerParameter(r.settings.bf16,
                                                r.settings.optimizerShards)),
        activation(r.settings.streamBytes(r.dims.hidden)),
        p2pPerStage(2 * activation), recompute(r.recompute),
        numItems(int64_t(items.size())), acts(items.size() + 1, 0) {
    for (int64_t rank = 0; rank < r.pp; ++rank)
      inFlight.push_back(peakMicrobatchesInFlight(r.schedule, r.pp, r.vpp,
                                                  r.microbatches, rank));
    // O(1) sums from prefix sums: the partitioner asks often. (They stop at
    // 2^63 - 1; a model past that is refused after the split.)
    for (size_t i = 0; i < items.size(); ++i)
      acts[i + 1] = saturatingAdd(acts[i], items[i].activationBytes);
  }

  /// The activations of items [begin, end) (one segment) under the
  /// request's recompute: its main layers (not the embedding, item 0, nor
  /// the head, the last) in recomputeChunks' chunks.
  SegmentActivations segment(int64_t begin, int64_t end) const {
    SegmentActivations a{acts[end] - acts[begin], 0};
    const int64_t first = std::max<int64_t>(begin, 1),
                  last = std::min<int64_t>(end, numItems - 1);
    if (!recompute.full() || last <= first)
      return a;
    for (auto [b, e] : recomputeChunks(recompute, last - first)) {
      const int64_t chunk = acts[first + e] - acts[first + b];
      a.perMicrobatch = a.perMicrobatch - chunk + activation;
      a.once = std::max(a.once, chunk);
    }
    return a;
  }

  /// Peak bytes of `ppRank` holding `stages` stages with these parameters
  /// and activations: weights, gradients and optimizer state; activations
  /// of the microbatches in flight; a send and a receive buffer per stage.
  RankMemory parts(int64_t params, const SegmentActivations &a, int64_t stages,
                   int64_t ppRank) const {
    return rankMemory(
        params, bytesPerParam, static_cast<double>(a.perMicrobatch),
        inFlight[ppRank],
        saturatingAdd(saturatingMul(stages, p2pPerStage), a.once));
  }
  int64_t bytes(int64_t params, const SegmentActivations &a, int64_t stages,
                int64_t ppRank) const {
    return parts(params, a, stages, ppRank).total();
  }

  double bytesPerParam;
  int64_t activation, p2pPerStage;
  RecomputeSpec recompute;
  int64_t numItems;
  std::vector<int64_t> acts;
  std::vector<double> inFlight;
};

/// The memory of `ppRank` holding the items of `ranges`, by part: one
/// recomputed chunk comes back at a time on a rank.
RankMemory rankParts(const std::vector<ItemCost> &items,
                     const std::vector<std::pair<int64_t, int64_t>> &ranges,
                     const MemoryModel &memory, int64_t ppRank) {
  int64_t params = 0;
  SegmentActivations held;
  for (auto [begin, end] : ranges) {
    for (int64_t i = begin; i < end; ++i)
      params = saturatingAdd(params, items[i].params);
    SegmentActivations a = memory.segment(begin, end);
    held.perMicrobatch = saturatingAdd(held.perMicrobatch, a.perMicrobatch);
    held.once = std::max(held.once, a.once);
  }
  return memory.parts(params, held, static_cast<int64_t>(ranges.size()),
                      ppRank);
}

} // namespace

int64_t rankMemoryBytes(const std::vector<ItemCost> &items,
                        const std::vector<std::pair<int64_t, int64_t>> &ranges,
                        const AutoPartitionRequest &r, int64_t ppRank) {
  return rankParts(items, ranges, MemoryModel(r, items), ppRank).total();
}

std::vector<RankMemory> rankMemories(const std::vector<ItemCost> &items,
                                     const PatternPlacement &placement,
                                     const AutoPartitionRequest &r) {
  auto ranges = stageItemRanges(placement);
  std::vector<std::vector<std::pair<int64_t, int64_t>>> held(placement.pp);
  for (const PatternStage &s : placement.stages)
    held[s.ppRank].push_back(ranges[s.index]);
  const MemoryModel memory(r, items);
  std::vector<RankMemory> out;
  for (int64_t rank = 0; rank < placement.pp; ++rank)
    out.push_back(rankParts(items, held[rank], memory, rank));
  return out;
}

std::vector<std::pair<int64_t, int64_t>>
stageItemRanges(const PatternPlacement &placement) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  int64_t next = 0;
  auto last = static_cast<int64_t>(placement.stages.size()) - 1;
  for (const PatternStage &stage : placement.stages) {
    int64_t count = static_cast<int64_t>(stage.layers.size()) +
                    (stage.index == 0 ? 1 : 0) + (stage.index == last ? 1 : 0);
    ranges.push_back({next, next + count});
    next += count;
  }
  return ranges;
}

const char *objectiveName(PartitionObjective objective) {
  return objective == PartitionObjective::Params ? "params" : "time";
}

std::optional<PartitionObjective> parseObjective(std::string_view name) {
  if (name == "time")
    return PartitionObjective::Time;
  if (name == "params")
    return PartitionObjective::Params;
  return std::nullopt;
}

Expected<AutoPartitionResult> autoPartition(const AutoPartitionRequest &r) {
  const bool byTime = r.objective == PartitionObjective::Time;
  AutoPartitionResult result;
  result.items =
      modelItems(r.dims, r.settings, r.layers, r.mtpLayers, r.mtpDepths);
  for (const ItemCost &item : result.items) {
    if (!item.modelled && byTime)
      return fail(fmt::format(
          "the cost model has no FLOP count for '{}' layers, so it cannot "
          "balance them by time; use objective params, or place the "
          "layers yourself with '|'",
          item.name));
    result.costs.push_back(byTime ? item.totalFlops() : item.params);
  }

  int64_t segments = r.pp * r.vpp;
  const schedule::Placement style = schedule::placementOf(r.schedule);
  auto rankOf = [&](int64_t segment) {
    return schedule::rankOfStage(style, r.pp, segment);
  };
  SegmentFits fits;
  std::optional<int64_t> capBytes;
  if (r.maxMemoryGiB) {
    capBytes = static_cast<int64_t>(*r.maxMemoryGiB * kGiB);
    // A segment is one rank's stage; with vpp > 1 each stage gets an equal
    // share of the rank's cap (sufficient, not necessary: see docs/passes.md).
    // O(1) per query from prefix sums: the partitioner asks often. (They
    // stop at 2^63 - 1; a model past that puts more than the 1 TiB a rank
    // may hold on some rank, which the spec loader refuses after the split.)
    std::vector<int64_t> params(result.items.size() + 1, 0);
    for (size_t i = 0; i < result.items.size(); ++i)
      params[i + 1] = saturatingAdd(params[i], result.items[i].params);
    fits = [&r, rankOf, cap = *capBytes, params = std::move(params),
            memory = MemoryModel(r, result.items)](int64_t segment,
                                                   int64_t begin, int64_t end) {
      int64_t bytes =
          memory.bytes(params[end] - params[begin], memory.segment(begin, end),
                       1, rankOf(segment));
      return saturatingMul(bytes, r.vpp) <= cap;
    };
  }
  PartitionInfeasible infeasible{-1, 0, 0};
  auto partition = partitionMinMax(result.costs, segments, fits, &infeasible);
  if (!partition) {
    std::string message = partition.problem().message;
    if (infeasible.segment >= 0) {
      const PartitionInfeasible &e = infeasible;
      int64_t rank = rankOf(e.segment);
      int64_t needed = saturatingMul(
          rankMemoryBytes(result.items, {{e.begin, e.end}}, r, rank), r.vpp);
      message = fmt::format(
          "pp_rank {} cannot fit {} under max_memory_gib {:g}: it needs "
          "{} ({} short)",
          rank, describeItems(result.items, e.begin, e.end), *r.maxMemoryGiB,
          files::humanBytes(uint64_t(needed)),
          files::humanBytes(
              uint64_t(std::max<int64_t>(0, needed - *capBytes))));
    }
    return fail(message + "; raise max_memory_gib, or use more pipeline ranks");
  }
  result.partition = std::move(*partition);

  // Layers per segment: the embedding and the head are not pattern layers.
  auto numItems = static_cast<int64_t>(result.items.size());
  PatternPlacement &placement = result.placement;
  placement.pp = r.pp;
  placement.vpp = r.vpp;
  placement.virtualStages = r.vpp > 1;
  int64_t item = 0, layerOffset = 0;
  for (int64_t s = 0; s < segments; ++s) {
    PatternStage stage{s,  rankOf(s),   schedule::chunkOfStage(style, r.pp, s),
                       "", layerOffset, {}};
    for (int64_t j = 0; j < result.partition.segmentSizes[s]; ++j, ++item) {
      if (item == 0 || item == numItems - 1)
        continue;
      stage.layers.push_back(r.layers[item - 1]);
      stage.layerNumbers.push_back(item);
    }
    layerOffset += static_cast<int64_t>(stage.layers.size());
    if (s > 0)
      result.pattern += '|';
    result.pattern += stage.layers;
    placement.stages.push_back(std::move(stage));
  }
  for (int d = 0; d < r.mtpDepths; ++d)
    result.pattern += "/" + r.mtpLayers;
  if (r.mtpDepths > 0)
    placement.mtpOn = {rankOf(segments - 1),
                       schedule::chunkOfStage(style, r.pp, segments - 1)};
  return result;
}

} // namespace hypipe
