//===- Spec.h - the YAML model spec ---------------------------------------===//
//
// A spec has four sections, `model`, `parallel`, `training` and `data`; every
// field and its default is in docs/spec.md. Loading checks every field and
// the consistency of the whole, and reports the first problem as
// `file:line:col: error: ...` with the line, a caret and a `help:` line.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_FRONTEND_SPEC_H
#define HYPIPE_FRONTEND_SPEC_H

#include "core/data/DataFormat.h"
#include "core/lang/HybridPattern.h"
#include "core/model/LayerShapes.h"
#include "core/model/LrSchedule.h"
#include "core/model/ModelDims.h"
#include "core/model/Precision.h"
#include "core/model/Recompute.h"
#include "core/partition/AutoPartition.h"
#include "core/schedule/CommKind.h"
#include "core/schedule/Schedule.h"

#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hypipe {

struct ParallelSpec {
  int64_t pp = 1;
  int64_t vpp = 1;
  int64_t dp = 1;
  /// Megatron-LM's --tensor-model-parallel-size: each layer split over tp
  /// ranks (docs/tensor-parallel.md).
  int64_t tp = 1;
  /// Megatron-LM's --sequence-parallel: the norms and the residual stream
  /// hold a tp-th of the tokens (tp > 1 only).
  bool sequenceParallel = false;
  /// Megatron-LM's --expert-model-parallel-size: each MoE layer's experts
  /// spread over ep ranks, rank r of the expert grid holding experts
  /// [r E/ep, (r+1) E/ep) (docs/expert-parallel.md).
  int64_t ep = 1;
  /// --expert-tensor-parallel-size: each expert's width split over etp
  /// ranks; the spec's loader sets it to tp when left out, as Megatron-LM.
  int64_t etp = 1;
  /// The expert grid's data-parallel size, (tp x dp) / (etp x ep): the
  /// ranks that hold the same experts and sum their gradients.
  int64_t expertDataParallel() const { return tp * dp / (etp * ep); }
  /// Whether the layout is anything but Megatron-LM's default for MoE
  /// layers (every expert on every rank, split like the dense layers).
  bool expertParallel() const { return ep > 1 || etp != tp; }
  schedule::ScheduleKind schedule = schedule::ScheduleKind::OneFOneB;
  int64_t microbatches = 1;
  /// microbatch_group_size_per_vp_stage: pp when the spec leaves it out.
  int64_t groupSize = 1;
  std::optional<int64_t> firstStageLayers;
  std::optional<int64_t> lastStageLayers;
  std::string layout; ///< Optional Megatron layout string (`E t m L`).
  PartitionObjective objective = PartitionObjective::Time;
  std::optional<double> maxMemoryGiB; ///< auto-partition memory cap per rank
  /// Megatron's --use-distributed-optimizer (ZeRO-1): the AdamW moments
  /// sharded over the data-parallel ranks of each pipeline rank.
  bool distributedOptimizer = false;
  /// How tensors cross ranks; hypipe-run --comm replaces it.
  schedule::CommKind comm = schedule::CommKind::Auto;
  /// A PyTorch pipelining CSV whose programs the ranks run instead of the
  /// generated order of `schedule` (which still places the stages): an
  /// absolute path once loaded; empty for the generated order.
  std::string scheduleCsv;
  /// Its programs as loaded and verified (as written, without inserted
  /// communication).
  std::optional<schedule::Schedule> csvPrograms;

  /// The world size: the ranks a run starts, Megatron-LM's tp x pp x dp.
  int64_t ranks() const { return tp * pp * dp; }
};

