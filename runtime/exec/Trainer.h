//===- Trainer.h - one rank's training step, composed of its parts --------===//
//
// A step: the batch (StepBatch.h) runs through the rank's schedule program
// (ScheduleRuntime.h) on its stages (Stage.h), the data-parallel gradient
// reduction finishes (GradientSync.h), the gradients are clipped by the
// global norm and AdamW steps (Optimizer.h) at Megatron's learning-rate
// schedule (core/model/LrSchedule.h); checkpoints go through Checkpointer.h.
// The trainer opens the device and the transport and builds the parts over
// them.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_EXEC_TRAINER_H
#define HYPIPE_RUNTIME_EXEC_TRAINER_H

#include "runtime/comm/Comm.h"
#include "runtime/exec/Checkpointer.h"
#include "runtime/exec/GradientSync.h"
#include "runtime/exec/Optimizer.h"
#include "runtime/exec/ScheduleRuntime.h"
#include "runtime/exec/Stage.h"
#include "runtime/exec/StepBatch.h"

#include <array>
#include <memory>
#include <string>
#include <vector>

namespace hypipe::rt {

struct StepStats {
  int64_t step = 0;
  double loss = 0, auxLoss = 0, lr = 0, gradNorm = 0;
  /// Each MTP depth's loss (unweighted, normalised like `loss`; Megatron
  /// logs them as "mtp_1 loss", ...), and what they add to the objective:
  /// mtp_loss_scaling_factor / depths times their sum (0 without MTP).
  std::vector<double> mtpLosses;
  double mtpLoss = 0;
  double seconds = 0, tokensPerSecond = 0;
  /// The step's microbatches per data-parallel rank (packing varies it).
  int64_t microbatches = 0;
  /// Real tokens of the global batch, and what padding every sample to the
  /// longest of the step would have cost (equal without packing).
  int64_t tokens = 0, paddedTokens = 0;
  /// Bytes this rank sent to other pipeline ranks (activations forward,
  /// gradients back; bf16 runs send 2 bytes a value).
  int64_t sentBytes = 0;
  /// Data-parallel all-reduce buckets this rank started inside a stage's
  /// last weight-gradient pass, before its last call (GradientBuckets.h).
  int64_t bucketsInBackward = 0;
  /// This rank's tensor bytes held at the step's end, and the most held at
  /// once during it (the trace's memory counter).
  int64_t liveTensorBytes = 0, stepPeakTensorBytes = 0;
};

class Trainer {
public:
  /// Loads the stage libraries of `comm`'s pipeline rank, opens the device
  /// of the artifact's target (the GPU of the launcher's local rank for
  /// cuda) and initialises its parameters there; collective (creates the
  /// tied-parameter groups). `bucketFloats` is the data-parallel
  /// reduction's bucket size in floats (Megatron's --ddp-bucket-size;
  /// default 16 MiB of fp32): smaller buckets start sooner and finish in
  /// more pieces; with the distributed optimizer it also cuts the shards
  /// (ShardLayout.h).
  Trainer(Artifact &artifact, Comm &comm, TrainingData data,
          int64_t bucketFloats = kDefaultBucketFloats,
          TrainingData validation = {});
  /// Completes the distributed optimizer's parameter all-gathers still in
  /// flight (every rank started them).
  ~Trainer();

  /// Where this rank's tensors live ("cpu", "cuda:0 (...)").
  std::string deviceName() const { return device->describe(); }
  /// The transport between ranks ("mpi", "mpi-staged", "nccl").
  std::string_view transportName() const {
    return schedule::commKindName(transport->kind());
  }

  /// Runs training step `step` (1-based). With `dumpPath`, writes the
  /// parameters before the update, the gradients and the batch to a
  /// safetensors file (for reference checks) before clipping.
  StepStats step(int64_t step, const std::string &dumpPath = "");

  /// The validation loss (docs/runtime.md): global batches [first, first +
  /// batches) of the validation data given to the constructor, each run
  /// through the rank's forward-only program and reduced over the ranks as
  /// a step's loss is; their mean. Collective; touches no gradient, no
  /// optimizer state and no training batch.
  double evaluate(int64_t first, int64_t batches);

