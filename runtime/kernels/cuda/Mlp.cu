//===- Mlp.cu - the dense MLP on the GPU ----------------------------------===//
//
// The recipe of runtime/kernels/recipes/Mlp.h over the CUDA primitives
// (cuBLAS GEMMs), with the CPU kernel's saved layout.
//
//===----------------------------------------------------------------------===//

#include "runtime/kernels/ForwardTo.h"
#include "runtime/kernels/cuda/Primitives.cuh"
#include "runtime/kernels/recipes/Mlp.h"

namespace hypipe::rt::cuda {
namespace {

struct CudaPrimitives : RecipeBasics {
  HYPIPE_MLP_PRIMITIVES(HYPIPE_FORWARD_TO, cuda)
};

using Recipe = recipes::Mlp<CudaPrimitives>;

} // namespace

void mlpForward(const MlpShape &s, const Tokens &t, const float *params,
                const float *x, float *y, float *saved, float *) {
  Recipe::forward(s, t, params, x, y, saved);
}

void mlpBackwardInput(const MlpShape &s, const Tokens &t, const float *params,
                      float *grads, float *saved, const float *dy, float *dx,
                      float *ws) {
  Recipe::backwardInput(s, t, params, grads, saved, dy, dx, ws);
}

void mlpBackwardWeight(const MlpShape &s, const Tokens &t, const float *saved,
                       float *grads) {
  Recipe::backwardWeight(s, t, saved, grads);
}

} // namespace hypipe::rt::cuda
