//===- Head.cpp - embedding, final norm, output layer and loss on the CPU -===//

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/cpu/Kernels.h"
#include "runtime/kernels/cpu/Profile.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace hypipe::rt::cpu {

void Kernels::embeddingLookup(int64_t T, int64_t n, const float *table,
                              const int32_t *ids, float *y, int32_t *keptIds) {
  // The whole table is the shard from row 0.
  embeddingLookupShard(T, n, table, ids, 0, INT64_MAX, y, keptIds);
}

void Kernels::embeddingScatterAdd(int64_t T, int64_t n, const int32_t *ids,
                                  const float *dy, float *grads) {
  embeddingScatterAddShard(T, n, ids, 0, INT64_MAX, dy, grads);
}

namespace {

/// The masked mean loss over the logits in h.logits (left as they are),
/// with each row's softmax statistics (h.rowMax, h.rowScale), h.mask and
/// h.labels (the labels `shift` rows ahead).
float crossEntropy(const TokenShape &t, int64_t vocab, int64_t shift,
                   const int32_t *labels, const float *lossMask, HeadSaved h) {
  const int64_t T = t.tokens(), V = vocab;
  // Labels `shift` rows ahead within each sample; none past its end.
  // (A thread_local names each thread's own: the loop's threads read this
  // one through the pointer.)
  thread_local std::vector<int64_t> aheadOfThread;
  rowsAhead(t, shift, aheadOfThread);
  const int64_t *ahead = aheadOfThread.data();
  ProfileScope scope(KernelClass::Elementwise);
  // Rows over the threads; their losses summed in row order after.
  thread_local std::vector<double> rowLoss;
  rowLoss.resize(size_t(T));
  double *lossOf = rowLoss.data();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < T; ++i) {
    const float *r = h.logits + i * V;
    const int64_t j = ahead[i];
    const int32_t label = j < 0 ? 0 : labels[j];
    const float m = j < 0 ? 0.0f : (lossMask ? lossMask[j] : 1.0f);
    // Softmax in float as Megatron's cross-entropy computes it, one
    // vectorised exp per logit, the sum in double; the probabilities are
    // made again in the backward (logitsGradientRow).
    const float mx = *std::max_element(r, r + V);
    double sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t v = 0; v < V; ++v)
      sum += fastExp(r[v] - mx);
    h.rowMax[i] = mx;
    h.rowScale[i] = float(1.0 / sum);
    h.mask[i] = m;
    h.labels[i] = label;
    lossOf[i] = m * (double(mx) + std::log(sum) - double(r[label]));
  }
  double total = 0, count = 0;
  for (int64_t i = 0; i < T; ++i) {
    total += lossOf[i];
    count += h.mask[i];
  }
  return count > 0 ? float(total / count) : 0.0f;
}

/// A row's `V` logits `r` to their gradient in place: the probabilities
/// made with the float operations the loss made (exp(logit - mx), times the
/// row's scale `inv`), the one-hot subtracted at `at` (when in [0, V)), times
/// the row's coefficient `c`.
void logitsGradientRow(float *r, int64_t V, float mx, float inv, int64_t at,
                       float c) {
#pragma omp simd
  for (int64_t v = 0; v < V; ++v)
    r[v] = fastExp(r[v] - mx);
  for (int64_t v = 0; v < V; ++v)
    r[v] *= inv;
  if (at >= 0 && at < V)
    r[at] -= 1.0f;
  for (int64_t v = 0; v < V; ++v)
    r[v] *= c;
}

} // namespace

void Kernels::embeddingLookupShard(int64_t T, int64_t n, const float *table,
                                   const int32_t *ids, int64_t first,
                                   int64_t rows, float *y, int32_t *keptIds) {
  ProfileScope scope(KernelClass::Elementwise);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < T; ++i) {
    keptIds[i] = ids[i];
    const int64_t row = int64_t(ids[i]) - first;
    if (row >= 0 && row < rows)
      std::memcpy(y + i * n, table + row * n, sizeof(float) * n);
    else
      std::memset(y + i * n, 0, sizeof(float) * n);
  }
}

void Kernels::embeddingScatterAddShard(int64_t T, int64_t n, const int32_t *ids,
                                       int64_t first, int64_t rows,
                                       const float *dy, float *grads) {
  ProfileScope scope(KernelClass::Elementwise);
  // Threads split the columns, so that rows of one token add in token order
  // whatever the thread count.
  constexpr int64_t kColumns = 64;
#pragma omp parallel for schedule(static)
  for (int64_t j0 = 0; j0 < n; j0 += kColumns) {
    const int64_t j1 = std::min(n, j0 + kColumns);
    for (int64_t i = 0; i < T; ++i) {
      const int64_t row = int64_t(ids[i]) - first;
      if (row < 0 || row >= rows)
        continue;
      float *g = grads + row * n;
      for (int64_t j = j0; j < j1; ++j)
        g[j] += dy[i * n + j];
    }
  }
}

