//===- Artifact.h - load a compiled artifact (runtime side) ---------------===//
//
// The one schema of manifest.json: `manifestToJson` (what `hypipe compile`
// writes) and `loadArtifact` (what hypipe-run reads, checking every field)
// sit side by side in Artifact.cpp, and a unit test round-trips them. Each
// stage is data: its kernel program (StageProgram.h), checked here before
// anything runs it. No LLVM or MLIR here: only the core and nlohmann-json.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_FORMATS_ARTIFACT_H
#define HYPIPE_RUNTIME_FORMATS_ARTIFACT_H

#include "core/data/DataFormat.h"
#include "core/data/Packing.h"
#include "core/model/LrSchedule.h"
#include "core/model/ModelDims.h"
#include "core/model/Precision.h"
#include "core/schedule/CommKind.h"
#include "core/schedule/Schedule.h"
#include "core/schedule/Vocabulary.h"
#include "runtime/formats/RuntimeError.h"
#include "runtime/formats/StageProgram.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace hypipe::rt {

/// Manifest format version: `hypipe compile` writes it, hypipe-run refuses
/// any other (docs/artifact.md). 4: the head's and MTP outputs' shapes
/// carry loss_chunk (the linear cross-entropy), which a version 3 reader
/// would call a corrupt manifest. 5: a MoE layer's saved tensors keep its
/// own experts' routed rows (MoeShape::heldRows), and with sequence
/// parallelism full recompute's checkpoints the rank's sequence shard, so a
/// version 4 artifact's saved sizes no longer match. 6: with sequence
/// parallelism a layer's saved input and rstd hold the rank's rows
/// (sequenceShards), so a version 5 artifact's saved sizes no longer match.
inline constexpr int kArtifactVersion = 6;

struct ParamEntry {
  std::string name;
  std::vector<int64_t> shape; ///< the whole tensor's
  /// `numel` floats from `offset`: the whole tensor, or this rank's shard
  /// of it when the artifact splits layers over tensor-parallel ranks
  /// (`split` by rows in `sections`, or by columns: TensorParallel.h).
  int64_t offset = 0, numel = 0;
  std::string init;
  double initA = 0, initB = 0;
  bool weightDecay = false;
  Split split = Split::None;
  std::vector<int64_t> sections;
  /// An expert's weight on an expert grid inside the tensor-parallel group:
  /// held by the ranks of expert-parallel rank `expertRank` of
  /// `expertRanks` (ParamSpec's; -1: every rank). `offset` is then its
  /// slot, which the other expert-parallel ranks use for their experts.
  int64_t expertRank = -1, expertRanks = 1;
  /// An expert's: the ranks of its expert-parallel rank it is cut over
  /// (etp; ParamSpec's).
  int64_t expertTp = 1;
  /// Shared by the heads a rank holds some of: its gradient summed over
  /// the tensor-parallel group (ParamSpec's).
  bool sharedByHeads = false;
};

/// One action of a rank's program: the schedule vocabulary's own type.
using ActionEntry = schedule::Action;

struct StageEntry {
  int64_t index = 0, ppRank = 0, vpStage = 0;
  bool hasEmbedding = false, hasHead = false;
  int64_t batch = 0, seq = 0, hidden = 0;
  /// Floats of the parameter (and gradient) buffer, of one microbatch's
  /// saved tensors and of the workspace: the program's buffers in fp32.
  int64_t numParams = 0, savedFloats = 0, workspaceFloats = 0;
  std::vector<ParamEntry> params;
  /// What the stage runs (StageProgram.h): its layers and kernel calls.
  StageProgram program;
};

struct TrainingConfig {
  int64_t seqLength = 0, microBatchSize = 0, steps = 0, seed = 0;
  double lr = 0, minLr = 0, weightDecay = 0, gradClip = 0;
  int64_t warmupSteps = 0;
  /// The learning rate decays to minLr by this step (Megatron's
  /// lr_decay_iters); 0: by `steps`.
  int64_t lrDecaySteps = 0;
  int64_t decayEnd() const { return lrDecaySteps > 0 ? lrDecaySteps : steps; }
  /// AdamW's betas and epsilon (Megatron's --adam-beta1, --adam-beta2,
  /// --adam-eps).
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  /// Megatron's --lr-decay-style, --lr-warmup-fraction (instead of
  /// warmupSteps when set) and WSD's final decay (LrSchedule.h).
  LrDecayStyle lrDecayStyle = LrDecayStyle::Cosine;
  std::optional<double> lrWarmupFraction;
  int64_t lrWsdDecaySteps = 0;
  WsdDecayStyle lrWsdDecayStyle = WsdDecayStyle::Exponential;
  /// The schedule these settings give a run of `globalBatch` samples a
  /// step, in samples as Megatron counts it (the warm-up a fraction of
  /// decayEnd() when lrWarmupFraction is set).
  LrSchedule lrSchedule(int64_t globalBatch) const;
  /// training.init_from: the checkpoint the run's weights start from (an
  /// absolute path; empty: initialised from the seed).
  std::string initFrom;
  /// training.tensorboard_dir (Megatron's --tensorboard-dir): where the
  /// first rank writes TensorBoard event files (an absolute path; empty:
  /// none).
  std::string tensorboardDir;
  /// training.calculate_per_token_loss: each microbatch's mean loss enters
  /// with weight (its loss tokens) / (the global batch's); false: with
  /// weight 1 / (the global batch's microbatches), Megatron's default.
  bool perTokenLoss = false;
};

