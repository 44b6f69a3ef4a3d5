//===- Stage.h - one pipeline stage of a rank: compute, transfers, slots --===//
//
// As PyTorch's pipelining `PipelineStage` (torch/distributed/pipelining/
// stage.py): a stage owns its parameter and gradient buffers, the bf16
// working copy of its weights, its activation slots, and runs one action at
// a time: forward, backward (B, or its input part I and weight part W), and
// the sends and receives of its activations and their gradients. What order
// the actions come in is the schedule runtime's (ScheduleRuntime.h); the
// kernels are the target's (runtime/kernels/Target.h), called from one place.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_EXEC_STAGE_H
#define HYPIPE_RUNTIME_EXEC_STAGE_H

#include "core/model/BufferLayouts.h"
#include "core/model/ShardLayout.h"
#include "runtime/comm/Transport.h"
#include "runtime/exec/SavedBuffers.h"
#include "runtime/formats/Artifact.h"
#include "runtime/kernels/StageArgs.h"
#include "runtime/kernels/Target.h"
#include "runtime/kernels/TensorParallelCalls.h"

#include <array>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace hypipe::rt {

class Comm;

using Buffer = DeviceArray<float>;

/// Activation-sized buffers of a rank, allocated once and reused by every
/// stage and step.
class ActivationPool {
public:
  explicit ActivationPool(Device &device) : device(device) {}
  Buffer take(int64_t floats);
  void giveBack(Buffer &&buffer) { pool.push_back(std::move(buffer)); }

private:
  Device &device;
  std::vector<Buffer> pool;
};

/// What one step moves between a rank's stages and to other ranks:
/// activations and input gradients by (stage, microbatch) key, the receives
/// posted for them, the sends in flight.
struct StepTensors {
  std::map<int64_t, Buffer> acts, grads;
  /// Receives posted where the program writes them, by the key of the
  /// tensor they fill (activations and gradients apart); the action that
  /// reads the tensor waits for it.
  std::map<int64_t, std::vector<Transport::Request>> postedActs, postedGrads;
  std::vector<Transport::Request> sends;
  std::vector<Buffer> sendBuffers;
  int64_t microbatches = 0; ///< this step's, per data-parallel rank
  int64_t activation = 0;   ///< floats of a planned activation buffer
  /// Floats of each microbatch's activations (its rows times hidden).
  std::vector<int64_t> activationFloats;
  int64_t sentBytes = 0;
};

/// Key of a (stage, microbatch) tensor in StepTensors' maps.
inline int64_t tensorKey(int64_t stage, int64_t mb) {
  return stage * (1 << 20) + mb;
}

/// The losses a step's forwards add up, each weighted by its microbatch's
/// share of the objective.
struct StepLosses {
  double loss = 0, aux = 0;
  std::vector<double> mtp; ///< per MTP depth
};

/// A pass's caller is told after each weight-gradient call (Megatron's
/// grad-ready hooks; StageArgs::weight_gradient_done).
struct WeightGradientHook {
  void (*done)(void *context, int32_t layer) = nullptr;
  void *context = nullptr;
};

/// Where a rank's stages send and receive: the transport, the ranks of the
/// pipeline peers and the wire format.
struct StageLinks {
  Transport &transport;
  Comm &comm;
  /// bf16 runs send activations and their gradients between ranks as bf16:
  /// two bytes a value, packed in place into the first half of the float
  /// buffer before the send and widened in place after the receive (the
  /// values are bf16 already, so nothing is lost).
  bool wireBf16 = false;
  DType wireType() const { return wireBf16 ? DType::BF16 : DType::F32; }
  /// The tensor-parallel group the layers split over (null at tp 1).
  TensorParallelGroup *tensorParallel = nullptr;
  /// The MoE layers' tp-ep group, over data-parallel replicas (null: none).
  TensorParallelGroup *expertParallel = nullptr;
  /// bf16 runs keep their saved tensors packed (SavedStash) unless this
  /// is set (hypipe-run --saved-fp32: four bytes each, for comparison).
  bool savedFp32 = false;
};

class Stage {
public:
  /// The stage of `entry`, its buffers `layout.bufferFloats()` floats (the
  /// distributed optimizer's padding included), its parameters initialised
  /// from `seed`.
  Stage(StageEntry &entry, const ShardLayout &layout, int64_t seed,
        Device &device, const StageLinks &links);

