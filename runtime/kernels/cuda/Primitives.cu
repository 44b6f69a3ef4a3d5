//===- Primitives.cu - context, GEMM, norms and activations on the GPU ----===//

#include "runtime/kernels/cuda/Primitives.cuh"

#include "runtime/kernels/recipes/Linear.h"
#include <cuda_bf16.h>

#include <cstdlib>
#include <string>

namespace hypipe::rt::cuda {
namespace {

struct Context {
  bool open = false;
  int ordinal = -1;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
};

Context &ctx() {
  static Context c;
  return c;
}

} // namespace

void check(cudaError_t status, const char *what) {
  if (status != cudaSuccess)
    throw CudaError(std::string("error: CUDA: ") + what + ": " +
                    cudaGetErrorString(status));
}

void check(cublasStatus_t status, const char *what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw CudaError(std::string("error: cuBLAS: ") + what + ": " +
                    cublasGetStatusString(status));
}

namespace {
bool syncEveryLaunch() {
  static const bool on = [] {
    const char *v = std::getenv("HYPIPE_CUDA_SYNC");
    return v && *v && std::string(v) != "0";
  }();
  return on;
}

/// Under HYPIPE_CUDA_SYNC: waits for the work just queued and names it.
void waitFor(const char *what) {
  if (syncEveryLaunch())
    check(cudaStreamSynchronize(stream()),
          (std::string(what) + " (HYPIPE_CUDA_SYNC: failed in this call)")
              .c_str());
}
} // namespace

void launched(const char *what) {
  check(cudaGetLastError(), what);
  waitFor(what);
}

int deviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

DeviceInfo open(int ordinal) {
  int n = 0;
  cudaError_t status = cudaGetDeviceCount(&n);
  if (status != cudaSuccess || n == 0)
    throw CudaError(
        std::string("error: this artifact runs on a CUDA GPU, and this "
                    "machine has none (") +
        (status != cudaSuccess ? cudaGetErrorString(status)
                               : "no device visible") +
        ")\nhelp: run it on a GPU node, or compile the spec with --target "
        "cpu");
  if (ordinal >= n)
    throw CudaError("error: local rank " + std::to_string(ordinal) +
                    " needs GPU " + std::to_string(ordinal) + ", but " +
                    std::to_string(n) +
                    " are visible\nhelp: launch at most one rank per GPU "
                    "(check CUDA_VISIBLE_DEVICES)");
  Context &c = ctx();
  if (!c.open) {
    check(cudaSetDevice(ordinal), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking),
          "cudaStreamCreate");
    check(cublasCreate(&c.blas), "cublasCreate");
    check(cublasSetStream(c.blas, c.stream), "cublasSetStream");
    // fp32 means fp32: no TF32 tensor-core rounding in the checking mode.
    check(cublasSetMathMode(c.blas, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");
    c.ordinal = ordinal;
    c.open = true;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, c.ordinal), "cudaGetDeviceProperties");
  DeviceInfo info;
  info.ordinal = c.ordinal;
  info.name = prop.name;
  info.major = prop.major;
  info.minor = prop.minor;
  size_t freeBytes = 0, totalBytes = 0;
  check(cudaMemGetInfo(&freeBytes, &totalBytes), "cudaMemGetInfo");
  info.freeBytes = int64_t(freeBytes);
  info.totalBytes = int64_t(totalBytes);
  return info;
}

void synchronize() { check(cudaStreamSynchronize(stream()), "synchronize"); }

cudaStream_t stream() {
  if (!ctx().open)
    open(0);
  return ctx().stream;
}

void *streamHandle() { return stream(); }

void *createStream() {
  cudaStream_t s = nullptr;
  stream(); // the device open() selected
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
        "cudaStreamCreate");
  return s;
}

void destroyStream(void *s) { cudaStreamDestroy(static_cast<cudaStream_t>(s)); }

void *createEvent() {
  cudaEvent_t e = nullptr;
  check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
        "cudaEventCreate");
  return e;
}

void destroyEvent(void *e) { cudaEventDestroy(static_cast<cudaEvent_t>(e)); }