/// The learning-rate schedule and AdamW settings of `t` as the manifest's
/// `training` keys of the same names: what a checkpoint also records
/// (`optimizer_config`) so that a resumed run keeps them.
/// readOptimizerSettings reads them back into `t`, throwing RuntimeError
/// naming `where` and the field.
nlohmann::json optimizerJson(const TrainingConfig &t);
void readOptimizerSettings(const nlohmann::json &j, const std::string &where,
                           TrainingConfig &t);

/// The model's dimensions as the manifest records them (for tools and the
/// PyTorch reference, which rebuild the model from them).
struct ModelInfo {
  std::string name, pattern;
  int64_t numLayers = 0, hidden = 0, vocab = 0;
  bool tieEmbeddings = true;
  std::string positionEmbedding;
  double moeAuxLossCoeff = 0;
  /// moe_expert_capacity_factor (0: dropless) and moe_token_drop_policy,
  /// for readers of the manifest (the kernel program carries them too).
  double moeExpertCapacityFactor = 0;
  std::string moeTokenDropPolicy = "probs";
  int64_t ffnHidden = 0, numHeads = 0, numQueryGroups = 0, kvChannels = 0;
  int64_t mambaNumHeads = 0, mambaHeadDim = 0, mambaState = 0,
          mambaNumGroups = 0, mambaConvWidth = 0;
  int64_t numExperts = 0, moeTopK = 0, moeFfnHidden = 0;
  std::string activation;
  /// Multi-token prediction: the pattern of each depth's layers, the number
  /// of depths and the weight of their mean loss (0 depths: none).
  std::string mtpPattern;
  int64_t mtpDepths = 0;
  double mtpLossScalingFactor = 0;
  /// The shape of every Gated DeltaNet ('G') and multi-latent attention
  /// ('+') layer, when the pattern has one: the sizes and rotary settings
  /// the spec's other keys do not give (what a Hugging Face export needs).
  std::optional<GdnShape> gdn;
  std::optional<MlaShape> mla;
};

/// The manifest's `model` object (docs/artifact.md), also kept in each
/// checkpoint's metadata (`model_config`) so that a checkpoint can be
/// exported without its artifact. parseModelInfo throws RuntimeError naming
/// `where` and the field.
nlohmann::json modelJson(const ModelInfo &model);
ModelInfo parseModelInfo(const nlohmann::json &model, const std::string &where);

/// The dimensions `model` has, for hypipe's rules and shapes (ModelDims.h).
ModelDims dimsOf(const ModelInfo &model);

/// Sequence packing (docs/data.md): samples of `globalBatchSize` per step
/// packed into microbatches of at most `maxTokens` tokens.
struct PackingConfig {
  bool enabled = false;
  int64_t maxTokens = 0, globalBatchSize = 0, minBins = 0, binMultiple = 0;
  std::string scheduler = "balanced";
  bool truncate = false;
  std::string mock; ///< the mock dataset's JSON (data format mock)
  /// A sample of n tokens costs perToken n + perSquaredToken n^2 (the cost
  /// model's training FLOPs): what the balanced scheduler evens out.
  double costPerToken = 0, costPerSquaredToken = 0;
};

/// pack()'s options for a run of `dp` data-parallel ranks under `config`
/// (enabled; its scheduler a known name).
packing::Options packingOptions(const PackingConfig &config, int64_t dp);

