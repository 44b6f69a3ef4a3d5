//===- Head.cu - embedding, final norm, output layer and loss on the GPU --===//
//
// Cross-entropy works in place on the [T, vocab] logits: one block per row
// turns them into probabilities and the row's loss; backward turns the
// probabilities into the logits' gradient in place. No second [T, vocab]
// buffer exists. The head and every MTP depth's output (Mtp.cu) share the
// loss (lmLossForward, lmLossBackwardInput), as on the CPU.
//
//===----------------------------------------------------------------------===//

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/cuda/Primitives.cuh"

#include <cfloat>

namespace hypipe::rt::cuda {
namespace {

/// Softmax of one row in place; the row's masked loss into rowLoss. The
/// row's label and mask are those `shift` rows ahead in its sequence (none,
/// so mask 0, past its end).
__global__ void crossEntropyKernel(int64_t V, Seqs seqs, int shift,
                                   float *logits, const int32_t *labels,
                                   const float *lossMask, float *keptMask,
                                   int32_t *keptLabels, float *rowLoss) {
  const int64_t row = blockIdx.x;
  float *r = logits + row * V;
  __shared__ float shared;
  float mx = -FLT_MAX;
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x)
    mx = fmaxf(mx, r[v]);
  for (int o = 16; o > 0; o >>= 1)
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  __shared__ float warpMax[32];
  if (threadIdx.x % 32 == 0)
    warpMax[threadIdx.x / 32] = mx;
  __syncthreads();
  if (threadIdx.x == 0) {
    float m = warpMax[0];
    for (int w = 1; w < int(blockDim.x / 32); ++w)
      m = fmaxf(m, warpMax[w]);
    shared = m;
  }
  __syncthreads();
  mx = shared;
  float sum = 0;
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x)
    sum += expf(r[v] - mx);
  sum = blockSum(sum);
  const float logZ = mx + logf(sum);
  const int ahead = seqs.rowAhead(int(row), shift);
  const int32_t label = ahead < 0 ? 0 : labels[ahead];
  const float m = ahead < 0 ? 0.0f : (lossMask ? lossMask[ahead] : 1.0f);
  if (threadIdx.x == 0) {
    rowLoss[row] = m * (logZ - r[label]);
    keptMask[row] = m;
    keptLabels[row] = label;
  }
  __syncthreads(); // r[label] read before it is overwritten
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x)
    r[v] = expf(r[v] - logZ);
}

/// out[0] = sum of a, out[1] = sum of b (one block, fixed order).
__global__ void sumTwoKernel(int64_t n, const float *a, const float *b,
                             float *out) {
  float sa = 0, sb = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    if (a)
      sa += a[i];
    sb += b[i];
  }
  sa = blockSum(sa);
  sb = blockSum(sb);
  if (threadIdx.x == 0) {
    out[0] = sa;
    out[1] = sb;
  }
}

/// dlogits = (softmax - onehot) * mask * lossScale / count, in place.
__global__ void crossEntropyBackwardKernel(int64_t V, float *probs,
                                           const float *mask,
                                           const int32_t *labels,
                                           const float *count,
                                           float lossScale) {
  const int64_t row = blockIdx.x;
  float *r = probs + row * V;
  const float n = count[1];
  const float c = n > 0 ? mask[row] * lossScale / n : 0.0f;
  const int32_t label = labels[row];
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x)
    r[v] = (r[v] - (v == label ? 1.0f : 0.0f)) * c;
}

} // namespace

void embeddingForward(const EmbeddingShape &s, const Tokens &t,
                      const float *params, const int32_t *tokens, float *y,
                      float *saved) {
  const int64_t T = t.tokens();
  if (T == 0)
    return;
  check(cudaMemcpyAsync(saved, tokens, sizeof(int32_t) * T,
                        cudaMemcpyDeviceToDevice, stream()),
        "keeping the tokens");
  gatherRows(T, s.hidden, params, tokens, y);
}

void embeddingBackwardInput(const EmbeddingShape &s, const Tokens &t,
                            const float *dy, float *saved) {
  copyFloats(saved + t.tokens(), dy, t.tokens() * s.hidden);
}

void embeddingBackwardWeight(const EmbeddingShape &s, const Tokens &t,
                             const float *saved, float *grads) {
  scatterAddRows(t.tokens(), s.hidden, reinterpret_cast<const int32_t *>(saved),
                 saved + t.tokens(), grads);
}