float Kernels::crossEntropyShard(const TokenShape &t, int64_t vocab,
                                 int64_t first, int64_t shift,
                                 const int32_t *labels, const float *lossMask,
                                 HeadSaved h, TensorParallelCalls &tp,
                                 float *) {
  const int64_t T = t.tokens(), V = vocab;
  thread_local std::vector<int64_t> aheadOfThread;
  rowsAhead(t, shift, aheadOfThread);
  const int64_t *ahead = aheadOfThread.data();
  // Megatron's vocab_parallel_cross_entropy: each row's maximum logit over
  // the whole vocabulary, the target's logit (from the rank that holds
  // it), then the sum of the exponentials, each summed over the group.
  thread_local std::vector<float> rowsOf;
  rowsOf.assign(size_t(2 * T), 0.0f);
  float *mx = h.rowMax, *target = rowsOf.data(), *sum = target + T;
  {
    ProfileScope scope(KernelClass::Elementwise);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < T; ++i) {
      const float *r = h.logits + i * V;
      const int64_t j = ahead[i];
      h.labels[i] = j < 0 ? 0 : labels[j];
      h.mask[i] = j < 0 ? 0.0f : (lossMask ? lossMask[j] : 1.0f);
      mx[i] = *std::max_element(r, r + V);
    }
  }
  tp.run(CollectiveKind::AllReduceMax, mx, 1);
  {
    ProfileScope scope(KernelClass::Elementwise);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < T; ++i) {
      const int64_t at = int64_t(h.labels[i]) - first;
      target[i] = at >= 0 && at < V ? h.logits[i * V + at] : 0.0f;
    }
  }
  tp.run(CollectiveKind::AllReduce, target, 1);
  {
    ProfileScope scope(KernelClass::Elementwise);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < T; ++i) {
      const float *r = h.logits + i * V;
      double s = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t v = 0; v < V; ++v)
        s += fastExp(r[v] - mx[i]);
      sum[i] = float(s);
    }
  }
  tp.run(CollectiveKind::AllReduce, sum, 1);
  double total = 0, count = 0;
  for (int64_t i = 0; i < T; ++i) {
    h.rowScale[i] = 1.0f / sum[i];
    total += h.mask[i] *
             (double(mx[i]) + std::log(double(sum[i])) - double(target[i]));
    count += h.mask[i];
  }
  return count > 0 ? float(total / count) : 0.0f;
}

void Kernels::lossTargets(const TokenShape &t, int64_t shift,
                          const int32_t *labels, const float *lossMask,
                          HeadSaved h) {
  const int64_t T = t.tokens();
  thread_local std::vector<int64_t> aheadOfThread;
  rowsAhead(t, shift, aheadOfThread);
  const int64_t *ahead = aheadOfThread.data();
  ProfileScope scope(KernelClass::Elementwise);
  for (int64_t i = 0; i < T; ++i) {
    const int64_t j = ahead[i];
    h.labels[i] = j < 0 ? 0 : labels[j];
    h.mask[i] = j < 0 ? 0.0f : (lossMask ? lossMask[j] : 1.0f);
  }
}

void Kernels::crossEntropyChunk(int64_t row0, int64_t rows, int64_t vocab,
                                int64_t first, HeadSaved h,
                                LossChunkStats stats) {
  const int64_t V = vocab;
  ProfileScope scope(KernelClass::Elementwise);
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < rows; ++n) {
    const int64_t i = row0 + n;
    const float *r = h.logits + n * V;
    const float mx = *std::max_element(r, r + V);
    double sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t v = 0; v < V; ++v)
      sum += fastExp(r[v] - mx);
    const int64_t at = int64_t(h.labels[i]) - first;
    h.rowMax[i] = mx;
    stats.sum[i] = float(sum);
    stats.target[i] = at >= 0 && at < V ? r[at] : 0.0f;
  }
}

float Kernels::crossEntropyChunked(int64_t T, HeadSaved h,
                                   TensorParallelCalls *tp,
                                   LossChunkStats stats) {
  if (tp) {
    // Megatron's vocabulary-parallel statistics, each rank's sum first
    // rescaled from its own largest logit to the group's.
    std::memcpy(stats.groupMax, h.rowMax, sizeof(float) * T);
    tp->run(CollectiveKind::AllReduceMax, stats.groupMax, 1);
    {
      ProfileScope scope(KernelClass::Elementwise);
      for (int64_t i = 0; i < T; ++i) {
        stats.sum[i] *= std::exp(h.rowMax[i] - stats.groupMax[i]);
        h.rowMax[i] = stats.groupMax[i];
      }
    }
    tp->run(CollectiveKind::AllReduce, stats.target, 1);
    tp->run(CollectiveKind::AllReduce, stats.sum, 1);
  }
  ProfileScope scope(KernelClass::Elementwise);
  double total = 0, count = 0;
  for (int64_t i = 0; i < T; ++i) {
    h.rowScale[i] = 1.0f / stats.sum[i];
    total += h.mask[i] * (double(h.rowMax[i]) + std::log(double(stats.sum[i])) -
                          double(stats.target[i]));
    count += h.mask[i];
  }
  return count > 0 ? float(total / count) : 0.0f;
}

void Kernels::lossCoefficients(int64_t T, HeadSaved h, float lossScale,
                               float *) {
  ProfileScope scope(KernelClass::Elementwise);
  double count = 0;
  for (int64_t i = 0; i < T; ++i)
    count += h.mask[i];
  for (int64_t i = 0; i < T; ++i)
    h.mask[i] = count > 0 ? float(h.mask[i] * lossScale / count) : 0.0f;
}

void Kernels::crossEntropyBackwardChunk(int64_t row0, int64_t rows,
                                        int64_t vocab, int64_t first,
                                        HeadSaved h) {
  const int64_t V = vocab;
  ProfileScope scope(KernelClass::Elementwise);
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < rows; ++n) {
    const int64_t i = row0 + n;
    // The coefficient lossCoefficients left in the mask.
    logitsGradientRow(h.logits + n * V, V, h.rowMax[i], h.rowScale[i],
                      int64_t(h.labels[i]) - first, h.mask[i]);
  }
}

float Kernels::crossEntropy(const TokenShape &t, int64_t vocab, int64_t shift,
                            const int32_t *labels, const float *lossMask,
                            HeadSaved h, float *) {
  return cpu::crossEntropy(t, vocab, shift, labels, lossMask, h);
}

} // namespace hypipe::rt::cpu
