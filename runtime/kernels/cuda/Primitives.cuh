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
#include "runtime/kernels/cuda/Kernels.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace hypipe::rt::cuda {

/// Throws CudaError naming `what` when `status` is an error.
void check(cudaError_t status, const char *what);
void check(cublasStatus_t status, const char *what);
/// Checks the last launch. With HYPIPE_CUDA_SYNC=1 in the environment it
/// also waits for the kernel, so that a kernel that fails is named at its own
/// launch rather than at the next synchronisation (a debug switch: the GPU
/// kit's `run.sh --sync`).
void launched(const char *what);

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

// roundActivations, gemm, the linear layer, RMSNorm, the activations and
// addInPlace: Kernels.h.

/// Sets n floats to zero.
void zero(float *x, int64_t n);

/// Reads one float back (synchronises the stream).
float readBack(const float *x);

/// A device buffer of at least the bytes last asked for, grown on demand and
/// stream-ordered: the old one is freed after the work queued on it, without
/// waiting. Freed (stream-ordered) with its owner.
class GrowingBuffer {
public:
  GrowingBuffer() = default;
  GrowingBuffer(const GrowingBuffer &) = delete;
  GrowingBuffer &operator=(const GrowingBuffer &) = delete;
  ~GrowingBuffer();
  /// The buffer, of at least `bytes`; `what` names it in an error.
  void *bytes(int64_t bytes, const char *what);

private:
  void *base_ = nullptr;
  int64_t size_ = 0;
};

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