struct Artifact {
  std::string dir;
  Target target = Target::Cpu;
  TrainingPrecision precision = TrainingPrecision::Fp32;
  /// cuda: the oldest compute capability the stages run on (major * 10 +
  /// minor); 0 on cpu.
  int computeCapability = 0;
  ModelInfo model;
  schedule::ScheduleKind schedule = schedule::ScheduleKind::OneFOneB;
  int64_t pp = 1, vpp = 1, dp = 1, microbatches = 1;
  /// Tensor parallelism: every layer split over `tp` ranks (the stages'
  /// parameter ranges are a rank's shard), the residual stream split over
  /// them too with `sequenceParallel` (docs/tensor-parallel.md).
  int64_t tp = 1;
  bool sequenceParallel = false;
  int64_t groupSize = 1; ///< microbatch_group_size_per_vp_stage, as resolved
  /// AdamW moments sharded over the dp ranks (docs/runtime.md).
  bool distributedOptimizer = false;
  /// How tensors cross ranks: a schedule::CommKind name (parallel.comm;
  /// hypipe-run --comm replaces it).
  schedule::CommKind comm = schedule::CommKind::Auto;
  /// bf16 runs: keep the saved tensors in four bytes each instead of
  /// packing the activations among them into two (hypipe-run --saved-fp32,
  /// for comparison; not in the manifest).
  bool savedFp32 = false;
  int64_t numStages = 0;
  TrainingConfig training;
  std::string dataPath;
  DataFormat dataFormat = DataFormat::Text;
  PackingConfig packing;
  std::string specFile, specText;
  std::vector<StageEntry> stages;                 ///< all stages, by index
  std::vector<std::vector<ActionEntry>> programs; ///< per pp rank
  /// Packed runs: the programs (per pp rank) of every other microbatch
  /// count per data-parallel rank that packing can give a step and the
  /// schedule runs (packing::microbatchCounts), by count; written by the
  /// compiler, looked up by rankProgram.
  std::map<int64_t, std::vector<std::vector<ActionEntry>>> packedPrograms;
  /// The forward-only programs (per pp rank) evaluation runs over the
  /// artifact's microbatch count: the training programs' forwards with their
  /// transfers (schedule::forwardOnlySchedule); empty in older manifests.
  std::vector<std::vector<ActionEntry>> forwardPrograms;
  /// data.split as given ("969,30,1"; core/data/Split.h); empty: the whole
  /// data set trains and there is nothing to validate on.
  std::string split;

  /// Stages of `ppRank`, in vp_stage order.
  std::vector<StageEntry *> stagesOf(int64_t ppRank);
  /// The per-rank programs for `microbatches` (0: the artifact's own) as a
  /// schedule the simulator runs.
  schedule::Schedule asSchedule(int64_t microbatches = 0) const;
  /// The forward-only programs as a schedule the simulator runs.
  schedule::Schedule asForwardSchedule() const;
};

/// The data-parallel replicas the MoE layers' tp-ep group spans
/// (MoeShape::groupReplicas; 1 without an expert grid beyond the tensor-
/// parallel group): the same in every stage.
int64_t expertReplicas(const Artifact &artifact);

/// Bytes of hypipe-run's tensors on pipeline rank `ppRank` at its peak in a
/// step (core/schedule/Buffers.h: its program walked with the trainer's
/// buffer rules; parameters at runtimeBytesPerParameter). `microbatches`
/// other than the artifact's (a packed run's step) walks the compiled
/// program for that many; 0 means the artifact's. Throws RuntimeError when
/// the artifact has none.
int64_t rankTensorBytes(const Artifact &artifact, int64_t ppRank,
                        int64_t microbatches = 0);

/// Rank `ppRank`'s program for a step of `microbatches` (the artifact's
/// own, or one of packedPrograms); throws RuntimeError when the artifact
/// holds none for that count. With
/// `inSendOrder`, every rank receives from each peer in the order the peer
/// sends (schedule::receiveInSendOrder: what NCCL's links need).
std::vector<ActionEntry> rankProgram(const Artifact &artifact, int64_t ppRank,
                                     int64_t microbatches,
                                     bool inSendOrder = false);

/// Rank `ppRank`'s forward-only program (Artifact::forwardPrograms), as
/// rankProgram gives a training one; throws RuntimeError when the artifact
/// holds none (compiled before evaluation existed).
std::vector<ActionEntry> rankForwardProgram(const Artifact &artifact,
                                            int64_t ppRank,
                                            bool inSendOrder = false);

/// Bytes a rank's buffers hold per parameter it trains: the fp32 weight,
/// gradient and AdamW moments (the moments a dp-th under the distributed
/// optimizer), and in a bf16 run the bf16 copy the kernels read, which the
/// CPU emulation keeps in floats (4 more).
double runtimeBytesPerParameter(const Artifact &artifact);

/// manifest.json's content for `artifact` (what `hypipe compile` writes).
nlohmann::json manifestToJson(const Artifact &artifact);

/// Reads and checks a manifest's content, every size within its bound
/// (SizeBounds.h) before a stage is read; `path` names it in errors. Throws
/// RuntimeError.
Artifact artifactFromJson(const nlohmann::json &manifest,
                          const std::string &path);

/// The fields of `artifact` against each other (`path` names the manifest
/// in errors): counts positive and bounded, products without overflow, the
/// stages' shapes those of the training section, layers and parameters
/// inside their buffers, each rank's buffers within the 1 TiB a rank may
/// hold, embedding and head sized by the vocabulary, each (pp_rank,
/// vp_stage) once, and programs the simulator runs to the end.
/// Throws RuntimeError.
void checkArtifactConsistency(const Artifact &artifact,
                              const std::string &path);

/// Reads and checks `dir`/manifest.json (artifactFromJson, then
/// checkArtifactConsistency). Throws RuntimeError.
Artifact loadArtifact(const std::string &dir);

} // namespace hypipe::rt

#endif
