//===- Linear.h - the linear layer's three products, written once ---------===//
//
// Megatron's layout: W is [out, in], y = x W^T over T rows. The forward,
// the input gradient (accumulated into dx or not) and the weight gradient
// (accumulated into dW) as GEMMs of a target's `gemm(transA, transB, M, N,
// K, alpha, A, lda, B, ldb, beta, C, ldc)` (row-major): OpenBLAS tiles on
// the CPU, cuBLAS on the GPU.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_RECIPES_LINEAR_H
#define HYPIPE_RUNTIME_KERNELS_RECIPES_LINEAR_H

#include <cstdint>

namespace hypipe::rt::recipes {

template <class Gemm>
void linearForward(Gemm gemm, int64_t T, int64_t in, int64_t out,
                   const float *x, const float *W, float *y) {
  gemm(false, true, T, out, in, 1.0f, x, in, W, in, 0.0f, y, out);
}

template <class Gemm>
void linearBackwardInput(Gemm gemm, int64_t T, int64_t in, int64_t out,
                         const float *dy, const float *W, float *dx,
                         bool accumulate) {
  gemm(false, false, T, in, out, 1.0f, dy, out, W, in, accumulate ? 1.0f : 0.0f,
       dx, in);
}

/// Nothing to add for a call without rows.
template <class Gemm>
void linearBackwardWeight(Gemm gemm, int64_t T, int64_t in, int64_t out,
                          const float *dy, const float *x, float *dW) {
  if (T == 0)
    return;
  gemm(true, false, out, in, T, 1.0f, dy, out, x, in, 1.0f, dW, in);
}

} // namespace hypipe::rt::recipes

#endif
