//===- Layers.h - the CUDA kernels the generated stage code calls ---------===//
//
// The same entry points as runtime/kernels/cpu/Layers.h, with the same
// parameter and saved-buffer layouts (LayerShapes.h with Target::Cuda), on
// device pointers: F, I (input gradients, small-parameter gradients, the
// stash for W) and W (weight-gradient GEMMs). Every pointer is device
// memory; the work goes on the stream of cuda::context(). GEMMs are cuBLAS.
// Kernels read sample boundaries (THD) from `Tokens::cuSeqlens`, a device
// copy of the host boundaries in `Tokens::shape`.
//
// This header is plain C++: the runtime and the generated stages include it
// without CUDA headers.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_CUDA_LAYERS_H
#define HYPIPE_RUNTIME_KERNELS_CUDA_LAYERS_H

#include "core/model/BufferLayouts.h"
#include "core/model/LayerShapes.h"
#include "runtime/formats/StageProgram.h"

#include <cstdint>

namespace hypipe::rt::cuda {

/// One call's tokens: the host shape (counts, boundaries) and the device
/// copy of its boundaries (null when the microbatch is not packed).
struct Tokens {
  TokenShape shape;
  const int32_t *cuSeqlens = nullptr;
  int64_t tokens() const { return shape.tokens(); }
  /// The longest sequence of the call.
  int64_t maxLength() const {
    int64_t n = 0;
    for (int64_t i = 0; i < shape.sequences(); ++i)
      n = shape.length(i) > n ? shape.length(i) : n;
    return n;
  }
};

inline Tokens withBoundaries(TokenShape capacity, const int32_t *hostCuSeqlens,
                             const int32_t *deviceCuSeqlens, int64_t numSeqs) {
  capacity.cuSeqlens = hostCuSeqlens;
  capacity.numSeqs = hostCuSeqlens ? numSeqs : 0;
  return {capacity, hostCuSeqlens ? deviceCuSeqlens : nullptr};
}

/// Copies `floats` floats between device buffers (the stage's last copy).
void copyFloats(float *dst, const float *src, int64_t floats);
/// dst[i] = src[i] rounded to the nearest bfloat16, on the stream.
void roundCopy(float *dst, const float *src, int64_t n);

void mambaForward(DType activations, const MambaShape &s, const Tokens &t,
                  const float *params, const float *x, float *y, float *saved,
                  float *ws);
void mambaBackwardInput(DType activations, const MambaShape &s, const Tokens &t,
                        const float *params, float *grads, float *saved,
                        const float *dy, float *dx, float *ws);
void mambaBackwardWeight(DType activations, const MambaShape &s,
                         const Tokens &t, const float *saved, float *grads);

void attentionForward(DType activations, const AttentionShape &s,
                      const Tokens &t, const float *params, const float *x,
                      float *y, float *saved, float *ws);
void attentionBackwardInput(DType activations, const AttentionShape &s,
                            const Tokens &t, const float *params, float *grads,
                            float *saved, const float *dy, float *dx,
                            float *ws);
void attentionBackwardWeight(DType activations, const AttentionShape &s,
                             const Tokens &t, const float *saved, float *grads);

void mlpForward(DType activations, const MlpShape &s, const Tokens &t,
                const float *params, const float *x, float *y, float *saved,
                float *ws);
void mlpBackwardInput(DType activations, const MlpShape &s, const Tokens &t,
                      const float *params, float *grads, float *saved,
                      const float *dy, float *dx, float *ws);
void mlpBackwardWeight(DType activations, const MlpShape &s, const Tokens &t,
                       const float *saved, float *grads);

/// Returns the layer's load-balancing loss (read back: the dispatch sizes
/// need the host anyway, as in Megatron's dropless MoE). A NaN or infinite
/// router logit is recorded in `check` (device memory; the trainer reads it
/// once a step).
float moeForward(DType activations, const MoeShape &s, const Tokens &t,
                 const float *params, const float *x, float *y, float *saved,
                 float *ws, RouterCheck *check);
void moeBackwardInput(DType activations, const MoeShape &s, const Tokens &t,
                      const float *params, float *grads, float *saved,
                      const float *dy, float *dx, float *ws, float lossScale);
void moeBackwardWeight(DType activations, const MoeShape &s, const Tokens &t,
                       const float *saved, float *grads);

void embeddingForward(DType activations, const EmbeddingShape &s,
                      const Tokens &t, const float *params,
                      const int32_t *tokens, float *y, float *saved);
void embeddingBackwardInput(DType activations, const EmbeddingShape &s,
                            const Tokens &t, const float *dy, float *saved);
void embeddingBackwardWeight(DType activations, const EmbeddingShape &s,
                             const Tokens &t, const float *saved, float *grads);

/// Returns the microbatch's mean loss (the one value read back per step
/// and microbatch).
float headForward(DType activations, const HeadShape &s, const Tokens &t,
                  const float *params, const float *x, const int32_t *labels,
                  const float *lossMask, float *saved, float *ws);
void headBackwardInput(DType activations, const HeadShape &s, const Tokens &t,
                       const float *params, float *grads, float *saved,
                       float lossScale, float *dx, float *ws);
void headBackwardWeight(DType activations, const HeadShape &s, const Tokens &t,
                        const float *saved, float *grads);
/// With multi-token prediction: `dxnExtra` is the first depth's gradient of
/// the normed output (which it reads), added before the norm's backward.
void headBackwardInput(DType activations, const HeadShape &s, const Tokens &t,
                       const float *params, float *grads, float *saved,
                       float lossScale, const float *dxnExtra, float *dx,
                       float *ws);
/// The normed output the head keeps (the first MTP depth's input).
const float *headNormed(const HeadShape &s, const Tokens &t,
                        const float *saved);

/// The language-model loss both the head and the MTP depths compute (the
/// CPU's, cpu/Layers.h), with `ws`: T + 2 floats for the rows' losses and
/// the two sums (the CPU keeps those in thread-local vectors).
float lmLossForward(DType activations, const Tokens &t, int64_t hidden,
                    int64_t vocab, const float *norm, const float *wOut,
                    const float *x, const int32_t *labels,
                    const float *lossMask, int64_t shift, HeadSaved h,
                    float *ws);
/// `ws`: T x hidden + 2 floats (the normed output's gradient, the mask's
/// count).
void lmLossBackwardInput(DType activations, const Tokens &t, int64_t hidden,
                         int64_t vocab, const float *norm, const float *wOut,
                         HeadSaved h, float lossScale, const float *dxnExtra,
                         float *dx, float *gNorm, float *ws);

/// One multi-token-prediction depth (Mtp.cu), as cpu/Layers.h describes
/// it. `tokens` and `labels` are the microbatch's own (the depth shifts
/// them within each sequence); the table's gradient adds with atomics, as
/// the embedding's does.
void mtpInputForward(DType activations, const MtpInputShape &s, const Tokens &t,
                     const float *params, const float *table,
                     const int32_t *tokens, const float *hPrev, float *y,
                     float *saved, float *ws);
void mtpInputBackwardInput(DType activations, const MtpInputShape &s,
                           const Tokens &t, const float *params, float *grads,
                           float *saved, const float *dy, float *dhPrev,
                           float *ws);
void mtpInputBackwardWeight(DType activations, const MtpInputShape &s,
                            const Tokens &t, const float *saved, float *grads,
                            float *tableGrads);
/// Returns the depth's loss (unweighted; read back like the head's).
float mtpOutputForward(DType activations, const MtpOutputShape &s,
                       const Tokens &t, const float *params, const float *wOut,
                       const float *x, const int32_t *labels,
                       const float *lossMask, float *saved, float *ws);
void mtpOutputBackwardInput(DType activations, const MtpOutputShape &s,
                            const Tokens &t, const float *params, float *grads,
                            const float *wOut, float *saved, float lossScale,
                            const float *dyNext, float *dx, float *ws);
void mtpOutputBackwardWeight(DType activations, const MtpOutputShape &s,
                             const Tokens &t, const float *saved,
                             float *outGrads);
const float *mtpNormed(const MtpOutputShape &s, const Tokens &t,
                       const float *saved);

} // namespace hypipe::rt::cuda

#endif
