//===- CostModel.h - parameters, FLOPs and memory per model part ----------===//
//
// The one cost model of hypipe: the partitioner, `hypipe explain`, and later
// the schedule simulator and the runtime's accounting all call it. Every
// formula is written out in docs/cost-model.md.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_COSTMODEL_H
#define HYPIPE_CORE_COSTMODEL_H

#include "core/model/LayerShapes.h"
#include "core/model/ModelDims.h"
#include "core/model/Recompute.h"
#include "core/schedule/Vocabulary.h"

#include <optional>
#include <string>
#include <vector>

namespace hypipe {

/// hypipe-run's data-parallel gradient bucket, in floats (16 MiB of fp32;
/// --grad-bucket-mib, Megatron's --ddp-bucket-size): the reduction of a
/// stage's gradients goes bucket by bucket, each started inside the
/// stage's last backward once its gradients are in.
inline constexpr int64_t kDefaultGradientBucketFloats = int64_t(4) << 20;

/// What the costs depend on besides the model dimensions.
struct CostSettings {
  int64_t seqLength = 128;
  int64_t microBatchSize = 1;
  bool bf16 = false; ///< activations and weights in bf16, fp32 master copies
  /// Data-parallel ranks the optimizer state is divided over (Megatron's
  /// distributed optimizer); 1 without it.
  int64_t optimizerShards = 1;
  /// Megatron-LM's tensor-parallel size: each cost is one rank's, of the
  /// layer's shard (core/model/TensorParallel.h).
  int64_t tp = 1;
  /// Sequence parallelism (tp > 1): the residual stream, the norms' tensors
  /// and a stage boundary's activation hold a tp-th of the tokens.
  bool sequenceParallel = false;
  /// The MoE layers' expert grid (Megatron-LM's --expert-model-parallel-size
  /// and --expert-tensor-parallel-size, docs/expert-parallel.md): each rank
  /// holds ep-th of the experts, each split over etp ranks (0: tp).
  int64_t ep = 1, etp = 0;
  /// Megatron-LM's --moe-expert-capacity-factor (0: dropless): under
  /// balanced routing an expert runs min(1, factor) of its dropless rows.
  double capacityFactor = 0;
  /// Megatron-LM's linear cross-entropy fusion (model.
  /// cross_entropy_fusion_impl: linear): the head keeps no logits; the
  /// input gradient makes them again (one more output-layer GEMM) and takes
  /// the weight gradient too.
  bool linearCrossEntropy = false;

  int64_t expertTensorParallel() const { return etp ? etp : tp; }
  /// The ranks a MoE layer's tokens are gathered over and its outputs
  /// reduce-scattered back (Megatron-LM's tp x ep group of the expert grid).
  int64_t expertGroup() const { return expertTensorParallel() * ep; }
  int64_t tokens() const { return seqLength * microBatchSize; }
  /// The ranks one residual-stream activation is divided over: tp with
  /// sequence parallelism, else 1 (every tp rank holds all of it).
  int64_t streamShards() const { return sequenceParallel ? tp : 1; }
  /// Bytes of one rank's part of a [tokens, hidden] residual-stream tensor.
  int64_t streamBytes(int64_t hidden) const {
    return tokens() * hidden * activationBytesPerElement() / streamShards();
  }
  int64_t activationBytesPerElement() const { return bf16 ? 2 : 4; }
};

/// Costs of one item of the partitioned sequence (the embedding, one layer,
/// or the head with its loss and any MTP depths), per microbatch.
struct ItemCost {
  std::string name;   ///< "embedding", a layer symbol, or "head"
  int64_t params = 0; ///< trainable parameters
  int64_t forwardFlops = 0;
  int64_t backwardInputFlops = 0;  ///< `I`: gradient w.r.t. the input
  int64_t backwardWeightFlops = 0; ///< `W`: gradient w.r.t. the weights
  int64_t activationBytes = 0;     ///< kept from forward to backward
  int64_t sendBytes = 0;           ///< tensor sent to the next item
  bool modelled = true;            ///< false for kinds not costed yet

