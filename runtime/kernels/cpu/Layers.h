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

#include "core/model/BufferLayouts.h"
#include "core/model/LayerShapes.h"
#include "runtime/formats/StageProgram.h"

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

void mambaForward(DType activations, const MambaShape &s, const TokenShape &t,
                  const float *params, const float *x, float *y, float *saved,
                  float *ws);
void mambaBackwardInput(DType activations, const MambaShape &s,
                        const TokenShape &t, const float *params, float *grads,
                        float *saved, const float *dy, float *dx, float *ws);
void mambaBackwardWeight(DType activations, const MambaShape &s,
                         const TokenShape &t, const float *saved, float *grads);

void attentionForward(DType activations, const AttentionShape &s,
                      const TokenShape &t, const float *params, const float *x,
                      float *y, float *saved, float *ws);
void attentionBackwardInput(DType activations, const AttentionShape &s,
                            const TokenShape &t, const float *params,
                            float *grads, float *saved, const float *dy,
                            float *dx, float *ws);
void attentionBackwardWeight(DType activations, const AttentionShape &s,
                             const TokenShape &t, const float *saved,
                             float *grads);

void mlpForward(DType activations, const MlpShape &s, const TokenShape &t,
                const float *params, const float *x, float *y, float *saved,
                float *ws);
void mlpBackwardInput(DType activations, const MlpShape &s, const TokenShape &t,
                      const float *params, float *grads, float *saved,
                      const float *dy, float *dx, float *ws);
void mlpBackwardWeight(DType activations, const MlpShape &s,
                       const TokenShape &t, const float *saved, float *grads);

/// Returns this layer's load-balancing loss (already times its coefficient).
/// A NaN or infinite router logit is recorded in `check` (the token's
/// experts are then picked by position, the run goes on to the step's end).
float moeForward(DType activations, const MoeShape &s, const TokenShape &t,
                 const float *params, const float *x, float *y, float *saved,
                 float *ws, RouterCheck *check);
/// `lossScale` is d(objective)/d(aux loss): the same scale the head's loss
/// gets (1 / microbatches).
void moeBackwardInput(DType activations, const MoeShape &s, const TokenShape &t,
                      const float *params, float *grads, float *saved,
                      const float *dy, float *dx, float *ws, float lossScale);
void moeBackwardWeight(DType activations, const MoeShape &s,
                       const TokenShape &t, const float *saved, float *grads);

void embeddingForward(DType activations, const EmbeddingShape &s,
                      const TokenShape &t, const float *params,
                      const int32_t *tokens, float *y, float *saved);
/// The embedding has no input gradient; I only stashes dy.
void embeddingBackwardInput(DType activations, const EmbeddingShape &s,
                            const TokenShape &t, const float *dy, float *saved);
void embeddingBackwardWeight(DType activations, const EmbeddingShape &s,
                             const TokenShape &t, const float *saved,
                             float *grads);

/// Final norm, output layer, cross-entropy averaged over the tokens whose
/// `lossMask` is non-zero (all tokens when it is null). Returns the loss.
float headForward(DType activations, const HeadShape &s, const TokenShape &t,
                  const float *params, const float *x, const int32_t *labels,
                  const float *lossMask, float *saved, float *ws);
void headBackwardInput(DType activations, const HeadShape &s,
                       const TokenShape &t, const float *params, float *grads,
                       float *saved, float lossScale, float *dx, float *ws);
void headBackwardWeight(DType activations, const HeadShape &s,
                        const TokenShape &t, const float *saved, float *grads);
/// With multi-token prediction: `dxnExtra` is the first depth's gradient of
/// the normed output (which it reads), added before the norm's backward.
void headBackwardInput(DType activations, const HeadShape &s,
                       const TokenShape &t, const float *params, float *grads,
                       float *saved, float lossScale, const float *dxnExtra,
                       float *dx, float *ws);
/// The normed output the head keeps (the first MTP depth's input).
const float *headNormed(const HeadShape &s, const TokenShape &t,
                        const float *saved);

/// The language-model loss both the head and the MTP depths compute:
/// rmsnorm(x) (weights `norm`), logits against `wOut` [vocab, hidden], the
/// mean cross-entropy over the masked rows against the labels `shift`
/// places ahead within each sequence (none past its end). Keeps what the
/// backward needs in `h`.
float lmLossForward(DType activations, const TokenShape &t, int64_t hidden,
                    int64_t vocab, const float *norm, const float *wOut,
                    const float *x, const int32_t *labels,
                    const float *lossMask, int64_t shift, HeadSaved h);
/// dx from the loss (scaled by `lossScale`) and, when non-null, `dxnExtra`
/// (a gradient of the normed output from elsewhere); gNorm += d/dnorm. The
/// logits' gradient overwrites h.probs for the weight pass.
void lmLossBackwardInput(DType activations, const TokenShape &t, int64_t hidden,
                         int64_t vocab, const float *norm, const float *wOut,
                         HeadSaved h, float lossScale, const float *dxnExtra,
                         float *dx, float *gNorm, float *ws);

/// One multi-token-prediction depth (Mtp.cpp). Input: `table` is the
/// model's embedding [vocab, hidden], `hPrev` the previous depth's (or the
/// head's) normed output; I writes the gradient of hPrev, W adds the
/// embedding rows' gradient to `tableGrads`.
void mtpInputForward(DType activations, const MtpInputShape &s,
                     const TokenShape &t, const float *params,
                     const float *table, const int32_t *tokens,
                     const float *hPrev, float *y, float *saved, float *ws);
void mtpInputBackwardInput(DType activations, const MtpInputShape &s,
                           const TokenShape &t, const float *params,
                           float *grads, float *saved, const float *dy,
                           float *dhPrev, float *ws);
void mtpInputBackwardWeight(DType activations, const MtpInputShape &s,
                            const TokenShape &t, const float *saved,
                            float *grads, float *tableGrads);
/// Output: the depth's loss (unweighted); its backward scales the loss's
/// gradient by lossScale x s.lossWeight and adds `dyNext`, the next depth's
/// gradient of this depth's normed output (null for the last depth). W adds
/// the output layer's gradient to `outGrads`.
float mtpOutputForward(DType activations, const MtpOutputShape &s,
                       const TokenShape &t, const float *params,
                       const float *wOut, const float *x, const int32_t *labels,
                       const float *lossMask, float *saved, float *ws);
void mtpOutputBackwardInput(DType activations, const MtpOutputShape &s,
                            const TokenShape &t, const float *params,
                            float *grads, const float *wOut, float *saved,
                            float lossScale, const float *dyNext, float *dx,
                            float *ws);
void mtpOutputBackwardWeight(DType activations, const MtpOutputShape &s,
                             const TokenShape &t, const float *saved,
                             float *outGrads);
const float *mtpNormed(const MtpOutputShape &s, const TokenShape &t,
                       const float *saved);

} // namespace hypipe::rt::cpu

#endif
