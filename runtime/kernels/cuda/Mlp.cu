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
  HYPIPE_MLP_PRIMITIVES(cuda)
};

using Recipe = recipes::Mlp<CudaPrimitives>;

} // namespace

void mlpForward(DType activations, const MlpShape &s, const Tokens &t,
                const float *params, const float *x, float *y, float *saved,
                float *) {
  Recipe{CudaPrimitives{{activations}}}.forward(s, t, params, x, y, saved);
}

void mlpBackwardInput(DType activations, const MlpShape &s, const Tokens &t,
                      const float *params, float *grads, float *saved,
                      const float *dy, float *dx, float *ws) {
  Recipe{CudaPrimitives{{activations}}}.backwardInput(s, t, params, grads,
                                                      saved, dy, dx, ws);
}

void mlpBackwardWeight(DType activations, const MlpShape &s, const Tokens &t,
                       const float *saved, float *grads) {
  Recipe{CudaPrimitives{{activations}}}.backwardWeight(s, t, saved, grads);
}

} // namespace hypipe::rt::cuda
