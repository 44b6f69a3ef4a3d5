//===- Plan.h - the layouts of a spec for a rank count, fastest first -----===//
//
// `hypipe plan`'s search (docs/plan.md): tp x pp x dp = ranks, sequence
// parallelism, vpp, the schedule,
// the microbatch count that keeps the global batch, the distributed
// optimizer, and where a layout does not fit as it is, the linear
// cross-entropy and activation recompute. Each layout is loaded as a spec (so
// the loader's and the schedule library's checks decide what is valid), its
// memory estimate is held to the cap before anything is simulated, and the
// survivors are ranked by the simulated makespan of SpecCosts.h, the numbers
// `hypipe explain` prints.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_FRONTEND_PLAN_H
#define HYPIPE_FRONTEND_PLAN_H

#include "frontend/Spec.h"
#include "frontend/SpecCosts.h"

#include <optional>
#include <string>
#include <vector>

namespace hypipe {

struct PlanRequest {
  std::string specPath;
  int64_t ranks = 1;
  std::optional<double> memoryGiB;    ///< per-rank cap; none: no cap
  std::optional<int64_t> globalBatch; ///< samples; none: the spec's
  /// Measured layer costs (--costs): the step is simulated in seconds.
  std::optional<MeasuredCosts> costs;
  /// A device and its links (--device): the step is in seconds, compute at
  /// the device's rate where nothing was measured, and the pipeline
  /// hand-offs and data-parallel reductions timed on the links.
  std::optional<Cluster> cluster;
  /// Hold layouts to the memory a Megatron-LM run of the printed flags
  /// holds (the cost model's, bf16 storage: docs/cost-model.md) instead of
  /// hypipe-run's own (--memory-of megatron).
  bool megatronMemory = false;
  /// Candidates wanted (--top): a layout whose busiest rank alone needs
  /// longer than the top-th fastest simulated step is not simulated.
  std::optional<int64_t> top;
  /// The one tensor-parallel size to plan at (--tp), in place of the
  /// search's (tensorParallelSizes).
  std::optional<int64_t> tp;

