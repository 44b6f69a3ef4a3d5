//===- Trainer.h - run one rank's schedule program, step after step -------===//
//
// Interprets the rank's program (F, B, I, W on its stages, in the verified
// order), accumulates gradients over the microbatches, reduces tied
// embedding gradients, clips by the global norm and steps AdamW with fp32
// state under warm-up + cosine learning-rate decay.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_EXEC_TRAINER_H
#define HYPIPE_RUNTIME_EXEC_TRAINER_H

#include "core/data/Packing.h"
#include "core/model/BufferLayouts.h"
#include "core/model/CostModel.h"
#include "runtime/comm/Comm.h"
#include "runtime/comm/Transport.h"
#include "runtime/data/Data.h"
#include "runtime/data/Samples.h"
#include "runtime/exec/ShardLayout.h"
#include "runtime/formats/Artifact.h"
#include "runtime/kernels/StageArgs.h"
#include "runtime/kernels/Target.h"

#include <array>
#include <functional>
#include <map>
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

/// Where a run's samples come from: one stream of tokens cut into windows
/// of seq_length (`stream`), or variable-length samples packed into
/// microbatches (`samples`, docs/data.md).
struct TrainingData {
  const Dataset *stream = nullptr;
  const SampleSource *samples = nullptr;
};

/// Learning rate of step `step` (1-based): linear warm-up from 0, then
/// cosine decay to min_lr at the last step (Megatron's schedule).
double learningRate(const TrainingConfig &config, int64_t step);

/// Collective: when any rank's `error` is non-empty, every rank throws a
/// CollectiveError of `what` followed by each distinct message once, with
/// the ranks that raised it (rank 0 prints it).
void agreeAcrossRanks(Comm &comm, const std::string &error,
                      const std::string &what);

/// Runs `work` on every rank and agrees on the RuntimeError it throws
/// (agreeAcrossRanks), so that a fault every rank meets (an edited
/// manifest, missing data) is said once; one process throws it as it is.
void onEveryRank(Comm &comm, const std::string &what,
                 const std::function<void()> &work);

