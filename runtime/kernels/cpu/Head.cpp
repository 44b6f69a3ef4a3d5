//===- Head.cpp - embedding, final norm, output layer and loss on the CPU -===//

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/cpu/Layers.h"
#include "runtime/kernels/cpu/Primitives.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace hypipe::rt::cpu {

void embeddingForward(const EmbeddingShape &s, const TokenShape &t,
                      const float *params, const int32_t *tokens, float *y,
                      float *saved) {
  const int64_t T = t.tokens();
  int32_t *keptTokens = reinterpret_cast<int32_t *>(saved);
  for (int64_t i = 0; i < T; ++i) {
    keptTokens[i] = tokens[i];
    std::memcpy(y + i * s.hidden, params + int64_t(tokens[i]) * s.hidden,
                sizeof(float) * s.hidden);
  }
}

void embeddingBackwardInput(const EmbeddingShape &s, const TokenShape &t,
                            const float *dy, float *saved) {
  std::memcpy(saved + t.tokens(), dy, sizeof(float) * t.tokens() * s.hidden);
}

void embeddingBackwardWeight(const EmbeddingShape &s, const TokenShape &t,
                             const float *saved, float *grads) {
  const int32_t *tokens = reinterpret_cast<const int32_t *>(saved);
  const float *dy = saved + t.tokens();
  for (int64_t i = 0; i < t.tokens(); ++i) {
    float *g = grads + int64_t(tokens[i]) * s.hidden;
    for (int64_t j = 0; j < s.hidden; ++j)
      g[j] += dy[i * s.hidden + j];
  }
}

float headForward(const HeadShape &s, const TokenShape &t, const float *params,
                  const float *x, const int32_t *labels, const float *lossMask,
                  float *saved, float *ws) {
  (void)ws;
  const int64_t T = t.tokens(), V = s.vocab;
  const float *norm = params, *wOut = norm + s.hidden;
  HeadSaved h = headSaved(s, t, saved);
  std::memcpy(h.x, x, sizeof(float) * T * s.hidden);
  rmsnormForward(T, s.hidden, x, norm, h.xn, h.rstd);
  linearForward(T, s.hidden, V, h.xn, wOut, h.probs);
  double total = 0, count = 0;
  for (int64_t i = 0; i < T; ++i) {
    float *r = h.probs + i * V;
    float mx = *std::max_element(r, r + V);
    double sum = 0;
    for (int64_t v = 0; v < V; ++v)
      sum += std::exp(double(r[v] - mx));
    double logZ = double(mx) + std::log(sum);
    float m = lossMask ? lossMask[i] : 1.0f;
    h.mask[i] = m;
    h.labels[i] = labels[i];
    total += m * (logZ - double(r[labels[i]]));
    count += m;
    for (int64_t v = 0; v < V; ++v)
      r[v] = float(std::exp(double(r[v]) - logZ));
  }
  return count > 0 ? float(total / count) : 0.0f;
}

void headBackwardInput(const HeadShape &s, const TokenShape &t,
                       const float *params, float *grads, float *saved,
                       float lossScale, float *dx, float *ws) {
  const int64_t T = t.tokens(), V = s.vocab;
  const float *norm = params, *wOut = norm + s.hidden;
  HeadSaved h = headSaved(s, t, saved);
  double count = 0;
  for (int64_t i = 0; i < T; ++i)
    count += h.mask[i];
  // dlogits = (softmax - onehot) * mask / count, written over the
  // probabilities (the weight pass reads it from there).
  for (int64_t i = 0; i < T; ++i) {
    float c = count > 0 ? float(h.mask[i] * lossScale / count) : 0.0f;
    float *r = h.probs + i * V;
    r[h.labels[i]] -= 1.0f;
    for (int64_t v = 0; v < V; ++v)
      r[v] *= c;
  }
  float *dxn = ws;
  linearBackwardInput(T, s.hidden, V, h.probs, wOut, dxn);
  rmsnormBackward(T, s.hidden, h.x, norm, h.rstd, dxn, dx, grads, false);
}

void headBackwardWeight(const HeadShape &s, const TokenShape &t,
                        const float *saved, float *grads) {
  HeadSaved h = headSaved(s, t, const_cast<float *>(saved));
  linearBackwardWeight(t.tokens(), s.hidden, s.vocab, h.probs, h.xn,
                       grads + s.hidden);
}

} // namespace hypipe::rt::cpu
