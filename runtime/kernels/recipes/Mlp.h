//===- Mlp.h - the dense MLP, written once over a target's primitives -----===//
//
// One recipe for both targets: RMSNorm, fc1, the activation, fc2 and the
// residual forward; the input gradient through fc2, the activation, fc1 and
// the norm; the two weight GEMMs. `P` is a target's primitive set (CPU:
// runtime/kernels/cpu/Mlp.cpp, CUDA: runtime/kernels/cuda/Mlp.cu): the
// linear, norm and activation kernels of its Primitives header under their
// own names, plus `copy(dst, src, n)`, `addInto(y, x, n)` (y += x),
// `round(p, n)` (a complete activation or activation gradient to the
// activation type: docs/precision.md's rounding points, nothing in fp32) and
// `shape(tokens)` (the call's host token shape). The saved layout is
// BufferLayouts.h's, so both targets keep the same tensors.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_RECIPES_MLP_H
#define HYPIPE_RUNTIME_KERNELS_RECIPES_MLP_H

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/recipes/Primitives.h"

/// The primitives the recipe calls: a target's struct forwards them with
/// `HYPIPE_MLP_PRIMITIVES(HYPIPE_FORWARD_TO, ns)` (ForwardTo.h).
#define HYPIPE_MLP_PRIMITIVES(X, ns)                                           \
  HYPIPE_LINEAR_NORM_PRIMITIVES(X, ns)                                         \
  X(ns, activationForward)                                                     \
  X(ns, activationBackward)

namespace hypipe::rt::recipes {

template <class P> struct Mlp {
  template <class Tokens>
  static void forward(const MlpShape &s, const Tokens &t, const float *params,
                      const float *x, float *y, float *saved) {
    const int64_t T = t.tokens();
    const float *norm = params, *w1 = norm + s.hidden,
                *w2 = w1 + s.fc1Width() * s.hidden;
    MlpSaved m = mlpSaved(s, P::shape(t), saved);
    P::copy(m.x, x, T * s.hidden);
    P::rmsnormForward(T, s.hidden, x, norm, m.xn, m.rstd);
    P::round(m.xn, T * s.hidden);
    P::linearForward(T, s.hidden, s.fc1Width(), m.xn, w1, m.h1);
    P::round(m.h1, T * s.fc1Width());
    P::activationForward(s.act, T, s.ffn, m.h1, m.act);
    P::round(m.act, T * s.ffn);
    P::linearForward(T, s.ffn, s.hidden, m.act, w2, y);
    P::round(y, T * s.hidden);
    P::addInto(y, x, T * s.hidden);
    P::round(y, T * s.hidden);
  }

  template <class Tokens>
  static void backwardInput(const MlpShape &s, const Tokens &t,
                            const float *params, float *grads, float *saved,
                            const float *dy, float *dx, float *ws) {
    const int64_t T = t.tokens();
    const float *norm = params, *w1 = norm + s.hidden,
                *w2 = w1 + s.fc1Width() * s.hidden;
    MlpSaved m = mlpSaved(s, P::shape(t), saved);
    float *dact = ws, *dxn = dact + T * s.ffn;
    P::copy(m.dout, dy, T * s.hidden);
    P::linearBackwardInput(T, s.ffn, s.hidden, dy, w2, dact);
    P::round(dact, T * s.ffn);
    P::activationBackward(s.act, T, s.ffn, m.h1, dact, m.dh1);
    P::round(m.dh1, T * s.fc1Width());
    P::linearBackwardInput(T, s.hidden, s.fc1Width(), m.dh1, w1, dxn);
    P::round(dxn, T * s.hidden);
    P::copy(dx, dy, T * s.hidden);
    P::rmsnormBackward(T, s.hidden, m.x, norm, m.rstd, dxn, dx, grads, true);
    P::round(dx, T * s.hidden);
  }

  template <class Tokens>
  static void backwardWeight(const MlpShape &s, const Tokens &t,
                             const float *saved, float *grads) {
    const int64_t T = t.tokens();
    MlpSaved m = mlpSaved(s, P::shape(t), const_cast<float *>(saved));
    float *g1 = grads + s.hidden, *g2 = g1 + s.fc1Width() * s.hidden;
    P::linearBackwardWeight(T, s.hidden, s.fc1Width(), m.dh1, m.xn, g1);
    P::linearBackwardWeight(T, s.ffn, s.hidden, m.dout, m.act, g2);
  }
};

} // namespace hypipe::rt::recipes

#endif
