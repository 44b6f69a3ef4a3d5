//===- Head.cpp - embedding, final norm, output layer and loss on the CPU -===//

#include "runtime/kernels/recipes/Head.h"
#include "core/model/BufferLayouts.h"
#include "runtime/kernels/cpu/Layers.h"
#include "runtime/kernels/cpu/Primitives.h"
#include "runtime/kernels/cpu/Profile.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace hypipe::rt::cpu {

void embeddingForward(DType activations, const EmbeddingShape &s,
                      const TokenShape &t, const float *params,
                      const int32_t *tokens, float *y, float *saved) {
  ProfileScope scope(KernelClass::Elementwise);
  const int64_t T = t.tokens();
  int32_t *keptTokens = reinterpret_cast<int32_t *>(saved);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < T; ++i) {
    keptTokens[i] = tokens[i];
    std::memcpy(y + i * s.hidden, params + int64_t(tokens[i]) * s.hidden,
                sizeof(float) * s.hidden);
  }
}

void embeddingBackwardInput(DType activations, const EmbeddingShape &s,
                            const TokenShape &t, const float *dy,
                            float *saved) {
  std::memcpy(saved + t.tokens(), dy, sizeof(float) * t.tokens() * s.hidden);
}

void embeddingBackwardWeight(DType activations, const EmbeddingShape &s,
                             const TokenShape &t, const float *saved,
                             float *grads) {
  ProfileScope scope(KernelClass::Elementwise);
  const int32_t *tokens = reinterpret_cast<const int32_t *>(saved);
  const float *dy = saved + t.tokens();
  // Threads split the columns, so that rows of one token add in token order
  // whatever the thread count.
  const int64_t H = s.hidden;
  constexpr int64_t kColumns = 64;
#pragma omp parallel for schedule(static)
  for (int64_t j0 = 0; j0 < H; j0 += kColumns) {
    const int64_t j1 = std::min(H, j0 + kColumns);
    for (int64_t i = 0; i < t.tokens(); ++i) {
      float *g = grads + int64_t(tokens[i]) * H;
      for (int64_t j = j0; j < j1; ++j)
        g[j] += dy[i * H + j];
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

struct CpuHead : RecipeBasics {
  static float crossEntropy(const TokenShape &t, int64_t vocab, int64_t shift,
                            const int32_t *labels, const float *lossMask,
                            HeadSaved h, float *) {
    return cpu::crossEntropy(t, vocab, shift, labels, lossMask, h);
  }
  static void crossEntropyBackward(const TokenShape &t, int64_t vocab,
                                   HeadSaved h, float lossScale, float *) {
    cpu::crossEntropyBackward(t, vocab, h, lossScale);
  }
  HYPIPE_LINEAR_NORM_PRIMITIVES(cpu)
};

using Recipe = recipes::Head<CpuHead>;

} // namespace

float lmLossForward(DType activations, const TokenShape &t, int64_t hidden,
                    int64_t vocab, const float *norm, const float *wOut,
                    const float *x, const int32_t *labels,
                    const float *lossMask, int64_t shift, HeadSaved h) {
  return Recipe{CpuHead{{activations}}}.lossForward(
      t, hidden, vocab, norm, wOut, x, labels, lossMask, shift, h, nullptr);
}

void lmLossBackwardInput(DType activations, const TokenShape &t, int64_t hidden,
                         int64_t vocab, const float *norm, const float *wOut,
                         HeadSaved h, float lossScale, const float *dxnExtra,
                         float *dx, float *gNorm, float *ws) {
  Recipe{CpuHead{{activations}}}.lossBackwardInput(
      t, hidden, vocab, norm, wOut, h, lossScale, dxnExtra, dx, gNorm, ws);
}

float headForward(DType activations, const HeadShape &s, const TokenShape &t,
                  const float *params, const float *x, const int32_t *labels,
                  const float *lossMask, float *saved, float *ws) {
  (void)ws;
  return lmLossForward(activations, t, s.hidden, s.vocab, params,
                       params + s.hidden, x, labels, lossMask, 0,
                       headSaved(s, t, saved));
}

void headBackwardInput(DType activations, const HeadShape &s,
                       const TokenShape &t, const float *params, float *grads,
                       float *saved, float lossScale, float *dx, float *ws) {
  headBackwardInput(activations, s, t, params, grads, saved, lossScale, nullptr,
                    dx, ws);
}

void headBackwardInput(DType activations, const HeadShape &s,
                       const TokenShape &t, const float *params, float *grads,
                       float *saved, float lossScale, const float *dxnExtra,
                       float *dx, float *ws) {
  lmLossBackwardInput(activations, t, s.hidden, s.vocab, params,
                      params + s.hidden, headSaved(s, t, saved), lossScale,
                      dxnExtra, dx, grads, ws);
}

void headBackwardWeight(DType activations, const HeadShape &s,
                        const TokenShape &t, const float *saved, float *grads) {
  Recipe{CpuHead{{activations}}}.backwardWeight(
      t, s.hidden, s.vocab, headSaved(s, t, const_cast<float *>(saved)),
      grads + s.hidden);
}

const float *headNormed(const HeadShape &s, const TokenShape &t,
                        const float *saved) {
  return headSaved(s, t, const_cast<float *>(saved)).xn;
}

} // namespace hypipe::rt::cpu