struct TrainingSpec {
  int64_t seqLength = 128;
  int64_t microBatchSize = 1;
  int64_t steps = 100;
  int64_t seed = 1234;
  double lr = 1e-3;
  double minLr = 1e-4;
  int64_t warmupSteps = 10;
  double weightDecay = 0.01;
  double gradClip = 1.0;
  /// Steps over which the learning rate decays to min_lr (Megatron's
  /// --lr-decay-iters); 0: training.steps.
  int64_t lrDecaySteps = 0;
  /// Megatron's --lr-decay-style (core/model/LrSchedule.h).
  LrDecayStyle lrDecayStyle = LrDecayStyle::Cosine;
  /// Megatron's --lr-warmup-fraction: warm-up over this fraction of the
  /// decay steps instead of warmup_steps.
  std::optional<double> lrWarmupFraction;
  /// WSD's final decay: its steps (--lr-wsd-decay-iters) and shape.
  int64_t lrWsdDecaySteps = 0;
  WsdDecayStyle lrWsdDecayStyle = WsdDecayStyle::Exponential;
  /// AdamW's betas and epsilon (Megatron's --adam-beta1, --adam-beta2,
  /// --adam-eps and their defaults).
  double adamBeta1 = 0.9, adamBeta2 = 0.999, adamEps = 1e-8;
  /// Megatron's --calculate-per-token-loss: the loss is the mean over
  /// every loss token of the global batch; false (Megatron's default): the
  /// mean of the microbatches' mean losses (docs/data.md).
  bool calculatePerTokenLoss = false;
  TrainingPrecision dtype = TrainingPrecision::Fp32;
  /// What the stages are compiled for: cpu (C++ over OpenBLAS) or cuda
  /// (CUDA C++ over cuBLAS, docs/cuda.md).
  rt::Target target = rt::Target::Cpu;
  /// Weights to start from (fine-tuning): a checkpoint or a `hypipe ckpt
  /// import` file, relative to the spec's directory.
  std::string initFrom;
  /// Megatron's --tensorboard-dir: where hypipe-run writes TensorBoard
  /// event files, relative to the spec's directory; empty: none.
  std::string tensorboardDir;
  /// Activation recompute (Megatron-LM's --recompute-*): none by default.
  RecomputeSpec recompute;
};

struct DataSpec {
  std::string path;
  DataFormat format = DataFormat::Text;
  /// The tokenizer the data was prepared with: a SentencePiece model
  /// (resolved against the spec's directory) or "bytes"; "" for none. Its
  /// vocabulary must fit model.vocab_size.
  std::string tokenizer;
  /// Sequence packing (docs/data.md): variable-length samples packed into
  /// microbatches of at most maxTokensPerMicrobatch tokens.
  bool packing = false;
  std::optional<int64_t> maxTokensPerMicrobatch; ///< default seq_length
  std::string scheduler = "balanced";
  std::optional<int64_t> globalBatchSize;  ///< samples per step
  std::optional<int64_t> minBinCount;      ///< default dp x pp
  std::optional<int64_t> binCountMultiple; ///< default dp x pp
  bool truncate = false;
  std::string mock; ///< the mock SFT dataset's JSON (format mock)
  /// Megatron-LM's --split: the train, validation and test weights over the
  /// documents ("969,30,1", core/data/Split.h); empty: all data trains.
  std::string split;
};

/// How a MoE layer's tokens reach experts on other ranks: Megatron-LM's
/// --moe-token-dispatcher-type (allgather, its default, or alltoall;
/// docs/expert-parallel.md).
enum class MoeDispatcher { AllGather, AllToAll };

inline const char *moeDispatcherName(MoeDispatcher d) {
  return d == MoeDispatcher::AllGather ? "allgather" : "alltoall";
}

/// The inverse of moeDispatcherName; nullopt for anything else.
inline std::optional<MoeDispatcher> parseMoeDispatcher(std::string_view name) {
  for (MoeDispatcher d : {MoeDispatcher::AllGather, MoeDispatcher::AllToAll})
    if (name == moeDispatcherName(d))
      return d;
  return std::nullopt;
}

/// Multi-latent attention's rotary embedding: Megatron-LM's --rope-type
/// (yarn is MLA's default) with YaRN's --rotary-scaling-factor, --mscale and
/// --mscale-all-dim.
enum class MlaRopeType { Rope, Yarn };

