//===- Primitives.h - the kernels the layer recipes call by name ----------===//
//
// A layer recipe (Mlp.h, Attention.h, Mamba.h) takes its target as a struct
// of static functions: RecipeBasics from the target's Primitives header
// (token shape, copy, residual add, rounding), the recipe's own cores, and
// the target's linear and norm kernels under their own names, forwarded
// with `HYPIPE_LINEAR_NORM_PRIMITIVES(HYPIPE_FORWARD_TO, ns)`.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_RECIPES_PRIMITIVES_H
#define HYPIPE_RUNTIME_KERNELS_RECIPES_PRIMITIVES_H

#include "runtime/kernels/ForwardTo.h"

#define HYPIPE_LINEAR_NORM_PRIMITIVES(X, ns)                                   \
  X(ns, linearForward)                                                         \
  X(ns, linearBackwardInput)                                                   \
  X(ns, linearBackwardWeight)                                                  \
  X(ns, rmsnormForward)                                                        \
  X(ns, rmsnormBackward)

#endif
