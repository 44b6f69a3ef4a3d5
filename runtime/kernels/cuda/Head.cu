//===- Head.cu - embedding, final norm, output layer and loss on the GPU --===//
//
// Cross-entropy reads the [T, vocab] logits and keeps them: one block per
// row makes the row's loss and its softmax statistics (the largest logit,
// 1 / the sum of exponentials); backward makes the probabilities again from
// them and turns the logits into their gradient in place. No second
// [T, vocab] buffer exists, and the kept logits are activations (two bytes
// a value in a bf16 run's packed saved tensors). The head and every MTP depth's
// output (Mtp.cu) share the loss (lmLossForward, lmLossBackwardInput), as on
// the CPU.
//
//===----------------------------------------------------------------------===//

#include "core/model/BufferLayouts.h"
#include "runtime/formats/RuntimeError.h"
#include "runtime/kernels/cuda/Primitives.cuh"

#include <cfloat>

namespace hypipe::rt::cuda {
namespace {

/// The largest of a row's `V` values, over the block (blockDim.x a
/// multiple of 32, at most 1024); every thread gets it.
__device__ float blockRowMax(const float *r, int64_t V) {
  __shared__ float partial[32];
  float mx = -FLT_MAX;
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x)
    mx = fmaxf(mx, r[v]);
  for (int o = 16; o > 0; o >>= 1)
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  __syncthreads();
  if (threadIdx.x % 32 == 0)
    partial[threadIdx.x / 32] = mx;
  __syncthreads();
  float m = partial[0];
  for (int w = 1; w < int(blockDim.x / 32); ++w)
    m = fmaxf(m, partial[w]);
  return m;
}

/// One row's masked loss into rowLoss and its softmax statistics (the
/// largest logit, 1 / the sum of exponentials); the logits stay. The row's
/// label and mask are those `shift` rows ahead in its sequence (none, so
/// mask 0, past its end).
__global__ void crossEntropyKernel(int64_t V, Seqs seqs, int shift,
                                   const float *logits, const int32_t *labels,
                                   const float *lossMask, float *keptMask,
                                   int32_t *keptLabels, float *rowMax,
                                   float *rowScale, float *rowLoss) {
  const int64_t row = blockIdx.x;
  const float *r = logits + row * V;
  const float mx = blockRowMax(r, V);
  float sum = 0;
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x)
    sum += expf(r[v] - mx);
  sum = blockSum(sum);
  const int ahead = seqs.rowAhead(int(row), shift);
  const int32_t label = ahead < 0 ? 0 : labels[ahead];
  const float m = ahead < 0 ? 0.0f : (lossMask ? lossMask[ahead] : 1.0f);
  if (threadIdx.x == 0) {
    rowLoss[row] = m * (mx + logf(sum) - r[label]);
    rowMax[row] = mx;
    rowScale[row] = 1.0f / sum;
    keptMask[row] = m;
    keptLabels[row] = label;
  }
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

// The fused linear cross-entropy (a chunk of rows at a time).

/// Each row's label and mask, those `shift` rows ahead in its sequence.
__global__ void lossTargetsKernel(int64_t T, Seqs seqs, int shift,
                                  const int32_t *labels, const float *lossMask,
                                  float *keptMask, int32_t *keptLabels) {
  const int64_t row = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= T)
    return;
  const int ahead = seqs.rowAhead(int(row), shift);
  keptLabels[row] = ahead < 0 ? 0 : labels[ahead];
  keptMask[row] = ahead < 0 ? 0.0f : (lossMask ? lossMask[ahead] : 1.0f);
}

/// One block a row of the chunk (row0 + blockIdx.x of the microbatch): its
/// largest logit, sum of exponentials and target logit (this rank's).
__global__ void crossEntropyChunkKernel(int64_t V, int64_t row0, int64_t first,
                                        const float *logits,
                                        const int32_t *labels, float *rowMax,
                                        float *rowSum, float *target) {
  const int64_t row = row0 + blockIdx.x;
  const float *r = logits + int64_t(blockIdx.x) * V;
  const float mx = blockRowMax(r, V);
  float sum = 0;
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x)
    sum += expf(r[v] - mx);
  sum = blockSum(sum);
  if (threadIdx.x == 0) {
    const int64_t at = int64_t(labels[row]) - first;
    rowMax[row] = mx;
    rowSum[row] = sum;
    target[row] = at >= 0 && at < V ? r[at] : 0.0f;
  }
}

