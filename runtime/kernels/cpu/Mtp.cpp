//===- Mtp.cpp - multi-token prediction depths on the CPU -----------------===//
//
// A depth is input (embedding of the shifted tokens and the previous
// hidden states, both normalised, concatenated, projected), the MTP
// pattern's layers (the ordinary layer kernels), and output (final norm,
// the shared output layer, cross-entropy against the shifted labels).
// docs/model.md has the equations.
//
//===----------------------------------------------------------------------===//

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/cpu/Kernels.h"
#include "runtime/kernels/cpu/Primitives.h"

#include <cstring>

namespace hypipe::rt::cpu {

void Kernels::mtpInputForward(const MtpInputShape &s, const TokenShape &t,
                              const float *params, const float *table,
                              const int32_t *tokens, const float *hPrev,
                              float *y, float *saved, float *ws) const {
  const int64_t T = t.tokens(), H = s.hidden;
  const float *enorm = params, *hnorm = params + H, *w = params + 2 * H;
  MtpInputSaved m = mtpInputSaved(s, t, saved);
  // Token `depth` places ahead in the same sequence; token 0 past its end
  // (Megatron rolls the ids with a zero fill, per sequence when packed).
  thread_local std::vector<int64_t> ahead;
  rowsAhead(t, s.depth, ahead);
  for (int64_t i = 0; i < T; ++i)
    m.ids[i] = ahead[size_t(i)] < 0 ? 0 : tokens[ahead[size_t(i)]];
  for (int64_t i = 0; i < T; ++i)
    std::memcpy(m.e + i * H, table + int64_t(m.ids[i]) * H, sizeof(float) * H);
  std::memcpy(m.h, hPrev, sizeof(float) * T * H);
  float *en = ws, *hn = ws + T * H;
  rmsnormForward(T, H, m.e, enorm, en, m.rstdE);
  rmsnormForward(T, H, m.h, hnorm, hn, m.rstdH);
  roundActivations(activations, en, T * H);
  roundActivations(activations, hn, T * H);
  for (int64_t i = 0; i < T; ++i) {
    std::memcpy(m.cat + i * 2 * H, en + i * H, sizeof(float) * H);
    std::memcpy(m.cat + i * 2 * H + H, hn + i * H, sizeof(float) * H);
  }
  linearForward(T, 2 * H, H, m.cat, w, y);
  roundActivations(activations, y, T * H);
}

void Kernels::mtpInputBackwardInput(const MtpInputShape &s, const TokenShape &t,
                                    const float *params, float *grads,
                                    float *saved, const float *dy,
                                    float *dhPrev, float *ws) const {
  const int64_t T = t.tokens(), H = s.hidden;
  const float *enorm = params, *hnorm = params + H, *w = params + 2 * H;
  MtpInputSaved m = mtpInputSaved(s, t, saved);
  std::memcpy(m.dOut, dy, sizeof(float) * T * H); // for the weight pass
  float *dcat = ws, *half = ws + 2 * T * H;
  linearBackwardInput(T, 2 * H, H, dy, w, dcat);
  roundActivations(activations, dcat, T * 2 * H);
  for (int64_t i = 0; i < T; ++i)
    std::memcpy(half + i * H, dcat + i * 2 * H, sizeof(float) * H);
  rmsnormBackward(T, H, m.e, enorm, m.rstdE, half, m.dE, grads, false);
  roundActivations(activations, m.dE,
                   T * H); // the looked-up rows' complete gradient
  for (int64_t i = 0; i < T; ++i)
    std::memcpy(half + i * H, dcat + i * 2 * H + H, sizeof(float) * H);
  // dhPrev is a part of the previous normed output's gradient, which the
  // previous depth (or the head) completes and rounds.
  rmsnormBackward(T, H, m.h, hnorm, m.rstdH, half, dhPrev, grads + H, false);
}

void Kernels::mtpInputBackwardWeight(const MtpInputShape &s,
                                     const TokenShape &t, const float *saved,
                                     float *grads, float *tableGrads) const {
  const int64_t T = t.tokens(), H = s.hidden;
  MtpInputSaved m = mtpInputSaved(s, t, const_cast<float *>(saved));
  linearBackwardWeight(T, 2 * H, H, m.dOut, m.cat, grads + 2 * H);
  for (int64_t i = 0; i < T; ++i) {
    float *g = tableGrads + int64_t(m.ids[i]) * H;
    const float *d = m.dE + i * H;
    for (int64_t j = 0; j < H; ++j)
      g[j] += d[j];
  }
}

} // namespace hypipe::rt::cpu