inline const char *mlaRopeTypeName(MlaRopeType t) {
  return t == MlaRopeType::Rope ? "rope" : "yarn";
}

/// The inverse of mlaRopeTypeName; nullopt for anything else.
inline std::optional<MlaRopeType> parseMlaRopeType(std::string_view name) {
  for (MlaRopeType t : {MlaRopeType::Rope, MlaRopeType::Yarn})
    if (name == mlaRopeTypeName(t))
      return t;
  return std::nullopt;
}

struct MlaRopeSpec {
  MlaRopeType type = MlaRopeType::Yarn;
  double rotaryScalingFactor = 1.0;
  double mscale = 1.0;
  double mscaleAllDim = 0.0;
};

struct ModelSpec {
  std::string file; ///< Where it was read from.
  std::string name = "model";
  HybridPattern pattern;
  /// Line and column (1-based) of the pattern's first character in `file`
  /// when the file holds it verbatim on one line (no escapes), so the
  /// compiler can locate each layer at its character; 0 otherwise.
  unsigned patternLine = 0, patternColumn = 0;
  /// dims.vocab is model.vocab_size padded to a multiple of
  /// vocabDivisor x tp (paddedVocabSize); vocabSize is it as given.
  ModelDims dims;
  int64_t vocabSize = 256;
  /// Megatron-LM's --make-vocab-size-divisible-by (model.
  /// make_vocab_size_divisible_by).
  int64_t vocabDivisor = 128;
  std::string positionEmbedding = "none";
  MlaRopeSpec mlaRope;
  /// model.moe_token_dispatcher_type.
  MoeDispatcher moeDispatcher = MoeDispatcher::AllGather;
  double moeAuxLossCoeff = 0.01;
  /// model.moe_expert_capacity_factor (Megatron-LM's
  /// --moe-expert-capacity-factor; absent or null: dropless, its default),
  /// moe_token_drop_policy (probs or position) and
  /// moe_pad_expert_input_to_capacity (core/model/MoeCapacity.h).
  std::optional<double> moeExpertCapacityFactor;
  std::string moeTokenDropPolicy = "probs";
  bool moePadExpertInputToCapacity = false;
  /// model.cross_entropy_fusion_impl (Megatron-LM's
  /// --cross-entropy-fusion-impl): "native", the output layer's logits of
  /// a microbatch kept whole for the loss's backward, or "linear", the
  /// output layer and the loss fused over chunks of
  /// cross_entropy_chunk_tokens rows (absent: about as many as make a
  /// chunk's logits the size of the head's input), the logits made again
  /// by the backward.
  std::string crossEntropyFusionImpl = "native";
  std::optional<int64_t> crossEntropyChunkTokens;
  /// DeepSeek sparse attention's --dsa-indexer-loss-coeff (the indexer's KL
  /// loss weight; Megatron's None, no default, is refused for a model with
  /// D layers) and --dsa-indexer-use-sparse-loss (the KL over the top-k
  /// keys only).
  double dsaIndexerLossCoeff = 0.0;
  bool dsaIndexerUseSparseLoss = false;
  /// Megatron's --mtp-loss-scaling-factor: the MTP depths' mean loss enters
  /// the objective with this weight.
  double mtpLossScalingFactor = 0.1;
  ParallelSpec parallel;
  TrainingSpec training;
  DataSpec data;
  /// Every main layer's (pp_rank, vp_stage), from `|`, the layout string,
  /// Megatron's first/last split, or the balanced auto-partition.
  PatternPlacement placement;
  /// True when the compiler chose the split (a pattern without `|`).
  bool autoPartitioned = false;
  /// Why hypipe-run cannot run this spec though explain and plan cost it
  /// (an expert grid it does not lay out), rendered at its key; empty when
  /// it can. hypipe compile (an artifact) and hypipe train print it and
  /// stop.
  std::string unrunnable;
  /// Why hypipe plan cannot plan this spec yet, rendered at the key that
  /// pins it (plan replaces the parallel section, so a spec that pins more
  /// than plan searches, or packs, is refused); empty when it can.
  std::string unplannable;

