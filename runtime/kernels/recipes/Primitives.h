//===- Primitives.h - the kernels the layer recipes call by name ----------===//
//
// A layer recipe (Mlp.h, Attention.h, Mamba.h, Head.h, Moe.h) runs over an
// object of its target's primitive set: RecipeBasics from the target's
// Primitives header (token shape, copy, residual add, and the call's
// precision with the rounding to it), the recipe's own cores, and the
// target's linear and norm kernels under their own names, forwarded with
// `HYPIPE_LINEAR_NORM_PRIMITIVES(ns)`. The precision is a field of that
// object, so nothing global tells a kernel what it runs in.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_RECIPES_PRIMITIVES_H
#define HYPIPE_RUNTIME_KERNELS_RECIPES_PRIMITIVES_H

#include "runtime/kernels/ForwardTo.h"
#include "runtime/kernels/TensorParallelCalls.h"

#include <cstdint>

/// Function `name` of namespace `ns` as a member that passes the object's
/// `activations` (its precision) first.
#define HYPIPE_FORWARD_IN_PRECISION(ns, name)                                  \
  template <class... A> decltype(auto) name(A &&...a) const {                  \
    return ns::name(activations, std::forward<A>(a)...);                       \
  }

#define HYPIPE_LINEAR_NORM_PRIMITIVES(ns)                                      \
  HYPIPE_FORWARD_IN_PRECISION(ns, linearForward)                               \
  HYPIPE_FORWARD_IN_PRECISION(ns, linearBackwardInput)                         \
  HYPIPE_FORWARD_IN_PRECISION(ns, linearBackwardWeight)                        \
  HYPIPE_FORWARD_TO(ns, rmsnormForward)                                        \
  HYPIPE_FORWARD_TO(ns, rmsnormBackward)

namespace hypipe::rt::recipes {

/// A layer's input RMSNorm as its forward computes it, and selective
/// recompute computes it again: `x` [T, hidden] normed by `weight` into
/// `xn`, rounded to the call's precision, with each row's `rstd`.
template <class P>
void preNorm(const P &k, int64_t T, int64_t hidden, const float *x,
             const float *weight, float *xn, float *rstd) {
  k.rmsnormForward(T, hidden, x, weight, xn, rstd);
  k.round(xn, T * hidden);
}

/// The rows of a call a rank holds at its layer's input and output: all
/// `whole` rows, or with sequence parallelism its tp-th, `local` rows from
/// row `first` of the whole (the residual stream and the norms' rows).
struct SequenceShard {
  int64_t whole, local, first;
  bool split() const { return local != whole; }
};
inline SequenceShard sequenceShard(const TensorParallelCalls *tp, int64_t T) {
  if (!tp || !tp->sequenceParallel())
    return {T, T, 0};
  const int64_t local = T / tp->size();
  return {T, local, tp->rank() * local};
}

/// The layer's normed input, whole, in `xn` [T, hidden]: each rank norms
/// the rows it holds into their place, and with sequence parallelism the
/// group gathers them (`rstd` holds the rank's rows').
template <class P>
void normedInput(const P &k, TensorParallelCalls *tp, const SequenceShard &q,
                 int64_t hidden, const float *x, const float *weight, float *xn,
                 float *rstd) {
  preNorm(k, q.local, hidden, x, weight, xn + q.first * hidden, rstd);
  if (q.split())
    tensorParallel(tp, CollectiveKind::AllGather, xn, hidden);
}

/// A row-parallel linear's partial output [T, hidden] at `y` summed over
/// the group into the rows this rank holds, at `y`'s front: every row
/// (all-reduce) or with sequence parallelism its own (reduce-scatter).
template <class P>
void sumOutput(const P &k, TensorParallelCalls *tp, const SequenceShard &q,
               int64_t hidden, float *y) {
  if (!q.split()) {
    tensorParallel(tp, CollectiveKind::AllReduce, y, hidden);
    return;
  }
  tensorParallel(tp, CollectiveKind::ReduceScatter, y, hidden);
  if (q.first > 0)
    k.copy(y, y + q.first * hidden, q.local * hidden);
}

/// The output's gradient, whole, in `whole` [T, hidden]: this rank's rows
/// `dy` copied into their place and, with sequence parallelism, the others'
/// gathered.
template <class P>
void wholeGradient(const P &k, TensorParallelCalls *tp, const SequenceShard &q,
                   int64_t hidden, const float *dy, float *whole) {
  k.copy(whole + q.first * hidden, dy, q.local * hidden);
  if (q.split())
    tensorParallel(tp, CollectiveKind::AllGather, whole, hidden);
}

/// A layer's output: the row-parallel linear's partial output `y` summed
/// into the rows this rank holds (sumOutput), rounded to the call's
/// precision, plus the residual `x`, rounded again.
template <class P>
void residualOutput(const P &k, TensorParallelCalls *tp, const SequenceShard &q,
                    int64_t hidden, const float *x, float *y) {
  sumOutput(k, tp, q, hidden, y);
  k.round(y, q.local * hidden);
  k.addInto(y, x, q.local * hidden);
  k.round(y, q.local * hidden);
}

/// A column-parallel linear's partial input gradient [T, hidden] at `dxn`
/// summed over the group; returns where the rows this rank holds are.
inline float *sumInputGradient(TensorParallelCalls *tp, const SequenceShard &q,
                               int64_t hidden, float *dxn) {
  tensorParallel(
      tp, q.split() ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce,
      dxn, hidden);
  return dxn + q.first * hidden;
}

/// preNormBackward (below) from `mine`, the normed input's gradient of the rows
/// this rank holds, already complete.
template <class P>
void preNormBackwardRows(const P &k, const SequenceShard &q, int64_t hidden,
                         const float *x, const float *weight, const float *rstd,
                         float *mine, const float *dy, float *dx,
                         float *normGrad) {
  k.round(mine, q.local * hidden);
  k.copy(dx, dy, q.local * hidden);
  k.rmsnormBackward(q.local, hidden, x, weight, rstd, mine, dx, normGrad, true);
  k.round(dx, q.local * hidden);
}

/// The input's gradient through a layer's pre-norm with its residual: the
/// column-parallel linear's partial gradient of the normed input `dxn`
/// summed over the group (sumInputGradient), rounded, then dx = dy plus
/// the norm's backward over the rows this rank holds, the norm weight's
/// gradient added to `normGrad`; dx rounded.
template <class P>
void preNormBackward(const P &k, TensorParallelCalls *tp,
                     const SequenceShard &q, int64_t hidden, const float *x,
                     const float *weight, const float *rstd, float *dxn,
                     const float *dy, float *dx, float *normGrad) {
  preNormBackwardRows(k, q, hidden, x, weight, rstd,
                      sumInputGradient(tp, q, hidden, dxn), dy, dx, normGrad);
}

} // namespace hypipe::rt::recipes

#endif