  const StageEntry &entry() const { return *stageEntry; }
  int64_t index() const { return stageEntry->index; }
  /// Which floats this rank's optimizer updates and where the gradient
  /// buckets fall (ShardLayout.h).
  const ShardLayout &shard() const { return layout; }
  /// The fp32 parameters (the main weights) and accumulated gradients.
  Buffer &params() { return mainParams; }
  Buffer &grads() { return gradients; }
  const Buffer &grads() const { return gradients; }
  /// bf16 runs: the bf16 copy of `params` the kernels compute with (empty
  /// in fp32), made at the stage's first forward after the main weights
  /// changed (Megatron's model parameters beside the optimizer's main ones).
  Buffer &workingCopy() { return working; }
  void mainWeightsChanged() { workingStale = true; }
  /// The working copy was made from the current main weights elsewhere (a
  /// gather of every rank's bf16 parts).
  void workingCopyIsCurrent() { workingStale = false; }

  /// F of microbatch `mb`: `args` holds the microbatch's inputs; adds its
  /// losses, times `scale`, to `losses`. A forward with no backward to
  /// follow (evaluation: `forwardOnly`) gives its saved tensors back at once.
  void forward(int64_t mb, StageArgs args, double scale, StepTensors &t,
               ActivationPool &pool, StepLosses &losses,
               bool forwardOnly = false);
  /// I of microbatch `mb` (B's input-gradient half).
  void backwardInput(int64_t mb, StageArgs args, StepTensors &t,
                     ActivationPool &pool);
  /// W of microbatch `mb` (B's weight-gradient half), telling `hook` of
  /// each call; frees the microbatch's activation slot.
  void backwardWeight(int64_t mb, StageArgs args, WeightGradientHook hook);

  /// SEND_F / SEND_B of `a`: the stage's output or input gradient.
  void send(const ActionEntry &a, StepTensors &t);
  /// RECV_F / RECV_B of `a`, posted; the action that reads it waits.
  void receive(const ActionEntry &a, StepTensors &t, ActivationPool &pool);
  /// Waits for the posted receive that feeds compute action `a`, if any;
  /// true when there was one (bf16: widened to floats).
  bool awaitInput(const ActionEntry &a, StepTensors &t);

  /// This stage's first MoE layer whose router met a NaN or infinite logit
  /// this step: its layer number (-1 inside an MTP depth) and the logit;
  /// layer 0 when none did.
  std::pair<int64_t, float> routerFault() const;

  /// measureLayers: every kernel call's wall time added to its layer's
  /// entry, [pass][layer], over `passRuns[pass]` runs of the pass.
  void measureLayers(bool on) { measuring = on; }
  const std::vector<double> &layerSeconds() const { return seconds; }
  const std::array<int64_t, 3> &passRuns() const { return runs; }

private:
  /// The one call into the stage runner.
  void run(StagePass pass, StageArgs &args);
  /// bf16 runs: rounds the main weights into the working copy when they
  /// changed since it was made (an update, a resume).
  void refreshWorkingCopy();

  StageEntry *stageEntry;
  ShardLayout layout;
  Device *device;
  StageLinks links;
  Buffer mainParams, gradients, working, workspace;
  bool workingStale = true;
  /// The saved tensors of microbatch `mb` for a pass (SavedBuffers.h):
  /// F takes them (`fresh`), I and W find them.
  float *savedOf(int64_t mb, const StageArgs &args, bool fresh);
  void releaseSaved(int64_t mb);

  /// Each in-flight microbatch's saved tensors: whole (fp32), or packed
  /// but the open one's (`stash`, bf16); with activation recompute, the
  /// recompute buffers (StageArgs::recomputed).
  MicrobatchBuffers saved, recomputed;
  std::unique_ptr<SavedStash> stash;
  /// A stage with MoE layers: one per program layer, where its routers
  /// record a non-finite logit; read once a step (routerFault).
  DeviceArray<RouterCheck> routerChecks;
  bool measuring = false;
  std::vector<double> seconds;
  std::array<int64_t, 3> runs{};
};

} // namespace hypipe::rt

#endif