/// Each rank's sum rescaled from its largest logit to the group's, which
/// becomes the row's.
__global__ void rescaleSumsKernel(int64_t T, const float *groupMax,
                                  float *rowMax, float *rowSum) {
  const int64_t row = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= T)
    return;
  rowSum[row] *= expf(rowMax[row] - groupMax[row]);
  rowMax[row] = groupMax[row];
}

/// mask[i] * lossScale / count in place (count: sums[1]).
__global__ void lossCoefficientsKernel(int64_t T, const float *sums,
                                       float lossScale, float *mask) {
  const int64_t row = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= T)
    return;
  const float n = sums[1];
  mask[row] = n > 0 ? mask[row] * lossScale / n : 0.0f;
}

/// The chunk's logits to their gradient in place: (softmax - onehot) times
/// the row's coefficient (in mask).
__global__ void crossEntropyBackwardChunkKernel(
    int64_t V, int64_t row0, int64_t first, float *logits, const float *rowMax,
    const float *rowScale, const float *coefficient, const int32_t *labels) {
  const int64_t row = row0 + blockIdx.x;
  float *r = logits + int64_t(blockIdx.x) * V;
  const float c = coefficient[row];
  const float mx = rowMax[row], scale = rowScale[row];
  const int64_t at = int64_t(labels[row]) - first;
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x)
    r[v] = (expf(r[v] - mx) * scale - (v == at ? 1.0f : 0.0f)) * c;
}

} // namespace

namespace {

/// The looked-up ids kept (an MTP depth looks up the ids it keeps: nothing
/// to copy).
void keepIds(int64_t T, const int32_t *ids, int32_t *keptIds) {
  if (keptIds == ids)
    return;
  check(cudaMemcpyAsync(keptIds, ids, sizeof(int32_t) * T,
                        cudaMemcpyDeviceToDevice, stream()),
        "keeping the tokens");
}

} // namespace

void Kernels::embeddingLookup(int64_t T, int64_t n, const float *table,
                              const int32_t *ids, float *y, int32_t *keptIds) {
  if (T == 0)
    return;
  keepIds(T, ids, keptIds);
  gatherRows(T, n, table, ids, y);
}

void Kernels::embeddingScatterAdd(int64_t T, int64_t n, const int32_t *ids,
                                  const float *dy, float *grads) {
  scatterAddRows(T, n, ids, dy, grads);
}

namespace {

/// The mask-weighted mean of the rows' losses, read back to the host
/// (`sums`: 2 floats of scratch).
float maskedMean(int64_t T, const float *rowLoss, const float *mask,
                 float *sums) {
  sumTwoKernel<<<1, 1024, 0, stream()>>>(T, rowLoss, mask, sums);
  launched("loss sum");
  float host[2];
  check(cudaMemcpyAsync(host, sums, sizeof(host), cudaMemcpyDeviceToHost,
                        stream()),
        "reading the loss");
  synchronize();
  return host[1] > 0 ? host[0] / host[1] : 0.0f;
}

/// The masked mean loss over the logits in h.logits, read back to the
/// host, with each row's softmax statistics, h.mask and h.labels (the
/// labels `shift` rows ahead within each sample). `ws`: a [T] row loss and
/// two sums.
float crossEntropy(const Tokens &t, int64_t vocab, int64_t shift,
                   const int32_t *labels, const float *lossMask, HeadSaved h,
                   float *ws) {
  const int64_t T = t.tokens();
  float *rowLoss = ws, *sums = ws + T; // [T], [2]
  crossEntropyKernel<<<unsigned(T), 256, 0, stream()>>>(
      vocab, seqsOf(t), int(shift), h.logits, labels, lossMask, h.mask,
      h.labels, h.rowMax, h.rowScale, rowLoss);
  launched("cross-entropy");
  return maskedMean(T, rowLoss, h.mask, sums);
}

} // namespace

float Kernels::crossEntropy(const Tokens &t, int64_t vocab, int64_t shift,
                            const int32_t *labels, const float *lossMask,
                            HeadSaved h, float *ws) {
  return cuda::crossEntropy(t, vocab, shift, labels, lossMask, h, ws);
}

