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

#endif
