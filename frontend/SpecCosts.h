//===- SpecCosts.h - a spec's costs per stage and rank, simulated ---------===//
//
// What `hypipe explain` shows and `hypipe plan` ranks by: the cost model's
// costs summed per stage, each pipeline rank's memory estimate, and the
// spec's schedule simulated with those costs. One place, so the two commands
// cannot disagree.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_FRONTEND_SPECCOSTS_H
#define HYPIPE_FRONTEND_SPECCOSTS_H

#include "core/model/Cluster.h"
#include "core/model/CostModel.h"
#include "core/model/LayerShapes.h"
#include "core/model/MeasuredCosts.h"
#include "core/schedule/Buffers.h"
#include "core/schedule/Simulate.h"
#include "frontend/Spec.h"

#include <optional>
#include <vector>

namespace hypipe {

/// hypipe-run's buffers under a spec (runtimeBuffers): each stage's sizes
/// and, walking each pp rank's program, the most of each it holds at once.
struct RuntimeBuffers {
  std::vector<schedule::StageBuffers> stages; ///< by stage index
  std::vector<schedule::RankBuffers> peaks;   ///< by pp rank
  std::vector<int64_t> bytes;                 ///< by pp rank, at its peak
};

/// A spec's costs under its placement (no simulation).
struct SpecCosts {
  AutoPartitionRequest request;
  std::vector<ItemCost> stageCost; ///< by stage index
  std::vector<int64_t> rankParams; ///< by pp rank
  std::vector<int64_t> rankMemory; ///< bytes, by pp rank
  /// hypipe's own runtime on each pp rank, bytes at its peak (runtimeBuffers);
  /// empty when a layer kind has no kernel or the schedule has no programs.
  std::vector<int64_t> rankRuntimeMemory;
  /// What rankRuntimeMemory adds up (what activation recompute keeps among
  /// it); nullopt where rankRuntimeMemory is empty.
  std::optional<RuntimeBuffers> runtime;
  /// What a layout needs per rank: hypipe's runtime (rankRuntimeMemory), or
  /// the cost model's estimate where that is empty.
  const std::vector<int64_t> &rankPeakMemory() const {
    return rankRuntimeMemory.empty() ? rankMemory : rankRuntimeMemory;
  }
  /// The whole model's (rankParams are one tensor-parallel rank's).
  int64_t totalParams = 0;
  bool exact = true;  ///< every layer kind is costed
  std::string pinned; ///< the pattern with the placement's `|`
};

SpecCosts specCosts(const ModelSpec &spec);

/// The shape of pattern layer `symbol` in `spec`, or nullopt for a kind no
/// kernel runs (`D`, `+`).
std::optional<rt::LayerShape> patternLayerShape(const ModelSpec &spec,
                                                char symbol);

/// A stage's buffers in hypipe-run, sized as the compiler plans them (the
/// layer shapes of core/model/LayerShapes.h, placed as pipe-recompute places
/// them under training.recompute): parameters, one microbatch's saved floats
/// (with full recompute: the layers not recomputed and one activation per
/// checkpointed chunk), one recompute buffer's floats (the recomputed
/// layers'), and the workspace (the largest layer scratch and the two
/// activation buffers the stage ping-pongs, and with recompute two more).
/// nullopt for a layer kind no kernel runs.
std::optional<schedule::StageBuffers> stageBuffers(const ModelSpec &spec,
                                                   const PatternStage &stage);

/// What hypipe-run's tensors take on each pipeline rank at its peak, from
/// the spec alone: every stage's parameters with gradients and optimizer
/// state (runtimeBytesPerParameter), workspace, its peak of saved slots and
/// of recompute buffers, and the pooled activation buffers
/// (core/schedule/Buffers.h's walk of the rank's program). The estimate
/// `hypipe train` prints from the manifest, before compiling; nullopt where
/// stageBuffers is.
std::optional<RuntimeBuffers>
runtimeBuffers(const ModelSpec &spec, const schedule::Schedule &programs);

/// The programs the spec's ranks run: its schedule CSV's, or the generated
/// order with its communication.
Expected<schedule::Schedule> specPrograms(const ParallelSpec &par);

/// What a step is timed with (stepCosts).
struct StepModel {
  /// Layer costs a run measured: compute in seconds.
  const MeasuredCosts *measured = nullptr;
  /// A device with its link classes: compute in seconds from its rates
  /// (where nothing was measured), and communication timed on its links.
  const Cluster *cluster = nullptr;

  bool inSeconds() const { return measured || cluster; }
};

/// What each stage costs per microbatch, and its communication, for
/// simulateSpec: by default the cost model's FLOPs (one GFLOP = one time
/// unit; transfers free) with its activation bytes.
/// - With `measured` layer costs (core/model/MeasuredCosts.h) the unit is
///   seconds: every part of a stage (the embedding, each layer, the head,
///   each MTP depth and its layers) costs its kind's measured seconds scaled
///   by the cost model's FLOPs at the spec's shapes; fails naming a kind the
///   costs lack.
/// - With a `cluster` the unit is seconds too: compute at the device's rate
///   where nothing was measured; each pipeline hand-off on the link between
///   its two ranks' nodes; each stage's data-parallel gradient reduction (a
///   ring all-reduce of fp32 gradients, or with the distributed optimizer a
///   reduce-scatter, and an all-gather of the updated parameters at the
///   step's end) on its group's link, started when the stage's backward is
///   done, as hypipe-run starts it; the tied embedding's reduction between
///   the first and last pipeline ranks at the step's end.
Expected<schedule::Costs> stepCosts(const ModelSpec &spec,
                                    const std::vector<ItemCost> &stageCost,
                                    const StepModel &model = {});

/// The most compute any pipeline rank does in a step under `costs`: no
/// schedule of the layout ends sooner (a lower bound on its step).
double busiestRankCompute(const ModelSpec &spec, const schedule::Costs &costs);

/// The spec's programs (its schedule CSV's, or the generated order with its
/// communication) simulated with `costs` (stepCosts').
Expected<schedule::Simulation> simulateSpec(const ModelSpec &spec,
                                            const schedule::Costs &costs);

/// The share of a step of `makespan` (simulated with `costs`) that its
/// communication adds: the step with transfers and reductions free against
/// it; 0 when `costs` time none.
double communicationShare(const ModelSpec &spec, const schedule::Costs &costs,
                          double makespan);

/// Tokens of one training step: every data-parallel replica's microbatches.
double stepTokens(const ModelSpec &spec);

} // namespace hypipe

#endif
