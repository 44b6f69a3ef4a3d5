//===- Primitives.cuh - CUDA building blocks of the layer kernels ---------===//
//
// Row-major float tensors on the device. GEMMs go to cuBLAS (fp32, no TF32:
// the checking precision); norms, activations and the residual add are
// single-pass kernels here. Everything runs on the stream of context().
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_CUDA_PRIMITIVES_CUH
#define HYPIPE_RUNTIME_KERNELS_CUDA_PRIMITIVES_CUH

#include "runtime/kernels/cuda/Context.h"
#include "runtime/kernels/cuda/Layers.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace hypipe::rt::cuda {

/// Throws CudaError naming `what` when `status` is an error.
void check(cudaError_t status, const char *what);
void check(cublasStatus_t status, const char *what);
/// Checks the last launch.
inline void launched(const char *what) { check(cudaGetLastError(), what); }

cudaStream_t stream();
cublasHandle_t blas();

inline unsigned blocksFor(int64_t n, int threads = 256) {
  return unsigned((n + threads - 1) / threads);
}

/// Where each row's sequence starts, on the device: packed (cu) or
/// fixed-length (seq) microbatches.
struct Seqs {
  const int32_t *cu;
  int numSeqs;
  int seq;
  /// The sequence `row` belongs to.
  __device__ int sequenceOf(int row) const {
    if (!cu)
      return row / seq;
    int lo = 0, hi = numSeqs - 1;
    while (lo < hi) {
      int mid = (lo + hi + 1) / 2;
      if (cu[mid] <= row)
        lo = mid;
      else
        hi = mid - 1;
    }
    return lo;
  }
  __device__ int firstRow(int row) const {
    return cu ? cu[sequenceOf(row)] : row - row % seq;
  }
  /// The row `shift` places ahead of `row` in its sequence, or -1 past the
  /// sequence's end (cpu::rowsAhead): where an MTP depth reads its tokens
  /// and labels.
  __device__ int rowAhead(int row, int shift) const {
    const int end = cu ? cu[sequenceOf(row) + 1] : row - row % seq + seq;
    return row + shift < end ? row + shift : -1;
  }
  /// First row and length of sequence i.
  __device__ int start(int i) const { return cu ? cu[i] : i * seq; }
  __device__ int length(int i) const { return cu ? cu[i + 1] - cu[i] : seq; }
};

inline Seqs seqsOf(const Tokens &t) {
  return {t.cuSeqlens, int(t.shape.numSeqs), int(t.shape.seq)};
}

/// Sum of `v` over the block (blockDim.x a multiple of 32, at most 1024);
/// every thread gets it. Safe to call repeatedly.
__device__ inline float blockSum(float v) {
  __shared__ float partial[32];
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if (threadIdx.x % 32 == 0)
    partial[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0;
  for (int w = 0; w < int(blockDim.x / 32); ++w)
    total += partial[w];
  return total;
}

__device__ inline float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ inline float siluf(float x) { return x * sigmoidf(x); }
__device__ inline float siluGradf(float x) {
  float s = sigmoidf(x);
  return s * (1.0f + x * (1.0f - s));
}
__device__ inline float softplusf(float x) {
  return x > 20.0f ? x : log1pf(expf(x));
}

/// bf16 activations (docs/precision.md), as cpu::setBf16Activations: the
/// same float buffers holding bf16 values, each complete activation and
/// activation gradient rounded in place at the CPU kernels' points, so that
/// the two targets agree up to the order of sums; and the linear layers'
/// GEMMs on the tensor cores (bf16 products, fp32 accumulation: exact on
/// bf16 values). Host state, set by the stage runner before each pass.
/// (setBf16Activations and roundCopy: Layers.h.)
bool bf16Activations();
/// Rounds n floats in place to the nearest bfloat16 when bf16Activations().
void roundActivations(float *p, int64_t n);

/// C[M,N] = alpha op(A) op(B) + beta C, row-major.
void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
          float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
          float beta, float *C, int64_t ldc);
/// y[T,out] = x[T,in] W[out,in]^T.
void linearForward(int64_t T, int64_t in, int64_t out, const float *x,
                   const float *W, float *y);
/// dx[T,in] (+)= dy[T,out] W[out,in].
void linearBackwardInput(int64_t T, int64_t in, int64_t out, const float *dy,
                         const float *W, float *dx, bool accumulate = false);
/// dW[out,in] += dy[T,out]^T x[T,in].
void linearBackwardWeight(int64_t T, int64_t in, int64_t out, const float *dy,
                          const float *x, float *dW);

/// y = x / rms(x) * w per row of n columns; keeps rstd [T].
void rmsnormForward(int64_t T, int64_t n, const float *x, const float *w,
                    float *y, float *rstd);
/// dx (+)= d/dx (the residual fused with `accumulate`), dw += d/dw.
void rmsnormBackward(int64_t T, int64_t n, const float *x, const float *w,
                     const float *rstd, const float *dy, float *dx, float *dw,
                     bool accumulate);

void activationForward(Activation act, int64_t T, int64_t ffn, const float *h,
                       float *a);
void activationBackward(Activation act, int64_t T, int64_t ffn, const float *h,
                        const float *da, float *dh);

/// y += x over n floats.
void addInPlace(float *y, const float *x, int64_t n);
/// Sets n floats to zero.
void zero(float *x, int64_t n);
/// Reads one float back (synchronises the stream).
float readBack(const float *x);

/// y[i] = table[ids[i]] for T rows of n floats (an embedding lookup).
void gatherRows(int64_t T, int64_t n, const float *table, const int32_t *ids,
                float *y);
/// grads[ids[i]] += dy[i] for T rows of n floats (an embedding's gradient;
/// atomics, so rows of one id add in no fixed order).
void scatterAddRows(int64_t T, int64_t n, const int32_t *ids, const float *dy,
                    float *grads);

/// dst[c] += sum over rows r of a[r * lda + c] * (b ? b[r * ldb + c] : 1) *
/// (scale ? scale[r * scaleStride] : 1), for c < n: deterministic column
/// reductions (norm weights, biases).
void columnDot(int64_t T, int64_t n, const float *a, int64_t lda,
               const float *b, int64_t ldb, const float *scale,
               int64_t scaleStride, float *dst);

} // namespace hypipe::rt::cuda

#endif
