//===- Mlp.cpp - the dense MLP on the CPU ---------------------------------===//
//
// The recipe of runtime/kernels/recipes/Mlp.h over the CPU primitives.
//
//===----------------------------------------------------------------------===//

#include "runtime/kernels/recipes/Mlp.h"
#include "runtime/kernels/ForwardTo.h"
#include "runtime/kernels/cpu/Layers.h"
#include "runtime/kernels/cpu/Primitives.h"

#include <cstring>

namespace hypipe::rt::cpu {
namespace {

struct CpuPrimitives : RecipeBasics {
  HYPIPE_MLP_PRIMITIVES(cpu)
};

using Recipe = recipes::Mlp<CpuPrimitives>;

} // namespace

void mlpForward(DType activations, const MlpShape &s, const TokenShape &t,
                const float *params, const float *x, float *y, float *saved,
                float *) {
  Recipe{CpuPrimitives{{activations}}}.forward(s, t, params, x, y, saved);
}

void mlpBackwardInput(DType activations, const MlpShape &s, const TokenShape &t,
                      const float *params, float *grads, float *saved,
                      const float *dy, float *dx, float *ws) {
  Recipe{CpuPrimitives{{activations}}}.backwardInput(s, t, params, grads, saved,
                                                     dy, dx, ws);
}

void mlpBackwardWeight(DType activations, const MlpShape &s,
                       const TokenShape &t, const float *saved, float *grads) {
  Recipe{CpuPrimitives{{activations}}}.backwardWeight(s, t, saved, grads);
}

} // namespace hypipe::rt::cpu
