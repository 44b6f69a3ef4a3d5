//===- Optimizer.h - AdamW and the gradient norm on the CPU ---------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_CPU_OPTIMIZER_H
#define HYPIPE_RUNTIME_KERNELS_CPU_OPTIMIZER_H

#include <algorithm>
#include <cstdint>

namespace hypipe::rt {

/// One AdamW update of a parameter (the trainer's fp32 state,
/// docs/runtime.md); the host and CUDA devices take the same.
struct AdamWStep {
  double lr, beta1, beta2, eps;
  double c1, c2;    ///< bias corrections 1 - beta^step
  float decay;      ///< 1 - lr * weight_decay, or 1
  double clipScale; ///< gradient clipping factor
};

namespace cpu {

/// w, m, v updated in place from g (n elements).
void adamwUpdate(const AdamWStep &s, float *w, const float *g, float *m,
                 float *v, int64_t n);

/// start + sum of x[i]^2, in the same order at any thread count.
double sumOfSquares(const float *x, int64_t n, double start);

} // namespace cpu
} // namespace hypipe::rt

#endif
