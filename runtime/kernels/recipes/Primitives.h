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

} // namespace hypipe::rt::recipes

#endif