  StepModel stepModel() const {
    return {costs ? &*costs : nullptr, cluster ? &*cluster : nullptr};
  }
};

/// One layout: the parallel fields it sets.
struct PlanLayout {
  int64_t tp = 1, pp = 1, vpp = 1, dp = 1, microbatches = 1;
  bool sequenceParallel = false; ///< tp > 1 only
  int64_t microBatchSize = 1;    ///< samples a microbatch
  schedule::ScheduleKind schedule = schedule::ScheduleKind::OneFOneB;
  bool distributedOptimizer = false;
  /// training.recompute: none, or (tried where none does not fit) full
  /// uniform recompute in chunks of the most layers a stage holds.
  RecomputeSpec recompute;
  /// model.cross_entropy_fusion_impl: linear (tried where the native loss
  /// does not fit, before and beside each recompute: docs/plan.md).
  bool linearCrossEntropy = false;
  /// The MoE layers' expert grid: parallel.ep and parallel.etp (0: tp,
  /// Megatron-LM's default; searched only for a Megatron-LM run:
  /// PlanRequest::megatronMemory).
  int64_t ep = 1, etp = 0;
  int64_t expertTensorParallel() const { return etp ? etp : tp; }
  /// Whether the experts are laid out other than the dense layers.
  bool expertGrid() const { return ep > 1 || expertTensorParallel() != tp; }
};

/// The layout's recompute as the plan's table shows it: "none", or
/// "full/uniform/N".
std::string recomputeText(const RecomputeSpec &recompute);

struct PlanCandidate {
  PlanLayout layout;
  ModelSpec spec;  ///< the original spec with the layout applied
  SpecCosts costs; ///< its memory per rank among them
  /// Per pp rank, the memory held to the cap: hypipe-run's, or Megatron's
  /// (PlanRequest::megatronMemory).
  std::vector<int64_t> memory;
  /// The simulated step: seconds with measured costs or a device, else
  /// GFLOP of one rank (transfers free without a device).
  double makespan = 0;
  /// The share of the step communication adds (the step with free
  /// transfers and reductions, against this one); 0 without a device.
  double communication = 0;
  double bubble = 0;            ///< the worst rank's idle fraction
  int64_t bytesSentPerStep = 0; ///< p2p between pipeline ranks, all of dp
  int64_t globalBatch = 0;
  int64_t peakMemory() const;
};

/// The layout that needs the least memory, when none fits the cap.
struct LeastMemory {
  PlanLayout layout;
  int64_t bytes = 0;
  int64_t ppRank = 0;
  std::vector<int64_t> stages; ///< the stage indices on that rank
};

struct Plan {
  std::vector<PlanCandidate> candidates; ///< fastest first
  int64_t simulated = 0;
  int64_t prunedByMemory = 0;
  /// Of the simulated: layouts that fit the cap only with full recompute
  /// (a layout is counted once: as simulated, not also as pruned).
  int64_t fitByRecompute = 0;
  /// Of the simulated: layouts that fit the cap only with the linear
  /// cross-entropy (with or without recompute).
  int64_t fitByLinearLoss = 0;
  /// Whether the search tries the linear cross-entropy (the spec's loss is
  /// native).
  bool searchedLoss = false;
  /// Not simulated: its busiest rank's compute alone is no faster than the
  /// top-th simulated step (PlanRequest::top).
  int64_t prunedByBound = 0;
  int64_t invalid = 0; ///< refused by the spec loader or the schedules
  /// Whether a layout pruned by memory could have beaten the winner: its
  /// busiest rank's compute alone is under the winner's makespan.
  bool memoryBound = false;
  std::optional<LeastMemory> leastMemory;
  /// The tensor-parallel sizes searched (tensorParallelSizes), and why the
  /// smallest one past them that the node holds was not (empty: none was
  /// refused).
  std::vector<int64_t> tensorParallelSizes{1};
  std::string tensorParallelRefusal;
};

/// The tensor-parallel sizes plan tries: on a GPU `cluster`, each divisor
/// of its GPUs per node (a tp group stays within a node) that every layer
/// kind of `spec` splits over (tensorParallelProblem); without one, the
/// spec's own tp. `refusal` gets why the smallest divisor left out was
/// refused ("tp 2: ..."), if one was.
std::vector<int64_t> tensorParallelSizes(const ModelSpec &spec,
                                         const std::optional<Cluster> &cluster,
                                         std::string *refusal = nullptr);
/// Why `spec` cannot be split over `tp` ranks ("" when it can): the first
/// layer kind tensorParallelProblem refuses.
std::string tensorParallelRefusal(const ModelSpec &spec, int64_t tp);

/// The layouts to try for `ranks` ranks (before loading): each tp of `tps`
/// dividing ranks, with sequence parallelism where tp > 1 divides the
/// sequence (as Megatron-LM requires), pp dividing ranks / tp,
/// the vpp values the pattern allows, every schedule whose shape the
/// schedule library accepts, the distributed optimizer when dp > 1, and
/// with `searchExperts` the expert grids of a MoE model (ep dividing the
/// experts, etp tp or 1; docs/plan.md).
std::vector<PlanLayout> planLayouts(const ModelSpec &spec, int64_t ranks,
                                    int64_t globalBatch,
                                    const std::vector<int64_t> &tps = {1},
                                    bool searchExperts = false);

/// Searches; an error when no layout uses `ranks` fully (naming the nearest
/// count that has one) or none fits the memory cap (naming the least memory
/// any layout needs and where).
Expected<Plan> plan(const PlanRequest &request);
/// Same, for the spec text `text` (named request.specPath).
Expected<Plan> plan(const std::string &text, const PlanRequest &request);

/// Megatron-LM's flags for the model itself (pretrain_mamba.py): sizes,
/// layer kinds, sequence, tokenizer, optimizer and precision; the same for
/// every layout of the spec.
std::string megatronModelArgs(const ModelSpec &spec);
/// Megatron-LM's flags for the candidate's placement and batch.
std::string megatronLayoutArgs(const PlanCandidate &candidate);
/// The complete argument list: the layout's flags, then the model's. Run on
/// tp x pp x dp GPUs (Megatron takes dp from the world size).
std::string megatronArgs(const PlanCandidate &candidate);
/// Why Megatron-LM cannot run the candidate (a schedule it does not have:
/// gpipe, zb-h1, zbv, dualpipev), or nullopt.
std::optional<std::string> megatronCannotRun(const PlanCandidate &candidate);

/// `specText` (the original spec) with the candidate's parallel section, its
/// pattern pinned with `|`, and relative data and init paths made absolute
/// (from `specDir`), checked by loading it back.
Expected<std::string> plannedSpecText(const std::string &specText,
                                      const std::string &specDir,
                                      const PlanCandidate &candidate);

} // namespace hypipe

#endif
