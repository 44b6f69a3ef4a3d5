//===- Moe.h - what the MoE layer does alike on both targets --------------===//
//
// The parts of the MoE layer whose sequence of primitives is the same on
// the CPU and the GPU, written once over a target's linear kernels; the
// routing, gathering and scattering differ (on the GPU the dispatch sizes
// come back to the host) and stay in each target's file, whose layer
// kernels (moeForward, moeBackwardInput, moeBackwardWeight, in the call's
// precision) the layer `Moe` below runs.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_RECIPES_MOE_H
#define HYPIPE_RUNTIME_KERNELS_RECIPES_MOE_H

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/recipes/Primitives.h"

#include <vector>

namespace hypipe::rt::recipes {

/// Every expert's forward over the rows routed to it: fc1, the activation
/// and fc2 from the gathered rows m.xr into m.h1, m.act and m.yr, each
/// rounded to the call's precision once complete. `k` is the target's
/// primitive set (recipes/Primitives.h) with activationForward.
template <class P>
void moeExpertsForward(const P &k, const MoeShape &s, const MoeSaved &m,
                       const MoeParams<const float> &p,
                       const std::vector<int64_t> &off) {
  const int64_t Hd = s.hidden;
  for (int64_t e = 0; e < s.experts; ++e) {
    int64_t r0 = off[e], n = off[e + 1] - off[e];
    if (n == 0)
      continue;
    k.linearForward(n, Hd, s.fc1Width(), m.xr + r0 * Hd, p.w1(s, e),
                    m.h1 + r0 * s.fc1Width());
    k.round(m.h1 + r0 * s.fc1Width(), n * s.fc1Width());
    k.activationForward(s.act, n, s.ffn, m.h1 + r0 * s.fc1Width(),
                        m.act + r0 * s.ffn);
    k.round(m.act + r0 * s.ffn, n * s.ffn);
    k.linearForward(n, s.ffn, Hd, m.act + r0 * s.ffn, p.w2(s, e),
                    m.yr + r0 * Hd);
    k.round(m.yr + r0 * Hd, n * Hd);
  }
}

/// Every expert's input-gradient chain over the rows routed to it, from
/// the routed rows' output gradients m.dyr (complete and rounded): fc2's
/// input gradient into `dact` [rows, ffn], the activation's into m.dh1, and
/// fc1's into `dxr` [rows, hidden] (a part of the norm output's gradient:
/// rounded once that is complete, by the caller). `k` as above, with
/// activationBackward.
template <class P>
void moeExpertsBackwardInput(const P &k, const MoeShape &s, const MoeSaved &m,
                             const MoeParams<const float> &p,
                             const std::vector<int64_t> &off, float *dact,
                             float *dxr) {
  const int64_t Hd = s.hidden;
  for (int64_t e = 0; e < s.experts; ++e) {
    int64_t r0 = off[e], n = off[e + 1] - off[e];
    if (n == 0)
      continue;
    k.linearBackwardInput(n, s.ffn, Hd, m.dyr + r0 * Hd, p.w2(s, e),
                          dact + r0 * s.ffn);
    k.round(dact + r0 * s.ffn, n * s.ffn);
    k.activationBackward(s.act, n, s.ffn, m.h1 + r0 * s.fc1Width(),
                         dact + r0 * s.ffn, m.dh1 + r0 * s.fc1Width());
    k.round(m.dh1 + r0 * s.fc1Width(), n * s.fc1Width());
    k.linearBackwardInput(n, Hd, s.fc1Width(), m.dh1 + r0 * s.fc1Width(),
                          p.w1(s, e), dxr + r0 * Hd);
  }
}

/// Every expert's two weight gradients over the rows routed to it: `off`
/// holds the experts' first rows (expertOffsets), `k` the target's
/// primitive set.
template <class P>
void moeExpertWeightGradients(const P &k, const MoeShape &s, const MoeSaved &m,
                              const std::vector<int64_t> &off, float *grads) {
  const int64_t Hd = s.hidden;
  MoeParams<float> gp = moeParams(s, grads);
  for (int64_t e = 0; e < s.experts; ++e) {
    int64_t r0 = off[e], n = off[e + 1] - off[e];
    if (n == 0)
      continue;
    k.linearBackwardWeight(n, Hd, s.fc1Width(), m.dh1 + r0 * s.fc1Width(),
                           m.xr + r0 * Hd, gp.w1(s, e));
    k.linearBackwardWeight(n, s.ffn, Hd, m.dyr + r0 * Hd, m.act + r0 * s.ffn,
                           gp.w2(s, e));
  }
}

/// The MoE layer as the stage interpreter runs it: the target's routed
/// layer kernels, which call the experts' recipes above.
template <class P> struct Moe {
  /// The target's primitives, in the call's precision.
  const P &k;

  /// Returns the layer's load-balancing loss (already times its
  /// coefficient); a NaN or infinite router logit is recorded in `check`.
  template <class Tokens>
  float forward(const MoeShape &s, const Tokens &t, const float *params,
                const float *x, float *y, const SavedBases &saved, float *ws,
                RouterCheck *check) const {
    return k.moeForward(s, t, params, x, y, saved, ws, check);
  }

  /// Selective recompute: the tensors of the modules `saved` drops,
  /// computed again from the kept ones exactly as the forward computed
  /// them (the normed input from x; every routed row's activation from its
  /// fc1 output: elementwise, so one call over all rows equals the
  /// experts' calls one by one). The moe module runs the layer's forward
  /// again from its kept input, copied to `x` first, into `y` (dropped),
  /// its load-balancing loss dropped too.
  template <class Tokens>
  void recompute(const MoeShape &s, const Tokens &t, const float *params,
                 const SavedBases &saved, float *x, float *y, float *ws,
                 RouterCheck *check) const {
    const int64_t T = t.tokens(), R = T * s.topk;
    MoeSaved m = moeSaved(s, k.shape(t), saved);
    if (saved.drops(RecomputeModule::Moe)) {
      k.copy(x, m.x, T * s.hidden);
      (void)forward(s, t, params, x, y, saved, ws, check);
      return;
    }
    if (saved.drops(RecomputeModule::LayerNorm))
      preNorm(k, T, s.hidden, m.x, moeParams(s, params).norm, m.xn, m.rstd);
    if (saved.drops(RecomputeModule::MoeAct)) {
      k.activationForward(s.act, R, s.ffn, m.h1, m.act);
      k.round(m.act, R * s.ffn);
    }
  }

  /// `lossScale` is d(objective)/d(aux loss).
  template <class Tokens>
  void backwardInput(const MoeShape &s, const Tokens &t, const float *params,
                     float *grads, const SavedBases &saved, const float *dy,
                     float *dx, float *ws, float lossScale) const {
    k.moeBackwardInput(s, t, params, grads, saved, dy, dx, ws, lossScale);
  }

  template <class Tokens>
  void backwardWeight(const MoeShape &s, const Tokens &t,
                      const SavedBases &saved, float *grads) const {
    k.moeBackwardWeight(s, t, saved, grads);
  }
};

} // namespace hypipe::rt::recipes

#endif