void recordEvent(void *e, void *s) {
  check(cudaEventRecord(static_cast<cudaEvent_t>(e),
                        static_cast<cudaStream_t>(s)),
        "cudaEventRecord");
}

void streamWaitEvent(void *s, void *e) {
  check(cudaStreamWaitEvent(static_cast<cudaStream_t>(s),
                            static_cast<cudaEvent_t>(e), 0),
        "cudaStreamWaitEvent");
}

bool eventDone(void *e) {
  const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(e));
  if (status == cudaErrorNotReady)
    return false;
  check(status, "a transfer on the GPU");
  return true;
}

cublasHandle_t blas() {
  if (!ctx().open)
    open(0);
  return ctx().blas;
}

void copyFloats(float *dst, const float *src, int64_t floats) {
  check(cudaMemcpyAsync(dst, src, sizeof(float) * floats,
                        cudaMemcpyDeviceToDevice, stream()),
        "copy");
}

void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
          float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
          float beta, float *C, int64_t ldc) {
  if (M == 0 || N == 0)
    return;
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T.
  check(cublasSgemm(blas(), transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                    transA ? CUBLAS_OP_T : CUBLAS_OP_N, int(N), int(M), int(K),
                    &alpha, B, int(ldb), A, int(lda), &beta, C, int(ldc)),
        "sgemm");
  waitFor("sgemm");
}

namespace {

__global__ void roundKernel(int64_t n, const float *src, float *dst) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    dst[i] = __bfloat162float(__float2bfloat16_rn(src[i]));
}

