//===- Mlp.h - the dense MLP, written once over a target's primitives -----===//
//
// One recipe for both targets: RMSNorm, fc1, the activation, fc2 and the
// residual forward; the input gradient through fc2, the activation, fc1 and
// the norm; the two weight GEMMs. `P` is a target's primitive set
// (cpu/Kernels.h, cuda/Kernels.h): the
// linear, norm and activation kernels of its Primitives header under their
// own names, plus `copy(dst, src, n)`, `addInto(y, x, n)` (y += x),
// `round(p, n)` (a complete activation or activation gradient to the
// call's precision: docs/precision.md's rounding points, nothing in fp32) and
// `shape(tokens)` (the call's host token shape). The saved layout is
// BufferLayouts.h's, so both targets keep the same tensors.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_RECIPES_MLP_H
#define HYPIPE_RUNTIME_KERNELS_RECIPES_MLP_H

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/recipes/Primitives.h"

/// The primitives the recipe calls: a target's struct forwards them with
/// `HYPIPE_MLP_PRIMITIVES(ns)`.
#define HYPIPE_MLP_PRIMITIVES(ns)                                              \
  HYPIPE_LINEAR_NORM_PRIMITIVES(ns)                                            \
  HYPIPE_FORWARD_TO(ns, activationForward)                                     \
  HYPIPE_FORWARD_TO(ns, activationBackward)

namespace hypipe::rt::recipes {

template <class P> struct Mlp {
  /// The target's primitives, in the call's precision.
  const P &k;
  /// The call's tensor-parallel collectives (null: the layer is whole).
  /// Split, fc1 is column-parallel and fc2 row-parallel: the output's and
  /// the input gradient's partial sums are summed over the group.
  TensorParallelCalls *tp = nullptr;

  template <class Tokens>
  void forward(const MlpShape &s, const Tokens &t, const float *params,
               const float *x, float *y, const SavedBases &saved,
               float *) const {
    const int64_t T = t.tokens();
    const float *norm = params, *w1 = norm + s.hidden,
                *w2 = w1 + s.fc1Width() * s.hidden;
    MlpSaved m = mlpSaved(s, k.shape(t), saved);
    const SequenceShard q = sequenceShard(tp, T);
    k.copy(m.x, x, q.local * s.hidden);
    normedInput(k, tp, q, s.hidden, x, norm, m.xn, m.rstd);
    up(s, T, w1, m);
    k.linearForward(T, s.ffn, s.hidden, m.act, w2, y);
    residualOutput(k, tp, q, s.hidden, x, y);
  }

  /// Selective recompute: the tensors of the modules `saved` drops,
  /// computed again from the kept ones exactly as the forward computed
  /// them (the normed input from x; fc1's output and the activation from
  /// the normed input).
  template <class Tokens>
  void recompute(const MlpShape &s, const Tokens &t, const float *params,
                 const SavedBases &saved) const {
    const int64_t T = t.tokens();
    const float *norm = params, *w1 = norm + s.hidden;
    MlpSaved m = mlpSaved(s, k.shape(t), saved);
    if (saved.drops(RecomputeModule::LayerNorm))
      normedInput(k, tp, sequenceShard(tp, T), s.hidden, m.x, norm, m.xn,
                  m.rstd);
    if (saved.drops(RecomputeModule::Mlp))
      up(s, T, w1, m);
  }

private:
  /// fc1 and the activation, from the normed input: each output rounded
  /// to the call's precision once complete.
  void up(const MlpShape &s, int64_t T, const float *w1,
          const MlpSaved &m) const {
    k.linearForward(T, s.hidden, s.fc1Width(), m.xn, w1, m.h1);
    k.round(m.h1, T * s.fc1Width());
    k.activationForward(s.act, T, s.ffn, m.h1, m.act);
    k.round(m.act, T * s.ffn);
  }

public:
  template <class Tokens>
  void backwardInput(const MlpShape &s, const Tokens &t, const float *params,
                     float *grads, const SavedBases &saved, const float *dy,
                     float *dx, float *ws) const {
    const int64_t T = t.tokens();
    const float *norm = params, *w1 = norm + s.hidden,
                *w2 = w1 + s.fc1Width() * s.hidden;
    MlpSaved m = mlpSaved(s, k.shape(t), saved);
    float *dact = ws, *dxn = dact + T * s.ffn;
    const SequenceShard q = sequenceShard(tp, T);
    wholeGradient(k, tp, q, s.hidden, dy, m.dout);
    k.linearBackwardInput(T, s.ffn, s.hidden, m.dout, w2, dact);
    k.round(dact, T * s.ffn);
    k.activationBackward(s.act, T, s.ffn, m.h1, dact, m.dh1);
    k.round(m.dh1, T * s.fc1Width());
    k.linearBackwardInput(T, s.hidden, s.fc1Width(), m.dh1, w1, dxn);
    preNormBackward(k, tp, q, s.hidden, m.x, norm, m.rstd, dxn, dy, dx, grads);
  }

  template <class Tokens>
  void backwardWeight(const MlpShape &s, const Tokens &t,
                      const SavedBases &saved, float *grads) const {
    const int64_t T = t.tokens();
    MlpSaved m = mlpSaved(s, k.shape(t), saved);
    float *g1 = grads + s.hidden, *g2 = g1 + s.fc1Width() * s.hidden;
    k.linearBackwardWeight(T, s.hidden, s.fc1Width(), m.dh1, m.xn, g1);
    k.linearBackwardWeight(T, s.ffn, s.hidden, m.dout, m.act, g2);
  }
};

} // namespace hypipe::rt::recipes

#endif