/// Gradients are reduced over data parallelism in buckets of at most this
/// many floats (16 MiB; GradientBuckets.h, ShardLayout.h).
inline constexpr int64_t kDefaultBucketFloats = kDefaultGradientBucketFloats;

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
          int64_t bucketFloats = kDefaultBucketFloats);
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

  /// Saves parameters and AdamW state after step `step` to
  /// `root`/step_NNNNNNNN and points `root`/latest at it (collective;
  /// Checkpoint.h). Throws CollectiveError, leaving the previous checkpoint
  /// as it was, when any rank fails to write.
  void save(const std::string &root, int64_t step);
  /// Restores parameters and AdamW state from a checkpoint (root, step
  /// directory or merged file, of any layout of the same model) and returns
  /// the step it was saved after. Throws CollectiveError.
  int64_t resume(const std::string &path);
  /// Replaces the parameters with those of a checkpoint (any layout of the
  /// same layers, or a `hypipe ckpt import` file); the optimizer state and
  /// the step stay fresh. Throws CollectiveError.
  void initFrom(const std::string &path);

  /// Peak bytes of this rank's tensors so far, measured on its device:
  /// parameters, gradients, AdamW moments (this rank's shard with the
  /// distributed optimizer), workspaces, saved-activation slots, the pooled
  /// activation and gradient buffers and the batch.
  int64_t peakTensorBytes() const;

  /// Samples per step: dp x microbatches x micro_batch_size, or
  /// data.global_batch_size when packing.
  int64_t globalBatch() const;

  /// One span of the last step, in seconds since the trainer started (for
  /// traces): a compute or transfer action, the wait on a posted receive,
  /// the data-parallel gradient reduction, the optimizer step.
  struct Timing {
    /// An action's is Megatron's notation (schedule::megatronText, as the
    /// simulator's trace names it): `F3.1`, `wait B2.0`.
    std::string name;
    /// schedule::traceCategory of the action (F, B, I, W, SEND_F, RECV_B,
    /// REDUCE_GRAD: the stage's data-parallel reduction started, ...),
    /// schedule::kWaitCategory for the wait on a posted receive,
    /// kDpReductionCategory or kOptimizerCategory.
    const char *category;
    double start, end;
    /// The action's stage and microbatch; -1 for spans of no action.
    int32_t stage = -1, microbatch = -1;
    /// Runs beside the rank's actions instead of between them (the
    /// reduction, from its first bucket's start until the rank saw the last
    /// one done): the trace shows it on a track of its own.
    bool overlapping = false;
  };
  const std::vector<Timing> &timings() const { return lastTimings; }

  /// Layer timing for measured costs (hypipe-run --costs-out; cpu stages):
  /// while on, every kernel call's wall time is added to its layer's entry.
  void measureLayers(bool on) { measuring = on; }

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
  using Buffer = DeviceArray<float>;
  struct StageState {
    StageEntry *entry;
    /// params and grads hold shard.bufferFloats(), adamM and adamV this
    /// rank's parts of every bucket (all of the stage when not sharded).
    Buffer params, grads, adamM, adamV, workspace;
    /// bf16 runs: the bf16 copy of `params` (the fp32 main weights) the
    /// kernels compute with, made at the stage's first forward after the
    /// main weights changed (Megatron's model parameters beside the
    /// optimizer's main ones). Empty in fp32.
    Buffer working;
    bool workingStale = true;
    /// Sharded bf16 runs: the all-gather in flight carries the bf16 working
    /// copy (in the gradient buffer), not the fp32 weights
    /// (gatherWorkingCopy; awaitParameters finishes it).
    bool gatheringWorking = false;
    /// Which floats this rank's optimizer updates: with the distributed
    /// optimizer its part of every bucket, otherwise one part of all.
    ShardLayout shard;
    /// Sharded runs: the buckets holding a parameter tied to another stage
    /// (the embedding and the output layer), whose reduce-scatter waits for
    /// the tied sum: the copies sit at other offsets of other buffers, and
    /// the sums commute. The other buckets go in the backward.
    std::vector<bool> tiedBuckets;
    void markTied(const ParamEntry &p) {
      tiedBuckets.resize(size_t(shard.buckets()), false);
      for (int64_t b = p.offset / shard.stride();
           b < shard.buckets() && shard.bucketBegin(b) < p.offset + p.numel;
           ++b)
        tiedBuckets[size_t(b)] = true;
    }
    bool waitsForTiedSum(int64_t bucket) const {
      return size_t(bucket) < tiedBuckets.size() && tiedBuckets[size_t(bucket)];
    }
    /// The all-gather of the updated parameters, while in flight.
    std::vector<Transport::Request> paramGather;
    std::vector<Buffer> slots;
    std::vector<int> freeSlots;
    int64_t backwardsDone = 0; ///< B or W actions this step
    /// What the optimizer goes over, fixed for the run: every parameter's
    /// part in the rank's part of each bucket (AdamW, by bucket), and those
    /// the gradient norm counts here (a tied copy only on its first stage).
    std::vector<std::vector<ParamSegment>> updated;
    std::vector<ParamSegment> normed;
    /// The step's program starts this stage's data-parallel reduction at
    /// its REDUCE_GRAD; otherwise it starts in the last backward, each
    /// bucket once final (bucketsAfterLayer), or after the tied sum when
    /// sharded and tied.
    bool reducedByProgram = false;
    /// bucketsFinalAfter(GradientBuckets.h) for bucketsFor floats a bucket.
    std::vector<std::vector<int64_t>> bucketsAfterLayer;
    int64_t bucketsFor = 0;
    /// A stage with MoE layers: one per program layer, where its routers
    /// record a non-finite logit; read once a step (routerFault).
    DeviceArray<RouterCheck> routerChecks;
    /// measureLayers: [pass][layer] seconds, and the runs of each pass.
    std::vector<double> layerSeconds;
    std::array<int64_t, 3> passRuns{};
  };

  /// What one step's program moves between actions: activations and
  /// input gradients by (stage, microbatch), saved slots, pending sends.
  struct StepState {
    std::map<int64_t, Buffer> acts, grads;
    std::map<int64_t, int> slotOf;
    std::vector<Transport::Request> sends;
    /// Receives posted where the program writes them, by the key of the
    /// tensor they fill (activations and gradients apart); the action that
    /// reads the tensor waits for it.
    std::map<int64_t, std::vector<Transport::Request>> postedActs, postedGrads;
    std::vector<Buffer> sendBuffers;
    int64_t microbatches = 0; ///< this step's, per data-parallel rank
    int64_t activation = 0;   ///< floats of a planned activation buffer
    double loss = 0, aux = 0;
    std::vector<double> mtp; ///< per MTP depth
    int64_t sentBytes = 0;
  };

  /// One microbatch of this rank's step: where its tokens, labels and mask
  /// start, how many rows it has, its sample boundaries (packed) and the
  /// weight of its loss in the step's objective.
  struct Microbatch {
    int64_t offset = 0, tokens = 0;
    std::vector<int32_t> cuSeqlens; ///< empty: batch x seq rows
    int64_t cuOffset = 0;           ///< of its cuSeqlens in the device copy
    double scale = 1;
  };

  /// A rank's program for some microbatch count, with its actions' texts.
  struct Program {
    std::vector<ActionEntry> actions;
    /// PyTorch's text of each action (`1RECV_F0`, with the stage), as the
    /// manifest and messages name it; and its trace name (Timing::name).
    std::vector<std::string> texts, traceNames;
    /// Global stages whose REDUCE_GRAD the program carries.
    std::vector<int32_t> reduceGradStages;
  };

  /// Runs the rank's program for the loaded batch: one handler per action
  /// kind; returns the bytes its sends put on the wire.
  int64_t runProgram(double &loss, double &aux, std::vector<double> &mtp);
  /// Puts the loaded batch where the stages read it (the device's memory).
  void stageBatch();
  /// An activation-sized buffer from the pool (allocated once, reused).
  Buffer takeActivation(int64_t floats);
  void giveBack(Buffer &&buffer);
  /// Load this data-parallel rank's microbatches of step `step` and fill
  /// the microbatch and token counts of `stats`: windows of the token
  /// stream, or the step's samples packed (every rank the same way).
  void loadBatch(int64_t step, StepStats &stats);
  void loadPackedBatch(int64_t step, StepStats &stats);
  /// This rank's program for `microbatches` microbatches: the compiled one,
  /// or built and verified with the schedule library the compiler uses.
  const Program &programFor(int64_t microbatches);
  int64_t activationFloats(const ActionEntry &a) const;
  StageState &localStage(int64_t stage);
  StageArgs stageArgs(StageState &s, const ActionEntry &a);
  /// bf16 runs: rounds the stage's main weights into its working copy
  /// when they changed since it was made (an update, a resume).
  void refreshWorkingCopy(StageState &s);
  /// Marks every stage's working copy out of date.
  void mainWeightsChanged();
  /// measureLayers: points `args` at the stage's layer timings for `pass`.
  void timePass(StageState &s, StageArgs &args, int pass);
  void send(const ActionEntry &a, StepState &st);
  void receive(const ActionEntry &a, StepState &st);
  /// bf16 runs send activations and their gradients between ranks as
  /// bf16: two bytes a value, packed in place into the first half of the
  /// float buffer before the send and widened in place after the receive
  /// (the values are bf16 already, so nothing is lost).
  bool wireBf16() const;
  /// The message's element type and count for `floats` activation values.
  DType wireType() const { return wireBf16() ? DType::BF16 : DType::F32; }
  /// Waits for the posted receive that feeds compute action `a`, if any;
  /// true when there was one (bf16: widened to floats).
  bool awaitInput(const ActionEntry &a, StepState &st);
  void forward(const ActionEntry &a, StepState &st);
  /// B, or its halves I (input gradients) and W (weight gradients).
  void backward(const ActionEntry &a, StepState &st);
  void startDpReduction(StageState &s);
  /// Starts the reduction of the buckets of `s` that are final after
  /// `layer`'s weight gradient (layers.size(): those no call writes), and
  /// moves the reductions in flight along; returns how many it started.
  int64_t startBuckets(StageState &s, size_t layer);
  /// Starts the reduction of `s`'s gradient bucket `bucket`: an all-reduce,
  /// or with the distributed optimizer a reduce-scatter into the ranks'
  /// parts; false for a bucket that waits for the tied sum (sharded).
  bool reduceBucket(StageState &s, int64_t bucket);
  /// Sharded runs: the reduce-scatter of `s`'s gradient bucket `bucket`
  /// into the ranks' parts, and the all-gather of that bucket of `buffer`
  /// (its parameters or gradients, fp32) from them.
  Transport::Request scatterBucket(StageState &s, int64_t bucket);
  Transport::Request gatherBucket(StageState &s, float *buffer, int64_t bucket);
  /// StageArgs::weight_gradient_done in a stage's last backward, with a
  /// BucketHook as its context.
  static void weightGradientDone(void *context, int32_t layer);
  struct BucketHook {
    Trainer *trainer;
    StageState *stage;
  };
  void reduceTiedGradients();
  /// True when the AdamW state is sharded over data-parallel ranks.
  bool sharded() const;
  /// Sharded runs: reduce-scatters what the program left (the buckets
  /// holding tied parameters) and puts each rank's parts of summed
  /// gradients in place.
  void finishShardedReduction();
  /// Waits for the all-gather of `s`'s parameters after the last update
  /// (bf16: widens the gathered working copy, zeroes the gradients).
  void awaitParameters(StageState &s);
  /// Sharded bf16 runs: starts the all-gather of the updated parameters as
  /// bf16 (Megatron gathers its bf16 model parameters): half the bytes of
  /// fp32, and every rank's fp32 main weights stay current in its own
  /// block only.
  void gatherWorkingCopy(StageState &s, int64_t bucket);
  /// The bucket size the stage's reduction goes in.
  int64_t bucketStride(const StageState &s) const;
  /// A stage's fp32 parameters on the rank that writes the checkpoint
  /// (gathered from each rank's own parts when sharded); {} elsewhere.
  std::vector<float> fullParameters(StageState &s);
  /// A stage's AdamW moment (`m` or `v`) over all of its parameters, on
  /// the rank that writes the checkpoint (gathered when sharded).
  std::vector<float> fullMoment(StageState &s, const Buffer &moment);
  /// The whole of a stage's buffer on the rank that writes the checkpoint,
  /// from every rank's `mine` (its shard, ShardLayout::shardOf); {}
  /// elsewhere (collective over the data-parallel group).
  std::vector<float> gatherShards(const StageState &s,
                                  const std::vector<float> &mine);
  double localGradNormSquared() const;
  /// This rank's first MoE layer (stage and layer order) whose router met a
  /// NaN or infinite logit this step: its layer number and the logit; layer
  /// 0 when none did.
  std::pair<int64_t, float> routerFault() const;
  void optimizerStep(int64_t step, double lr, double clipScale);
  void dump(const std::string &path, int64_t step, double loss, double aux,
            const std::vector<double> &mtp);
  /// What the MTP depths add to the objective: mtp_loss_scaling_factor /
  /// depths times the sum of their losses (Megatron's MTPLossAutoScaler).
  double mtpObjective(const std::vector<double> &depthLosses) const;

  Artifact &artifact;