// Split over tensor-parallel ranks (TensorParallel.h): the vocabulary's
// rows [first, first + rows) on this rank.

namespace {

/// y[i] = table[ids[i] - first] for ids this rank's rows hold, 0 else.
__global__ void gatherShardRowsKernel(int64_t n, const float *table,
                                      const int32_t *ids, int64_t first,
                                      int64_t rows, float *y) {
  const int64_t row = blockIdx.x, at = int64_t(ids[row]) - first;
  const bool mine = at >= 0 && at < rows;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
    y[row * n + j] = mine ? table[at * n + j] : 0.0f;
}

__global__ void scatterAddShardRowsKernel(int64_t n, const int32_t *ids,
                                          int64_t first, int64_t rows,
                                          const float *dy, float *grads) {
  const int64_t row = blockIdx.x, at = int64_t(ids[row]) - first;
  if (at < 0 || at >= rows)
    return;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
    atomicAdd(grads + at * n + j, dy[row * n + j]);
}

/// Each row's label and mask (`shift` rows ahead), its largest logit of
/// the shard, and its label's logit where this rank holds it (else 0).
__global__ void shardMaxKernel(int64_t V, Seqs seqs, int shift, int64_t first,
                               const float *logits, const int32_t *labels,
                               const float *lossMask, float *keptMask,
                               int32_t *keptLabels, float *rowMax,
                               float *target) {
  const int64_t row = blockIdx.x;
  const float *r = logits + row * V;
  const float m = blockRowMax(r, V);
  if (threadIdx.x == 0) {
    const int ahead = seqs.rowAhead(int(row), shift);
    const int32_t label = ahead < 0 ? 0 : labels[ahead];
    keptLabels[row] = label;
    keptMask[row] = ahead < 0 ? 0.0f : (lossMask ? lossMask[ahead] : 1.0f);
    const int64_t at = int64_t(label) - first;
    rowMax[row] = m;
    target[row] = at >= 0 && at < V ? r[at] : 0.0f;
  }
}

/// The sum of exp(logit - the row's maximum) over the shard's logits.
__global__ void shardExpKernel(int64_t V, const float *logits,
                               const float *rowMax, float *rowSum) {
  const int64_t row = blockIdx.x;
  const float *r = logits + row * V;
  const float mx = rowMax[row];
  float sum = 0;
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x)
    sum += expf(r[v] - mx);
  sum = blockSum(sum);
  if (threadIdx.x == 0)
    rowSum[row] = sum;
}

/// Each row's scale (1 / the whole vocabulary's sum) and loss.
__global__ void shardFinishKernel(int64_t T, const float *mask,
                                  const float *rowMax, const float *rowSum,
                                  const float *target, float *rowScale,
                                  float *rowLoss) {
  const int64_t row = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= T)
    return;
  rowScale[row] = 1.0f / rowSum[row];
  rowLoss[row] = mask[row] * (rowMax[row] + logf(rowSum[row]) - target[row]);
}

} // namespace

void Kernels::embeddingLookupShard(int64_t T, int64_t n, const float *table,
                                   const int32_t *ids, int64_t first,
                                   int64_t rows, float *y, int32_t *keptIds) {
  if (T == 0)
    return;
  keepIds(T, ids, keptIds);
  gatherShardRowsKernel<<<unsigned(T), 128, 0, stream()>>>(n, table, ids, first,
                                                           rows, y);
  launched("row gather (vocabulary shard)");
}

void Kernels::embeddingScatterAddShard(int64_t T, int64_t n, const int32_t *ids,
                                       int64_t first, int64_t rows,
                                       const float *dy, float *grads) {
  if (T == 0)
    return;
  scatterAddShardRowsKernel<<<unsigned(T), 128, 0, stream()>>>(n, ids, first,
                                                               rows, dy, grads);
  launched("row scatter-add (vocabulary shard)");
}

