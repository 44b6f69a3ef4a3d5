//===- SpecCosts.h - a spec's costs per stage and rank, and its simulation
//-===//
//
// What `hypipe explain` shows and `hypipe plan` ranks by: the cost model's
// costs summed per stage, each pipeline rank's memory estimate, and the
// spec's schedule simulated with those costs. One place, so the two commands
// cannot disagree.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_FRONTEND_SPECCOSTS_H
#define HYPIPE_FRONTEND_SPECCOSTS_H

#include "core/model/CostModel.h"
#include "core/schedule/Simulate.h"
#include "frontend/Spec.h"

#include <vector>

namespace hypipe {

/// A spec's costs under its placement (no simulation).
struct SpecCosts {
  AutoPartitionRequest request;
  std::vector<ItemCost> stageCost; ///< by stage index
  std::vector<int64_t> rankParams; ///< by pp rank
  std::vector<int64_t> rankMemory; ///< bytes, by pp rank
  int64_t totalParams = 0;
  bool exact = true;  ///< every layer kind is costed
  std::string pinned; ///< the pattern with the placement's `|`
};

SpecCosts specCosts(const ModelSpec &spec);

/// The programs the spec's ranks run: its schedule CSV's, or the generated
/// order with its communication.
Expected<schedule::Schedule> specPrograms(const ParallelSpec &par);

/// The spec's schedule simulated with the cost model's per-stage FLOPs (one
/// GFLOP = one time unit; transfers free) and activation bytes.
Expected<schedule::Simulation>
simulateSpec(const ModelSpec &spec, const std::vector<ItemCost> &stageCost);

} // namespace hypipe

#endif
