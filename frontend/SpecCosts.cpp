//===- SpecCosts.cpp - a spec's costs per stage and rank ------------------===//
#include "frontend/SpecCosts.h"

#include "core/partition/AutoPartition.h"

#include <algorithm>

namespace hypipe {

namespace {

/// The costs of each stage: its items summed, and what it sends on.
std::vector<ItemCost> stageCosts(const std::vector<ItemCost> &items,
                                 const PatternPlacement &placement) {
  const int64_t last = static_cast<int64_t>(placement.stages.size()) - 1;
  auto ranges = stageItemRanges(placement);
  std::vector<ItemCost> stageCost(placement.stages.size());
  for (const PatternStage &s : placement.stages) {
    auto [begin, end] = ranges[s.index];
    ItemCost &c = stageCost[s.index];
    for (int64_t i = begin; i < end; ++i)
      c += items[i];
    c.sendBytes = s.index == last
                      ? 0
                      : items[std::max<int64_t>(begin, end - 1)].sendBytes;
    if (s.index != last &&
        begin == end) // an empty stage passes the activations on
      c.sendBytes = items[0].sendBytes;
  }
  return stageCost;
}

} // namespace

SpecCosts specCosts(const ModelSpec &spec) {
  SpecCosts c;
  c.request = spec.partitionRequest();
  const AutoPartitionRequest &request = c.request;
  const PatternPlacement &placement = spec.placement;
  std::vector<ItemCost> items =
      modelItems(request.dims, request.settings, request.layers,
                 request.mtpLayers, request.mtpDepths);
  c.stageCost = stageCosts(items, placement);
  c.rankParams.assign(placement.pp, 0);
  for (const PatternStage &s : placement.stages)
    c.rankParams[s.ppRank] += c.stageCost[s.index].params;
  for (const RankMemory &memory : rankMemories(items, placement, request))
    c.rankMemory.push_back(memory.total());
  for (int64_t params : c.rankParams)
    c.totalParams += params;
  c.exact = std::all_of(items.begin(), items.end(),
                        [](const ItemCost &item) { return item.modelled; });
  c.pinned = patternWithStages(spec.pattern, placement);
  return c;
}

Expected<schedule::Schedule> specPrograms(const ParallelSpec &par) {
  if (par.csvPrograms) {
    schedule::Schedule programs = *par.csvPrograms;
    schedule::insertCommunication(programs);
    return programs;
  }
  auto built = schedule::buildSchedule(
      {par.schedule, par.pp, par.vpp, par.microbatches, par.groupSize});
  if (!built)
    return built.takeError();
  schedule::insertCommunication(*built);
  return built;
}

Expected<schedule::Simulation>
simulateSpec(const ModelSpec &spec, const std::vector<ItemCost> &stageCost) {
  auto built = specPrograms(spec.parallel);
  if (!built)
    return built.takeError();
  schedule::Costs costs;
  for (const ItemCost &c : stageCost) {
    costs.stageF.push_back(static_cast<double>(c.forwardFlops) / 1e9);
    costs.stageI.push_back(static_cast<double>(c.backwardInputFlops) / 1e9);
    costs.stageW.push_back(static_cast<double>(c.backwardWeightFlops) / 1e9);
    costs.stageB.push_back(
        static_cast<double>(c.backwardInputFlops + c.backwardWeightFlops) /
        1e9);
    costs.activationBytes.push_back(static_cast<double>(c.activationBytes));
  }
  return schedule::simulate(*built, costs);
}

} // namespace hypipe