float Kernels::crossEntropyShard(const Tokens &t, int64_t vocab, int64_t first,
                                 int64_t shift, const int32_t *labels,
                                 const float *lossMask, HeadSaved h,
                                 TensorParallelCalls &tp, float *ws) {
  // Megatron's vocab_parallel_cross_entropy: the maximum logit, the target's
  // logit and the sum of the exponentials, each reduced over the group.
  const int64_t T = t.tokens();
  float *target = ws, *rowSum = ws + T, *rowLoss = ws + 2 * T,
        *sums = ws + 3 * T;
  shardMaxKernel<<<unsigned(T), 256, 0, stream()>>>(
      vocab, seqsOf(t), int(shift), first, h.logits, labels, lossMask, h.mask,
      h.labels, h.rowMax, target);
  launched("cross-entropy maximum (vocabulary shard)");
  tp.run(CollectiveKind::AllReduceMax, h.rowMax, 1);
  tp.run(CollectiveKind::AllReduce, target, 1);
  shardExpKernel<<<unsigned(T), 256, 0, stream()>>>(vocab, h.logits, h.rowMax,
                                                    rowSum);
  launched("cross-entropy exponentials (vocabulary shard)");
  tp.run(CollectiveKind::AllReduce, rowSum, 1);
  shardFinishKernel<<<blocksFor(T), 256, 0, stream()>>>(
      T, h.mask, h.rowMax, rowSum, target, h.rowScale, rowLoss);
  launched("cross-entropy (vocabulary shard)");
  return maskedMean(T, rowLoss, h.mask, sums);
}

void Kernels::lossTargets(const Tokens &t, int64_t shift, const int32_t *labels,
                          const float *lossMask, HeadSaved h) {
  const int64_t T = t.tokens();
  if (T == 0)
    return;
  lossTargetsKernel<<<blocksFor(T), 256, 0, stream()>>>(
      T, seqsOf(t), int(shift), labels, lossMask, h.mask, h.labels);
  launched("loss targets");
}

void Kernels::crossEntropyChunk(int64_t row0, int64_t rows, int64_t vocab,
                                int64_t first, HeadSaved h,
                                LossChunkStats stats) {
  if (rows == 0)
    return;
  crossEntropyChunkKernel<<<unsigned(rows), 256, 0, stream()>>>(
      vocab, row0, first, h.logits, h.labels, h.rowMax, stats.sum,
      stats.target);
  launched("cross-entropy (chunk)");
}

float Kernels::crossEntropyChunked(int64_t T, HeadSaved h,
                                   TensorParallelCalls *tp,
                                   LossChunkStats stats) {
  if (tp) {
    check(cudaMemcpyAsync(stats.groupMax, h.rowMax, sizeof(float) * T,
                          cudaMemcpyDeviceToDevice, stream()),
          "copying the rows' maxima");
    tp->run(CollectiveKind::AllReduceMax, stats.groupMax, 1);
    rescaleSumsKernel<<<blocksFor(T), 256, 0, stream()>>>(T, stats.groupMax,
                                                          h.rowMax, stats.sum);
    launched("cross-entropy rescale (vocabulary shard)");
    tp->run(CollectiveKind::AllReduce, stats.target, 1);
    tp->run(CollectiveKind::AllReduce, stats.sum, 1);
  }
  shardFinishKernel<<<blocksFor(T), 256, 0, stream()>>>(
      T, h.mask, h.rowMax, stats.sum, stats.target, h.rowScale, stats.rowLoss);
  launched("cross-entropy (chunked)");
  return maskedMean(T, stats.rowLoss, h.mask, stats.sums);
}

void Kernels::lossCoefficients(int64_t T, HeadSaved h, float lossScale,
                               float *ws) {
  if (T == 0)
    return;
  sumTwoKernel<<<1, 1024, 0, stream()>>>(T, nullptr, h.mask, ws);
  launched("mask count");
  lossCoefficientsKernel<<<blocksFor(T), 256, 0, stream()>>>(T, ws, lossScale,
                                                             h.mask);
  launched("loss coefficients");
}

void Kernels::crossEntropyBackwardChunk(int64_t row0, int64_t rows,
                                        int64_t vocab, int64_t first,
                                        HeadSaved h) {
  if (rows == 0)
    return;
  crossEntropyBackwardChunkKernel<<<unsigned(rows), 256, 0, stream()>>>(
      vocab, row0, first, h.logits, h.rowMax, h.rowScale, h.mask, h.labels);
  launched("cross-entropy backward (chunk)");
}

} // namespace hypipe::rt::cuda
