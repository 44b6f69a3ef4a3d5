//===- Head.cpp - embedding, final norm, output layer and loss on the CPU -===//

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/cpu/Kernels.h"
#include "runtime/kernels/cpu/Profile.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace hypipe::rt::cpu {

void Kernels::embeddingLookup(int64_t T, int64_t n, const float *table,
                              const int32_t *ids, float *y, int32_t *keptIds) {
  ProfileScope scope(KernelClass::Elementwise);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < T; ++i) {
    keptIds[i] = ids[i];
    std::memcpy(y + i * n, table + int64_t(ids[i]) * n, sizeof(float) * n);
  }
}

void Kernels::embeddingScatterAdd(int64_t T, int64_t n, const int32_t *ids,
                                  const float *dy, float *grads) {
  ProfileScope scope(KernelClass::Elementwise);
  // Threads split the columns, so that rows of one token add in token order
  // whatever the thread count.
  constexpr int64_t kColumns = 64;
#pragma omp parallel for schedule(static)
  for (int64_t j0 = 0; j0 < n; j0 += kColumns) {
    const int64_t j1 = std::min(n, j0 + kColumns);
    for (int64_t i = 0; i < T; ++i) {
      float *g = grads + int64_t(ids[i]) * n;
      for (int64_t j = j0; j < j1; ++j)
        g[j] += dy[i * n + j];
    }
  }
}

namespace {

/// The logits in h.probs to their softmax in place, h.mask and h.labels
/// (the labels `shift` rows ahead), and the masked mean loss.
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
    float *r = h.probs + i * V;
    const int64_t j = ahead[i];
    const int32_t label = j < 0 ? 0 : labels[j];
    const float m = j < 0 ? 0.0f : (lossMask ? lossMask[j] : 1.0f);
    const float labelLogit = r[label];
    // Softmax in float as Megatron's cross-entropy computes it, one
    // vectorised exp per logit (kept, then scaled), the sum in double.
    const float mx = *std::max_element(r, r + V);
    double sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t v = 0; v < V; ++v) {
      const float e = fastExp(r[v] - mx);
      r[v] = e;
      sum += e;
    }
    const float inv = float(1.0 / sum);
    for (int64_t v = 0; v < V; ++v)
      r[v] *= inv;
    h.mask[i] = m;
    h.labels[i] = label;
    lossOf[i] = m * (double(mx) + std::log(sum) - double(labelLogit));
  }
  double total = 0, count = 0;
  for (int64_t i = 0; i < T; ++i) {
    total += lossOf[i];
    count += h.mask[i];
  }
  return count > 0 ? float(total / count) : 0.0f;
}

/// h.probs to the logits' gradient in place: (softmax - onehot) * mask *
/// lossScale / count.
void crossEntropyBackward(const TokenShape &t, int64_t vocab, HeadSaved h,
                          float lossScale) {
  const int64_t T = t.tokens(), V = vocab;
  {
    ProfileScope scope(KernelClass::Elementwise);
    // dlogits = (softmax - onehot) * mask / count, written over the
    // probabilities (the weight pass reads it from there).
    double count = 0;
    for (int64_t i = 0; i < T; ++i)
      count += h.mask[i];
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < T; ++i) {
      float c = count > 0 ? float(h.mask[i] * lossScale / count) : 0.0f;
      float *r = h.probs + i * V;
      r[h.labels[i]] -= 1.0f;
      for (int64_t v = 0; v < V; ++v)
        r[v] *= c;
    }
  }
}

} // namespace

float Kernels::crossEntropy(const TokenShape &t, int64_t vocab, int64_t shift,
                            const int32_t *labels, const float *lossMask,
                            HeadSaved h, float *) {
  return cpu::crossEntropy(t, vocab, shift, labels, lossMask, h);
}

void Kernels::crossEntropyBackward(const TokenShape &t, int64_t vocab,
                                   HeadSaved h, float lossScale, float *) {
  cpu::crossEntropyBackward(t, vocab, h, lossScale);
}

} // namespace hypipe::rt::cpu
