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
#include "runtime/formats/RuntimeError.h"
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

void Kernels::embeddingLookup(int64_t T, int64_t n, const float *table,
                              const int32_t *ids, float *y, int32_t *keptIds) {
  if (T == 0)
    return;
  check(cudaMemcpyAsync(keptIds, ids, sizeof(int32_t) * T,
                        cudaMemcpyDeviceToDevice, stream()),
        "keeping the tokens");
  gatherRows(T, n, table, ids, y);
}

void Kernels::embeddingScatterAdd(int64_t T, int64_t n, const int32_t *ids,
                                  const float *dy, float *grads) {
  scatterAddRows(T, n, ids, dy, grads);
}

namespace {

/// The logits in h.probs to their softmax in place, h.mask and h.labels
/// (the labels `shift` rows ahead within each sample), and the masked mean
/// loss, read back to the host. `ws`: a [T] row loss and two sums.
float crossEntropy(const Tokens &t, int64_t vocab, int64_t shift,
                   const int32_t *labels, const float *lossMask, HeadSaved h,
                   float *ws) {
  const int64_t T = t.tokens();
  float *rowLoss = ws, *sums = ws + T; // [T], [2]
  crossEntropyKernel<<<unsigned(T), 256, 0, stream()>>>(
      vocab, seqsOf(t), int(shift), h.probs, labels, lossMask, h.mask, h.labels,
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

/// h.probs to the logits' gradient in place; `ws` holds the mask's count.
void crossEntropyBackward(const Tokens &t, int64_t vocab, HeadSaved h,
                          float lossScale, float *ws) {
  const int64_t T = t.tokens();
  float *sums = ws;
  sumTwoKernel<<<1, 1024, 0, stream()>>>(T, nullptr, h.mask, sums);
  launched("mask count");
  crossEntropyBackwardKernel<<<unsigned(T), 256, 0, stream()>>>(
      vocab, h.probs, h.mask, h.labels, sums, lossScale);
  launched("cross-entropy backward");
}

} // namespace

float Kernels::crossEntropy(const Tokens &t, int64_t vocab, int64_t shift,
                            const int32_t *labels, const float *lossMask,
                            HeadSaved h, float *ws) {
  return cuda::crossEntropy(t, vocab, shift, labels, lossMask, h, ws);
}

void Kernels::crossEntropyBackward(const Tokens &t, int64_t vocab, HeadSaved h,
                                   float lossScale, float *ws) {
  cuda::crossEntropyBackward(t, vocab, h, lossScale, ws);
}

// Tensor parallelism runs on the cpu target only in this version: the
// compiler refuses a cuda artifact with tp above 1, and these refuse a
// manifest edited past it.
namespace {
[[noreturn]] void noTensorParallelOnCuda() {
  throw RuntimeError("error: this artifact splits layers over tensor-parallel "
                     "ranks, which the cuda target does not run yet\nhelp: "
                     "compile it with --target cpu, or with tp 1");
}
} // namespace

void Kernels::embeddingLookupShard(int64_t, int64_t, const float *,
                                   const int32_t *, int64_t, int64_t, float *,
                                   int32_t *) {
  noTensorParallelOnCuda();
}
void Kernels::embeddingScatterAddShard(int64_t, int64_t, const int32_t *,
                                       int64_t, int64_t, const float *,
                                       float *) {
  noTensorParallelOnCuda();
}
float Kernels::crossEntropyShard(const Tokens &, int64_t, int64_t, int64_t,
                                 const int32_t *, const float *, HeadSaved,
                                 TensorParallelCalls &) {
  noTensorParallelOnCuda();
}
void Kernels::crossEntropyBackwardShard(const Tokens &, int64_t, int64_t,
                                        HeadSaved, float) {
  noTensorParallelOnCuda();
}

} // namespace hypipe::rt::cuda