  /// Within the size bounds (SizeBounds.h) one item's counts fit an int64;
  /// a sum of many stops at INT64_MAX instead of wrapping.
  int64_t totalFlops() const;
  /// Accumulates `other` into this (names are kept), saturating.
  ItemCost &operator+=(const ItemCost &other);
};

/// The forward FLOPs selective recompute of `modules` runs again in a
/// pattern layer `symbol` (docs/recompute.md): core_attn the attention
/// core, mlp fc1 (its activation and a norm count no GEMM FLOPs), moe the
/// MoE layer's whole forward; 0 for the rest.
int64_t selectiveRecomputeFlops(char symbol, const ModelDims &dims,
                                const CostSettings &settings,
                                RecomputeModuleSet modules);

/// Costs of pattern layer `symbol` on one of `settings.tp` ranks, or nullopt
/// for a kind the model does not cost yet (`G`, `D`, `+`). At tp > 1 the
/// layer is one Megatron-LM splits (tensorParallelProblem empty): FLOPs and
/// the tensors between its collectives are its shard's, its replicated
/// parameters count whole.
std::optional<ItemCost> layerCost(char symbol, const ModelDims &dims,
                                  const CostSettings &settings);
ItemCost embeddingCost(const ModelDims &dims, const CostSettings &settings);
/// Final norm, output layer and cross-entropy.
ItemCost headCost(const ModelDims &dims, const CostSettings &settings);
/// One MTP depth without its layers: two input norms, the 2H -> H projection,
/// its final norm, and its pass through the (shared) output layer and loss.
ItemCost mtpDepthCost(const ModelDims &dims, const CostSettings &settings);

/// The sequence the partitioner splits: the embedding, every main layer of
/// `layers` in order, and the head (which carries `mtpDepths` MTP depths of
/// `mtpLayers`, since MTP runs with the last segment).
std::vector<ItemCost> modelItems(const ModelDims &dims,
                                 const CostSettings &settings,
                                 const std::string &layers,
                                 const std::string &mtpLayers, int mtpDepths);

/// Bytes per parameter held by a rank for training with AdamW: weights,
/// gradients and two moments (fp32: 4+4+8; bf16: 2 + 4 fp32 gradient + 12 for
/// the fp32 master copy and moments). The optimizer's part (8, or 12) is
/// divided by `optimizerShards` under the distributed optimizer.
double trainingBytesPerParameter(bool bf16, int64_t optimizerShards = 1);

/// Bytes per parameter hypipe's own runtime holds: fp32 weights, gradients
/// and AdamW moments (the moments divided by `optimizerShards`, as
/// trainingBytesPerParameter), and in a bf16 run the bf16 copy the kernels
/// read, held in floats (4 more: docs/precision.md).
double runtimeBytesPerParameter(bool bf16, int64_t optimizerShards = 1);

/// The distributed optimizer over an expert grid spread over `replicas`
/// (m) data-parallel replicas of `dp` (hypipe-run's ExpertShardLayout) for
/// a stage of `params` floats with its experts in `expertSlots` (sorted,
/// disjoint), in buckets of `bucketFloats`: the floats of moments the
/// fullest data-parallel rank keeps beyond the dp-th of each that the
/// bytes per parameter count (its experts' moments are over dp / m ranks,
/// not dp, and where its parts fall decides how many), and the floats of
/// its scratch (ExpertShardLayout::scratchFloats). Zero without such a grid.
struct ExpertShardFloats {
  int64_t moments = 0, scratch = 0;
};
ExpertShardFloats
expertShardFloats(int64_t params,
                  const std::vector<std::pair<int64_t, int64_t>> &expertSlots,
                  int64_t dp, int64_t replicas, int64_t bucketFloats);

/// A pipeline rank's memory estimate by part, in bytes; each part and the
/// total stop at INT64_MAX rather than wrap.
struct RankMemory {
  int64_t parameters = 0;  ///< with their gradients and optimizer state
  int64_t activations = 0; ///< of the microbatches in flight
  int64_t buffers = 0;     ///< p2p buffers, workspaces
  int64_t total() const;
};

/// The one memory estimate of a pipeline rank: its parameters with their
/// gradients and optimizer state (`bytesPerParameter` each), the
/// activations of `inFlight` microbatches (`activationBytes` per microbatch
/// through all of the rank's stages), and `fixedBytes` (p2p buffers,
/// workspaces). The partitioner and `hypipe explain` feed it the cost
/// model's activations; `hypipe train` the compiled plan's saved buffers.
RankMemory rankMemory(int64_t params, double bytesPerParameter,
                      double activationBytes, double inFlight,
                      int64_t fixedBytes);
/// rankMemory's total.
int64_t rankMemoryEstimate(int64_t params, double bytesPerParameter,
                           double activationBytes, double inFlight,
                           int64_t fixedBytes);

/// Closed-form peak number of microbatches whose activations one rank holds
/// at once, in units of "one microbatch through all of this rank's stages".
double peakMicrobatchesInFlight(schedule::ScheduleKind schedule, int64_t pp,
                                int64_t vpp, int64_t microbatches,
                                int64_t ppRank);

} // namespace hypipe

#endif