/// A linear layer's GEMM: sgemm in fp32; in bf16 the tensor cores, fed the
/// fp32 operands (whose values are bf16, so the down-conversion is exact)
/// and accumulating in fp32 into C (CUBLAS_COMPUTE_32F_FAST_16BF). The
/// handle's pedantic mode, which keeps fp32 GEMMs off TF32, is lifted for
/// the call. Bound to the call's precision by `linearGemm(activations)`.
void bf16Gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
              float alpha, const float *A, int64_t lda, const float *B,
              int64_t ldb, float beta, float *C, int64_t ldc) {
  if (M == 0 || N == 0)
    return;
  check(cublasSetMathMode(blas(), CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  const cublasStatus_t status = cublasGemmEx(
      blas(), transB ? CUBLAS_OP_T : CUBLAS_OP_N,
      transA ? CUBLAS_OP_T : CUBLAS_OP_N, int(N), int(M), int(K), &alpha, B,
      CUDA_R_32F, int(ldb), A, CUDA_R_32F, int(lda), &beta, C, CUDA_R_32F,
      int(ldc), CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT);
  check(cublasSetMathMode(blas(), CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");
  check(status, "bf16 gemm");
  waitFor("bf16 gemm");
}

using Gemm = void (*)(bool, bool, int64_t, int64_t, int64_t, float,
                      const float *, int64_t, const float *, int64_t, float,
                      float *, int64_t);

Gemm linearGemm(DType activations) {
  return activations == DType::BF16 ? bf16Gemm : gemm;
}

} // namespace

void roundActivations(DType activations, float *p, int64_t n) {
  if (activations == DType::BF16 && n > 0)
    roundCopy(p, p, n);
}

void roundCopy(float *dst, const float *src, int64_t n) {
  if (n <= 0)
    return;
  roundKernel<<<blocksFor(n), 256, 0, stream()>>>(n, src, dst);
  launched("round to bf16");
}

void linearForward(DType activations, int64_t T, int64_t in, int64_t out,
                   const float *x, const float *W, float *y) {
  recipes::linearForward(linearGemm(activations), T, in, out, x, W, y);
}

void linearBackwardInput(DType activations, int64_t T, int64_t in, int64_t out,
                         const float *dy, const float *W, float *dx,
                         bool accumulate) {
  recipes::linearBackwardInput(linearGemm(activations), T, in, out, dy, W, dx,
                               accumulate);
}

void linearBackwardWeight(DType activations, int64_t T, int64_t in, int64_t out,
                          const float *dy, const float *x, float *dW) {
  recipes::linearBackwardWeight(linearGemm(activations), T, in, out, dy, x, dW);
}

namespace {

__global__ void rmsnormForwardKernel(int n, const float *x, const float *w,
                                     float *y, float *rstd) {
  const int64_t row = blockIdx.x;
  const float *xr = x + row * n;
  float ss = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    ss += xr[i] * xr[i];
  ss = blockSum(ss);
  float r = rsqrtf(ss / float(n) + kNormEps);
  if (threadIdx.x == 0)
    rstd[row] = r;
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    y[row * n + i] = xr[i] * r * w[i];
}

__global__ void rmsnormBackwardKernel(int n, const float *x, const float *w,
                                      const float *rstd, const float *dy,
                                      float *dx, bool accumulate) {
  const int64_t row = blockIdx.x;
  const float *xr = x + row * n, *dyr = dy + row * n;
  float r = rstd[row];
  float dot = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    dot += w[i] * dyr[i] * xr[i];
  dot = blockSum(dot);
  float c = dot / float(n) * r * r;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    float g = r * (w[i] * dyr[i] - xr[i] * c);
    dx[row * n + i] = accumulate ? dx[row * n + i] + g : g;
  }
}

/// 32 columns per block, 8 row lanes; lanes reduced in a fixed order.
__global__ void columnDotKernel(int64_t T, int64_t n, const float *a,
                                int64_t lda, const float *b, int64_t ldb,
                                const float *scale, int64_t scaleStride,
                                float *dst) {
  __shared__ float part[8][33];
  const int64_t c = int64_t(blockIdx.x) * 32 + threadIdx.x;
  float acc = 0;
  if (c < n)
    for (int64_t r = threadIdx.y; r < T; r += 8) {
      float v = b ? a[r * lda + c] * b[r * ldb + c] : a[r * lda + c];
      acc += scale ? v * scale[r * scaleStride] : v;
    }
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < n) {
    float s = 0;
    for (int k = 0; k < 8; ++k)
      s += part[k][threadIdx.x];
    dst[c] += s;
  }
}

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

__global__ void activationForwardKernel(Activation act, int64_t T, int64_t ffn,
                                        const float *h, float *a) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= T * ffn)
    return;
  switch (act) {
  case Activation::SquaredRelu: {
    float r = fmaxf(h[i], 0.0f);
    a[i] = r * r;
    return;
  }
  case Activation::Gelu:
    a[i] = 0.5f * h[i] * (1.0f + erff(h[i] * kInvSqrt2));
    return;
  case Activation::Swiglu: {
    int64_t t = i / ffn, j = i % ffn;
    const float *g = h + t * 2 * ffn;
    a[i] = siluf(g[j]) * g[ffn + j];
    return;
  }
  }
}

__global__ void activationBackwardKernel(Activation act, int64_t T, int64_t ffn,
                                         const float *h, const float *da,
                                         float *dh) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= T * ffn)
    return;
  switch (act) {
  case Activation::SquaredRelu:
    dh[i] = 2.0f * fmaxf(h[i], 0.0f) * da[i];
    return;
  case Activation::Gelu: {
    float x = h[i];
    float cdf = 0.5f * (1.0f + erff(x * kInvSqrt2));
    float pdf = kInvSqrt2Pi * expf(-0.5f * x * x);
    dh[i] = (cdf + x * pdf) * da[i];
    return;
  }
  case Activation::Swiglu: {
    int64_t t = i / ffn, j = i % ffn;
    const float *g = h + t * 2 * ffn;
    float *dg = dh + t * 2 * ffn;
    dg[j] = da[i] * g[ffn + j] * siluGradf(g[j]);
    dg[ffn + j] = da[i] * siluf(g[j]);
    return;
  }
  }
}

__global__ void addKernel(float *y, const float *x, int64_t n) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] += x[i];
}

