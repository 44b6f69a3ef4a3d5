//===- Primitives.h - CPU building blocks shared by the layer kernels -----===//
//
// Row-major float tensors. GEMMs go to OpenBLAS; the elementwise work around
// them (norms with the residual, activations with their gate) is fused into
// single passes here.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_CPU_PRIMITIVES_H
#define HYPIPE_RUNTIME_KERNELS_CPU_PRIMITIVES_H

#include "core/model/LayerShapes.h"

#include <cstdint>
#include <vector>

namespace hypipe::rt::cpu {

/// C[M,N] = alpha * op(A) * op(B) + beta * C, row-major (cblas_sgemm).
void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
          float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
          float beta, float *C, int64_t ldc);

/// y[T,out] = x[T,in] * W[out,in]^T.
void linearForward(int64_t T, int64_t in, int64_t out, const float *x,
                   const float *W, float *y);
/// dx[T,in] = dy[T,out] * W[out,in] (+ dx when `accumulate`).
void linearBackwardInput(int64_t T, int64_t in, int64_t out, const float *dy,
                         const float *W, float *dx, bool accumulate = false);
/// dW[out,in] += dy[T,out]^T * x[T,in].
void linearBackwardWeight(int64_t T, int64_t in, int64_t out, const float *dy,
                          const float *x, float *dW);

/// y = x / rms(x) * w over the `n` columns of each of `T` rows; keeps rstd.
void rmsnormForward(int64_t T, int64_t n, const float *x, const float *w,
                    float *y, float *rstd);
/// dx (+)= d/dx, dw += d/dw. With `accumulate`, dx already holds the
/// residual branch's gradient and this adds to it (the fused residual).
void rmsnormBackward(int64_t T, int64_t n, const float *x, const float *w,
                     const float *rstd, const float *dy, float *dx, float *dw,
                     bool accumulate);

/// a = act(h): h is [T, fc1Width], a is [T, ffn] (SwiGLU halves the width).
void activationForward(Activation act, int64_t T, int64_t ffn, const float *h,
                       float *a);
/// dh = d act(h) / dh * da.
void activationBackward(Activation act, int64_t T, int64_t ffn, const float *h,
                        const float *da, float *dh);

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline float silu(float x) { return x * sigmoid(x); }
inline float siluGrad(float x) {
  float s = sigmoid(x);
  return s * (1.0f + x * (1.0f - s));
}
inline float softplus(float x) {
  return x > 20.0f ? x : std::log1p(std::exp(x));
}

/// y[i] += x[i] for n floats (a residual connection), over the threads.
void addResidual(int64_t n, const float *x, float *y);

/// Number of threads the kernels' own loops use (OpenMP), also given to
/// OpenBLAS.
void setNumThreads(int threads);

/// First row of the sequence each of the t.tokens() rows belongs to.
std::vector<int64_t> sequenceStartOfRows(const TokenShape &t);
/// For each row, the row `shift` places ahead in the same sequence, or -1
/// past its end (Megatron's roll_tensor with its zero fill, per sample):
/// where an MTP depth reads its tokens and labels.
std::vector<int64_t> rowsAhead(const TokenShape &t, int64_t shift);
int numThreads();

} // namespace hypipe::rt::cpu

#endif
