//===- Layers.h - forward and split backward of every layer kind ----------===//
//
// What the generated stage code calls. Each layer is pre-norm residual,
// y = x + Mixer(RMSNorm(x)) (docs/model.md has the equations). Every layer
// has three entry points, matching the schedule's actions:
//   forward         F: y from x; keeps what backward needs in `saved`.
//   backwardInput   I: dx from dy; accumulates the gradients of the small
//                      parameters (norms, conv, A_log, D, dt_bias, router) and
//                      stashes the linear layers' output gradients in `saved`.
//   backwardWeight  W: the weight-gradient GEMMs from the stash.
// B is I followed by W. Parameters are laid out in the order of
// `Shape::params()`; `saved` holds `Shape::savedFloats()` floats and `ws`
// `Shape::workspaceFloats()` floats. Gradients accumulate (+=).
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_CPU_LAYERS_H
#define HYPIPE_RUNTIME_KERNELS_CPU_LAYERS_H

#include "core/model/LayerShapes.h"

#include <cstdint>

namespace hypipe::rt::cpu {

/// A stage's token shape for one call: its planned capacity, with the
/// microbatch's sample boundaries when it is packed (`cuSeqlens` non-null).
inline TokenShape withBoundaries(TokenShape capacity, const int32_t *cuSeqlens,
                                 int64_t numSeqs) {
  capacity.cuSeqlens = cuSeqlens;
  capacity.numSeqs = cuSeqlens ? numSeqs : 0;
  return capacity;
}

void mambaForward(const MambaShape &s, const TokenShape &t, const float *params,
                  const float *x, float *y, float *saved, float *ws);
void mambaBackwardInput(const MambaShape &s, const TokenShape &t,
                        const float *params, float *grads, float *saved,
                        const float *dy, float *dx, float *ws);
void mambaBackwardWeight(const MambaShape &s, const TokenShape &t,
                         const float *saved, float *grads);

void attentionForward(const AttentionShape &s, const TokenShape &t,
                      const float *params, const float *x, float *y,
                      float *saved, float *ws);
void attentionBackwardInput(const AttentionShape &s, const TokenShape &t,
                            const float *params, float *grads, float *saved,
                            const float *dy, float *dx, float *ws);
void attentionBackwardWeight(const AttentionShape &s, const TokenShape &t,
                             const float *saved, float *grads);

void mlpForward(const MlpShape &s, const TokenShape &t, const float *params,
                const float *x, float *y, float *saved, float *ws);
void mlpBackwardInput(const MlpShape &s, const TokenShape &t,
                      const float *params, float *grads, float *saved,
                      const float *dy, float *dx, float *ws);
void mlpBackwardWeight(const MlpShape &s, const TokenShape &t,
                       const float *saved, float *grads);

/// Returns this layer's load-balancing loss (already times its coefficient).
float moeForward(const MoeShape &s, const TokenShape &t, const float *params,
                 const float *x, float *y, float *saved, float *ws);
/// `lossScale` is d(objective)/d(aux loss): the same scale the head's loss
/// gets (1 / microbatches).
void moeBackwardInput(const MoeShape &s, const TokenShape &t,
                      const float *params, float *grads, float *saved,
                      const float *dy, float *dx, float *ws, float lossScale);
void moeBackwardWeight(const MoeShape &s, const TokenShape &t,
                       const float *saved, float *grads);

void embeddingForward(const EmbeddingShape &s, const TokenShape &t,
                      const float *params, const int32_t *tokens, float *y,
                      float *saved);
/// The embedding has no input gradient; I only stashes dy.
void embeddingBackwardInput(const EmbeddingShape &s, const TokenShape &t,
                            const float *dy, float *saved);
void embeddingBackwardWeight(const EmbeddingShape &s, const TokenShape &t,
                             const float *saved, float *grads);

/// Final norm, output layer, cross-entropy averaged over the tokens whose
/// `lossMask` is non-zero (all tokens when it is null). Returns the loss.
float headForward(const HeadShape &s, const TokenShape &t, const float *params,
                  const float *x, const int32_t *labels, const float *lossMask,
                  float *saved, float *ws);
void headBackwardInput(const HeadShape &s, const TokenShape &t,
                       const float *params, float *grads, float *saved,
                       float lossScale, float *dx, float *ws);
void headBackwardWeight(const HeadShape &s, const TokenShape &t,
                        const float *saved, float *grads);

} // namespace hypipe::rt::cpu

#endif