__global__ void gatherRowsKernel(int64_t n, const float *table,
                                 const int32_t *ids, float *y) {
  const int64_t row = blockIdx.x;
  const float *src = table + int64_t(ids[row]) * n;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
    y[row * n + j] = src[j];
}

__global__ void scatterAddRowsKernel(int64_t n, const int32_t *ids,
                                     const float *dy, float *grads) {
  const int64_t row = blockIdx.x;
  float *g = grads + int64_t(ids[row]) * n;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
    atomicAdd(g + j, dy[row * n + j]);
}

} // namespace

void rmsnormForward(int64_t T, int64_t n, const float *x, const float *w,
                    float *y, float *rstd) {
  if (T == 0)
    return;
  rmsnormForwardKernel<<<unsigned(T), 256, 0, stream()>>>(int(n), x, w, y,
                                                          rstd);
  launched("rmsnorm forward");
}

void rmsnormBackward(int64_t T, int64_t n, const float *x, const float *w,
                     const float *rstd, const float *dy, float *dx, float *dw,
                     bool accumulate) {
  if (T == 0)
    return;
  rmsnormBackwardKernel<<<unsigned(T), 256, 0, stream()>>>(int(n), x, w, rstd,
                                                           dy, dx, accumulate);
  launched("rmsnorm backward");
  columnDot(T, n, dy, n, x, n, rstd, 1, dw);
}

void columnDot(int64_t T, int64_t n, const float *a, int64_t lda,
               const float *b, int64_t ldb, const float *scale,
               int64_t scaleStride, float *dst) {
  if (T == 0 || n == 0)
    return;
  columnDotKernel<<<blocksFor(n, 32), dim3(32, 8), 0, stream()>>>(
      T, n, a, lda, b, ldb, scale, scaleStride, dst);
  launched("column reduction");
}

void activationForward(Activation act, int64_t T, int64_t ffn, const float *h,
                       float *a) {
  if (T * ffn == 0)
    return;
  activationForwardKernel<<<blocksFor(T * ffn), 256, 0, stream()>>>(act, T, ffn,
                                                                    h, a);
  launched("activation forward");
}

void activationBackward(Activation act, int64_t T, int64_t ffn, const float *h,
                        const float *da, float *dh) {
  if (T * ffn == 0)
    return;
  activationBackwardKernel<<<blocksFor(T * ffn), 256, 0, stream()>>>(
      act, T, ffn, h, da, dh);
  launched("activation backward");
}

void addInPlace(float *y, const float *x, int64_t n) {
  if (n == 0)
    return;
  addKernel<<<blocksFor(n), 256, 0, stream()>>>(y, x, n);
  launched("residual add");
}

void zero(float *x, int64_t n) {
  check(cudaMemsetAsync(x, 0, sizeof(float) * n, stream()), "memset");
}

void gatherRows(int64_t T, int64_t n, const float *table, const int32_t *ids,
                float *y) {
  if (T == 0)
    return;
  gatherRowsKernel<<<unsigned(T), 128, 0, stream()>>>(n, table, ids, y);
  launched("row gather");
}

void scatterAddRows(int64_t T, int64_t n, const int32_t *ids, const float *dy,
                    float *grads) {
  if (T == 0)
    return;
  scatterAddRowsKernel<<<unsigned(T), 128, 0, stream()>>>(n, ids, dy, grads);
  launched("row scatter-add");
}

GrowingBuffer::~GrowingBuffer() {
  if (base_)
    cudaFreeAsync(base_, stream());
}

void *GrowingBuffer::bytes(int64_t bytes, const char *what) {
  if (bytes > size_) {
    if (base_)
      check(cudaFreeAsync(base_, stream()), "cudaFreeAsync");
    base_ = nullptr;
    size_ = 0;
    check(cudaMallocAsync(&base_, size_t(bytes), stream()), what);
    size_ = bytes;
  }
  return base_;
}

float readBack(const float *x) {
  float v = 0;
  check(cudaMemcpyAsync(&v, x, sizeof(float), cudaMemcpyDeviceToHost, stream()),
        "read back");
  synchronize();
  return v;
}

} // namespace hypipe::rt::cuda