public:
  /// The checkpoint's lr decay end after resume() (0: not recorded).
  int64_t resumedDecayEnd = 0;

private:
  Comm &comm;
  std::unique_ptr<Device> device;
  std::vector<Buffer> activationPool;
  /// The batch in device memory (cuda), and where the stages read it.
  DeviceArray<int32_t> deviceTokens, deviceLabels, deviceCuSeqlens;
  Buffer deviceLossMask;
  const int32_t *batchTokens = nullptr, *batchLabels = nullptr,
                *batchCuSeqlens = nullptr;
  const float *batchLossMask = nullptr;
  int64_t ppRank;
  TrainingData data;
  std::vector<StageState> stages;      ///< this rank's, by vp_stage
  std::vector<int32_t> tokens, labels; ///< this step's microbatches, in order
  std::vector<float> lossMask;         ///< packed runs only
  std::vector<Microbatch> batch;       ///< this step's, this dp rank's
  std::map<int64_t, Program> programs; ///< by microbatch count
  packing::Options packOptions;        ///< packed runs only
  /// Parameters that appear in more than one local stage (tied embedding):
  /// (stage, offset) of each copy, by name.
  std::map<std::string, std::vector<std::pair<size_t, int64_t>>> copies;
  /// Tied parameters with copies on other pipeline ranks and the group that
  /// sums them.
  struct TiedGroup {
    std::string name;
    Transport::Group group;
  };
  std::vector<TiedGroup> tiedGroups;
  /// First stage (over all ranks) of each parameter held by several stages.
  std::map<std::string, int64_t> firstStage;
  std::vector<Transport::Request> dpRequests;
  int64_t bucketsInBackward = 0; ///< this step's (StepStats)
  int64_t bucketFloats = kDefaultBucketFloats;
  std::vector<Timing> lastTimings;
  /// When this step's first data-parallel bucket started (seconds since
  /// `epoch`; < 0 before it) and when the rank saw its last one done.
  double reductionBegin = -1, reductionEnd = 0;
  double epoch = 0;
  bool measuring = false;
  int faultKillRank = -1;
  long faultKillStep = -1, faultNanStep = -1;
  /// How tensors cross ranks (--comm, resolved: transport->kind()). Last:
  /// destroyed first, so a transport torn down mid-step (an exception)
  /// aborts its transfers before the buffers they write are freed.
  std::unique_ptr<Transport> transport;
};

} // namespace hypipe::rt

#endif