float lmLossForward(const Tokens &t, int64_t hidden, int64_t vocab,
                    const float *norm, const float *wOut, const float *x,
                    const int32_t *labels, const float *lossMask, int64_t shift,
                    HeadSaved h, float *ws) {
  const int64_t T = t.tokens(), V = vocab;
  if (T == 0)
    return 0.0f;
  copyFloats(h.x, x, T * hidden);
  rmsnormForward(T, hidden, x, norm, h.xn, h.rstd);
  roundActivations(h.xn, T * hidden);
  linearForward(T, hidden, V, h.xn, wOut, h.probs);
  roundActivations(h.probs, T * V);    // bf16 logits; the loss reads fp32
  float *rowLoss = ws, *sums = ws + T; // [T], [2]
  crossEntropyKernel<<<unsigned(T), 256, 0, stream()>>>(
      V, seqsOf(t), int(shift), h.probs, labels, lossMask, h.mask, h.labels,
      rowLoss);
  launched("cross-entropy");
  sumTwoKernel<<<1, 1024, 0, stream()>>>(T, rowLoss, h.mask, sums);
  launched("loss sum");
  float host[2];
  check(cudaMemcpyAsync(host, sums, sizeof(host), cudaMemcpyDeviceToHost,
                        stream()),
        "reading the loss");
  synchronize();
  return host[1] > 0 ? host[0] / host[1] : 0.0f;
}

void lmLossBackwardInput(const Tokens &t, int64_t hidden, int64_t vocab,
                         const float *norm, const float *wOut, HeadSaved h,
                         float lossScale, const float *dxnExtra, float *dx,
                         float *gNorm, float *ws) {
  const int64_t T = t.tokens(), V = vocab;
  if (T == 0)
    return;
  float *dxn = ws, *sums = ws + T * hidden;
  sumTwoKernel<<<1, 1024, 0, stream()>>>(T, nullptr, h.mask, sums);
  launched("mask count");
  crossEntropyBackwardKernel<<<unsigned(T), 256, 0, stream()>>>(
      V, h.probs, h.mask, h.labels, sums, lossScale);
  launched("cross-entropy backward");
  roundActivations(h.probs, T * V);
  linearBackwardInput(T, hidden, V, h.probs, wOut, dxn);
  // The normed output also feeds the next MTP depth: its gradient adds
  // (after the GEMM, as on the CPU), and the sum is rounded in bf16.
  if (dxnExtra)
    addInPlace(dxn, dxnExtra, T * hidden);
  roundActivations(dxn, T * hidden);
  rmsnormBackward(T, hidden, h.x, norm, h.rstd, dxn, dx, gNorm, false);
  roundActivations(dx, T * hidden);
}

float headForward(const HeadShape &s, const Tokens &t, const float *params,
                  const float *x, const int32_t *labels, const float *lossMask,
                  float *saved, float *ws) {
  return lmLossForward(t, s.hidden, s.vocab, params, params + s.hidden, x,
                       labels, lossMask, 0, headSaved(s, t.shape, saved), ws);
}

void headBackwardInput(const HeadShape &s, const Tokens &t, const float *params,
                       float *grads, float *saved, float lossScale, float *dx,
                       float *ws) {
  headBackwardInput(s, t, params, grads, saved, lossScale, nullptr, dx, ws);
}

void headBackwardInput(const HeadShape &s, const Tokens &t, const float *params,
                       float *grads, float *saved, float lossScale,
                       const float *dxnExtra, float *dx, float *ws) {
  lmLossBackwardInput(t, s.hidden, s.vocab, params, params + s.hidden,
                      headSaved(s, t.shape, saved), lossScale, dxnExtra, dx,
                      grads, ws);
}

void headBackwardWeight(const HeadShape &s, const Tokens &t, const float *saved,
                        float *grads) {
  HeadSaved h = headSaved(s, t.shape, const_cast<float *>(saved));
  linearBackwardWeight(t.tokens(), s.hidden, s.vocab, h.probs, h.xn,
                       grads + s.hidden);
}

const float *headNormed(const HeadShape &s, const Tokens &t,
                        const float *saved) {
  return headSaved(s, t.shape, const_cast<float *>(saved)).xn;
}

} // namespace hypipe::rt::cuda
