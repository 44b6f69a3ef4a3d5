//===- StageArgs.h - what one pass of a stage reads and writes ------------===//
//
// The pointers and scalars the trainer hands a stage's kernel program for
// one action (StageInterpreter.h), and which pass of the program it runs. In a
// cuda stage every tensor pointer is device memory (cu_seqlens excepted: the
// host copy, with cu_seqlens_device beside it).
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_STAGEARGS_H
#define HYPIPE_RUNTIME_KERNELS_STAGEARGS_H

#include "core/model/LayerShapes.h"
#include "core/model/TensorParallel.h"

#include <cstdint>

namespace hypipe::rt {

struct RouterCheck;
class TensorParallelGroup;

/// A stage's token shape for one call: its planned capacity, with the
/// microbatch's sample boundaries when it is packed (`cuSeqlens` non-null,
/// `numSeqs` samples, the last sequence parallelism's padding when
/// `paddedTail`; over an expert grid's replicas, their real tokens
/// `replicaTokens`: TokenShape's).
inline TokenShape packedTokens(TokenShape capacity, const int32_t *cuSeqlens,
                               int64_t numSeqs, bool paddedTail = false,
                               const int64_t *replicaTokens = nullptr) {
  capacity.cuSeqlens = cuSeqlens;
  capacity.numSeqs = cuSeqlens ? numSeqs : 0;
  capacity.paddedTail = cuSeqlens && paddedTail;
  capacity.replicaTokens = cuSeqlens ? replicaTokens : nullptr;
  return capacity;
}

struct StageArgs {
  const float *params = nullptr;
  float *grads = nullptr; ///< accumulated (+=)
  float *saved =
      nullptr; ///< this microbatch's slot: written by F, read by I and W
  /// Activation recompute: the recomputed layers' saved tensors, written
  /// by F (and dropped), written again by I's recompute and read by I and
  /// W; null without recompute.
  float *recomputed = nullptr;
  float *workspace = nullptr;
  const int32_t *tokens = nullptr;  ///< [batch*seq], first stage
  const int32_t *labels = nullptr;  ///< [batch*seq], last stage
  const float *loss_mask = nullptr; ///< [batch*seq] or null, last stage
  const float *input = nullptr; ///< [batch*seq, hidden] from the previous stage
  float *output = nullptr;      ///< [batch*seq, hidden] to the next stage
  const float *grad_output =
      nullptr;                 ///< gradient of `output`, from the next stage
  float *grad_input = nullptr; ///< gradient of `input`, to the previous stage
  float loss_scale = 0;        ///< d objective / d this microbatch's loss
  float loss = 0;              ///< out: language-model loss (last stage)
  float aux_loss = 0; ///< out: load-balancing losses of this stage's MoE layers
  /// Sample boundaries of a packed microbatch (THD): num_seqs + 1 offsets
  /// into its rows, at most batch*seq tokens; the tensors above then hold
  /// cu_seqlens[num_seqs] rows. Null: batch sequences of seq tokens.
  const int32_t *cu_seqlens = nullptr;
  int64_t num_seqs = 0;
  /// The last of them pads the microbatch for sequence parallelism
  /// (TokenShape::paddedTail).
  bool padded_tail = false;
  /// On an expert grid over data-parallel replicas: the real tokens of each
  /// replica's microbatch in the MoE layers' group, every one padded to the
  /// group's most rows (TokenShape::replicaTokens; host memory, or null).
  const int64_t *replica_tokens = nullptr;
  /// The same boundaries in device memory (cuda stages; null on cpu).
  const int32_t *cu_seqlens_device = nullptr;
  /// out: each multi-token-prediction depth's loss (unweighted), added to
  /// mtp_losses[depth - 1]: one entry per depth of the model, zeroed by the
  /// caller (null: no MTP depth in this stage).
  float *mtp_losses = nullptr;
  /// One per layer of the program (set where it has MoE layers), in the
  /// stage's memory: a MoE layer's router records a NaN or infinite logit
  /// in its own (BufferLayouts.h).
  RouterCheck *router_checks = nullptr;
  /// The stage's tensor-parallel group (set when its program splits its
  /// layers: TensorParallelCalls.h).
  TensorParallelGroup *tensor_parallel = nullptr;
  /// The MoE layers' tp-ep group where their experts spread over data-
  /// parallel replicas (core/model/TensorParallel.h's LayerGroup).
  TensorParallelGroup *expert_parallel = nullptr;
  /// When set (hypipe-run --costs-out, cpu stages): each call's wall time
  /// added to its layer's entry, [pass][layer of the program] with the
  /// passes forward, input-gradient, weight-gradient.
  double *layer_seconds = nullptr;
  /// When set: called on the host after each weight-gradient call with its
  /// layer, once its kernels are issued (the trainer starts the
  /// data-parallel reduction of the gradient buckets that call completes,
  /// in a stage's last backward: GradientBuckets.h).
  void (*weight_gradient_done)(void *context, int32_t layer) = nullptr;
  void *weight_gradient_context = nullptr;
};

} // namespace hypipe::rt

#endif
