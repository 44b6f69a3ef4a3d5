//===- Head.cu - embedding, final norm, output layer and loss on the GPU --===//
//
// Cross-entropy works in place on the [T, vocab] logits: one block per row
// turns them into probabilities and the row's loss; backward turns the
// probabilities into the logits' gradient in place. No second [T, vocab]
// buffer exists.
//
//===----------------------------------------------------------------------===//

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/cuda/Primitives.cuh"

#include <cfloat>

namespace hypipe::rt::cuda {
namespace {

__global__ void gatherKernel(int64_t hidden, const float *table,
                             const int32_t *tokens, float *y, int32_t *kept) {
  const int64_t row = blockIdx.x;
  const int32_t tok = tokens[row];
  if (threadIdx.x == 0)
    kept[row] = tok;
  for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x)
    y[row * hidden + j] = table[int64_t(tok) * hidden + j];
}

__global__ void scatterAddKernel(int64_t hidden, const int32_t *tokens,
                                 const float *dy, float *grads) {
  const int64_t row = blockIdx.x;
  float *g = grads + int64_t(tokens[row]) * hidden;
  for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x)
    atomicAdd(g + j, dy[row * hidden + j]);
}

/// Softmax of one row in place; the row's masked loss into rowLoss.
__global__ void crossEntropyKernel(int64_t V, float *logits,
                                   const int32_t *labels, const float *lossMask,
                                   float *keptMask, int32_t *keptLabels,
                                   float *rowLoss) {
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
  const int32_t label = labels[row];
  const float m = lossMask ? lossMask[row] : 1.0f;
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
  if (t.tokens() == 0)
    return;
  gatherKernel<<<unsigned(t.tokens()), 128, 0, stream()>>>(
      s.hidden, params, tokens, y, reinterpret_cast<int32_t *>(saved));
  launched("embedding forward");
}

void embeddingBackwardInput(const EmbeddingShape &s, const Tokens &t,
                            const float *dy, float *saved) {
  copyFloats(saved + t.tokens(), dy, t.tokens() * s.hidden);
}

void embeddingBackwardWeight(const EmbeddingShape &s, const Tokens &t,
                             const float *saved, float *grads) {
  if (t.tokens() == 0)
    return;
  scatterAddKernel<<<unsigned(t.tokens()), 128, 0, stream()>>>(
      s.hidden, reinterpret_cast<const int32_t *>(saved), saved + t.tokens(),
      grads);
  launched("embedding backward");
}

float headForward(const HeadShape &s, const Tokens &t, const float *params,
                  const float *x, const int32_t *labels, const float *lossMask,
                  float *saved, float *ws) {
  const int64_t T = t.tokens(), V = s.vocab;
  const float *norm = params, *wOut = norm + s.hidden;
  HeadSaved h = headSaved(s, t.shape, saved);
  copyFloats(h.x, x, T * s.hidden);
  rmsnormForward(T, s.hidden, x, norm, h.xn, h.rstd);
  linearForward(T, s.hidden, V, h.xn, wOut, h.probs);
  float *rowLoss = ws, *sums = ws + T; // [T], [2]
  crossEntropyKernel<<<unsigned(T), 256, 0, stream()>>>(
      V, h.probs, labels, lossMask, h.mask, h.labels, rowLoss);
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

void headBackwardInput(const HeadShape &s, const Tokens &t, const float *params,
                       float *grads, float *saved, float lossScale, float *dx,
                       float *ws) {
  const int64_t T = t.tokens(), V = s.vocab;
  const float *norm = params, *wOut = norm + s.hidden;
  HeadSaved h = headSaved(s, t.shape, saved);
  float *dxn = ws, *sums = ws + T * s.hidden;
  sumTwoKernel<<<1, 1024, 0, stream()>>>(T, nullptr, h.mask, sums);
  launched("mask count");
  crossEntropyBackwardKernel<<<unsigned(T), 256, 0, stream()>>>(
      V, h.probs, h.mask, h.labels, sums, lossScale);
  launched("cross-entropy backward");
  linearBackwardInput(T, s.hidden, V, h.probs, wOut, dxn);
  rmsnormBackward(T, s.hidden, h.x, norm, h.rstd, dxn, dx, grads, false);
}

void headBackwardWeight(const HeadShape &s, const Tokens &t, const float *saved,
                        float *grads) {
  HeadSaved h = headSaved(s, t.shape, const_cast<float *>(saved));
  linearBackwardWeight(t.tokens(), s.hidden, s.vocab, h.probs, h.xn,
                       grads + s.hidden);
}

} // namespace hypipe::rt::cuda