  /// The cost-model inputs of this spec, for its current placement's pp/vpp.
  AutoPartitionRequest partitionRequest() const;
  /// The rows of the linear cross-entropy's chunk over a microbatch of
  /// `tokens` (what the compiler gives the head's shape), 0 for native.
  int64_t lossChunkRows(int64_t tokens) const;
};

/// Values given on the command line (`--pp 2`) in place of the file's.
struct SpecOverrides {
  std::optional<int64_t> pp, vpp, dp, microbatches, steps, seed;
  /// Megatron-LM's --tensor-model-parallel-size and --sequence-parallel.
  std::optional<int64_t> tp;
  std::optional<bool> sequenceParallel;
  /// --expert-model-parallel-size, --expert-tensor-parallel-size and
  /// --moe-token-dispatcher-type.
  std::optional<int64_t> ep, etp;
  std::optional<std::string> moeTokenDispatcher;
  /// --moe-expert-capacity-factor, --moe-token-drop-policy and
  /// --moe-pad-expert-input-to-capacity.
  std::optional<double> moeExpertCapacityFactor;
  std::optional<std::string> moeTokenDropPolicy;
  std::optional<bool> moePadExpertInputToCapacity;
  /// --cross-entropy-fusion-impl and --cross-entropy-chunk-tokens.
  std::optional<std::string> crossEntropyFusionImpl;
  std::optional<int64_t> crossEntropyChunkTokens;
  std::optional<int64_t> microBatchSize;
  /// Megatron-LM's --global-batch-size: the microbatches per step are it
  /// over micro_batch_size x dp.
  std::optional<int64_t> globalBatchSize;
  std::optional<double> lr, minLr;
  /// Megatron-LM's --make-vocab-size-divisible-by.
  std::optional<int64_t> makeVocabSizeDivisibleBy;
  /// Megatron's learning-rate and optimizer flags (training's keys of the
  /// same names; the styles as written, parsed by the loader).
  std::optional<std::string> lrDecayStyle, lrWsdDecayStyle;
  std::optional<int64_t> lrWarmupIters, lrWsdDecayIters;
  std::optional<double> lrWarmupFraction, weightDecay, clipGrad, adamBeta1,
      adamBeta2, adamEps;
  std::optional<std::string> schedule, target, dtype;
  std::optional<bool> distributedOptimizer;
  /// Megatron-LM's --split (data.split).
  std::optional<std::string> split;
  /// A schedule CSV, relative to the working directory (the file's
  /// parallel.schedule_csv is relative to the spec's directory).
  std::optional<std::string> scheduleCsv;
  /// Megatron-LM's --recompute-granularity, --recompute-method,
  /// --recompute-num-layers and --recompute-modules: training.recompute's
  /// keys, as written (the loader parses and checks them like the file's).
  std::optional<std::string> recomputeGranularity, recomputeMethod;
  std::optional<int64_t> recomputeNumLayers;
  std::optional<std::vector<std::string>> recomputeModules;
  /// Whose values these are when not the command line's ("the layout plan
  /// tried"): an error about one then names the spec's key and this, not a
  /// flag the user never gave.
  std::string givenBy;
};

/// The files a spec reads: itself, its data, its schedule CSV and the
/// weights it starts from (relative ones resolved against its directory):
/// what no output of a command on it may be or lie inside.
std::vector<std::string> specInputs(const ModelSpec &spec);

/// Loads and checks a spec. On failure the error's message is the complete
/// rendered diagnostic (location, source line, caret, help).
llvm::Expected<ModelSpec> loadSpec(llvm::StringRef path,
                                   const SpecOverrides &overrides = {});

/// Same, from text in memory named `bufferName`.
llvm::Expected<ModelSpec> parseSpec(llvm::StringRef text,
                                    llvm::StringRef bufferName,
                                    const SpecOverrides &overrides = {});

} // namespace hypipe

#endif