  /// Checkpointer::save, resume (setting resumedTraining) and initFrom.
  void save(const std::string &root, int64_t step) {
    checkpointer->save(root, step);
  }
  int64_t resume(const std::string &path) {
    return checkpointer->resume(path, resumedTraining);
  }
  void initFrom(const std::string &path) { checkpointer->initFrom(path); }
  /// After resume(): the training settings with the checkpointed run's
  /// learning-rate schedule and AdamW settings (Checkpointer::resume).
  TrainingConfig resumedTraining;

  /// Peak bytes of this rank's tensors so far, measured on its device:
  /// parameters, gradients, AdamW moments (this rank's shard with the
  /// distributed optimizer), workspaces, saved-activation slots, the pooled
  /// activation and gradient buffers and the batch.
  int64_t peakTensorBytes() const { return device->peakBytes(); }

  /// Samples per step: dp x microbatches x micro_batch_size, or
  /// data.global_batch_size when packing.
  int64_t globalBatch() const { return globalBatchSize(artifact, comm); }

  /// The spans of the last step (ScheduleRuntime.h).
  using Timing = TimedSpan;
  const std::vector<Timing> &timings() const { return runtime->timings(); }

  /// Layer timing for measured costs (hypipe-run --costs-out; cpu stages):
  /// while on, every kernel call's wall time is added to its layer's entry.
  void measureLayers(bool on) {
    for (Stage &s : stages)
      s.measureLayers(on);
  }

  /// Each local stage's measured seconds and pass counts: for stage `i`
  /// (in stagesOf order) seconds[pass][layer] over `passes[pass]` runs of
  /// the pass (forward, input-gradient, weight-gradient).
  struct LayerTimes {
    const StageProgram *program;
    std::vector<double> seconds; ///< [3 x program layers]
    std::array<int64_t, 3> passes{};
  };
  std::vector<LayerTimes> layerTimes() const;

private:
  /// What the step's ranks add up, in rank order so every rank computes
  /// the same bits: loss, aux loss, gradient norm, each MTP depth's loss;
  /// stops every rank on a router fault.
  void gatherStepTotals(StepStats &st, const StepLosses &losses);
  /// What the MTP depths add to the objective: mtp_loss_scaling_factor /
  /// depths times the sum of their losses (Megatron's MTPLossAutoScaler).
  double mtpObjective(const std::vector<double> &depthLosses) const;
  /// This rank's first MoE layer (stage and layer order) whose router met a
  /// NaN or infinite logit this step (Stage::routerFault).
  std::pair<int64_t, float> routerFault() const;
  /// Sums over the group the gradients of the parameters every tensor-
  /// parallel rank holds whole that are partial on each: every one under
  /// sequence parallelism (the norms saw a rank's rows), and always those
  /// the heads share (ParamSpec::sharedByHeads: a rank's heads' part).
  void sumTensorParallelPartialGrads();
  /// Clips by the global norm and steps the optimizer at step's lr.
  void applyUpdate(StepStats &st);

  Artifact &artifact;
  Comm &comm;
  std::unique_ptr<Device> device;
  std::unique_ptr<ActivationPool> pool;
  std::vector<Stage> stages; ///< this rank's, by vp_stage
  std::unique_ptr<StepBatch> batch;
  /// The validation data's batches (null without evaluation).
  std::unique_ptr<StepBatch> validationBatch;
  std::unique_ptr<GradientSync> gradSync;
  std::unique_ptr<AdamWOptimizer> optimizer;
  std::unique_ptr<ScheduleRuntime> runtime;
  std::unique_ptr<Checkpointer> checkpointer;
  /// The tensor-parallel group the stages' layers split over (tp > 1).
  std::unique_ptr<TensorParallelGroup> tensorParallel;
  /// The MoE layers' tp-ep group over data-parallel replicas (expert grids
  /// with etp x ep > tp).
  std::unique_ptr<TensorParallelGroup> expertParallel;
  int faultKillRank = -1;
  long faultKillStep = -1, faultNanStep = -1;
  /// How tensors cross ranks (--comm, resolved: transport->kind()). Last:
  /// destroyed first, so a transport torn down mid-step (an exception)
  /// aborts its transfers before the buffers they write are freed.
  std::unique_ptr<Transport> transport;
};

} // namespace hypipe::rt

#endif
