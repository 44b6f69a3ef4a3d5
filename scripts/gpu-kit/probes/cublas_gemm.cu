//===- cublas_gemm.cu - cuBLAS GEMM throughput, the baseline --------------===//
//
// The GEMM rate hypipe's kernels are measured against, on the layout of
// hypipe's linear layers: row-major Y[M,N] = X[M,K] W[N,K]^T (column-major
// C^T = op_T(W) op_N(X), the call hypipe's gemm() makes). Two precisions:
//   bf16: cublasGemmEx, bf16 inputs and output, CUBLAS_COMPUTE_32F
//         (fp32 accumulation, tensor cores), default math mode;
//   fp32: cublasSgemm on a handle in CUBLAS_PEDANTIC_MATH (no TF32), the
//         call and mode of hypipe's own cuda target.
// Each shape runs at 8192x8192x8192 and at every MxNxK given. Repeats rotate
// over 2..8 sets of random inputs (at least 512 MiB of A and B in all) so
// that they are not served from L2. Before timing, one product per
// precision and shape is checked: the output starts as NaN and must have no
// NaN left, and 16 sampled entries must match a double-precision host dot
// product of the same (rounded) inputs within 1e-2 (bf16) or 1e-4 (fp32) of
// the larger of |value| and the root-sum-square of the products.
// Figures: `@figure gemm_<bf16|fp32>_<M>x<N>x<K> X TFLOP/s` (2MNK per
// product, median of 20 event-timed batches after 3 warm-ups).
// Usage: cublas_gemm [MxNxK ...]   e.g. cublas_gemm 4096x10304x2048
//
//===----------------------------------------------------------------------===//
#include "probe.cuh"

#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <cmath>
#include <string>

namespace {

void check(cublasStatus_t status, const char *call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    probe::fail(std::string(call) + ": " + cublasGetStatusName(status) + ": " +
                cublasGetStatusString(status));
}

#define PROBE_CUBLAS(call) check((call), #call)

struct Shape {
  int64_t M, N, K;
  std::string name() const {
    return std::to_string(M) + "x" + std::to_string(N) + "x" +
           std::to_string(K);
  }
};

Shape parseShape(const char *text) {
  long long m = 0, n = 0, k = 0;
  int used = 0;
  if (std::sscanf(text, "%lldx%lldx%lld%n", &m, &n, &k, &used) != 3 ||
      text[used] != '\0' || m <= 0 || n <= 0 || k <= 0 || m > INT32_MAX ||
      n > INT32_MAX || k > INT32_MAX)
    probe::fail(std::string("shape '") + text +
                "' is not MxNxK with positive sizes (e.g. 4096x10304x2048)");
  return {m, n, k};
}

__device__ float randomValue(uint64_t i, uint32_t seed) {
  // In (-1, 1) and never zero: an odd multiple of 2^-24.
  uint32_t bits = probe::patternWord(i, seed) >> 8;
  return (float(bits) + 0.5f) * (2.0f / 16777216.0f) - 1.0f;
}

__device__ void store(float *p, float v) { *p = v; }
__device__ void store(__nv_bfloat16 *p, float v) {
  *p = __float2bfloat16_rn(v);
}
__host__ __device__ float load(float v) { return v; }
__host__ __device__ float load(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class T>
__global__ void fillRandomKernel(T *x, uint64_t n, uint32_t seed) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n;
       i += uint64_t(gridDim.x) * blockDim.x)
    store(x + i, randomValue(i, seed));
}

template <class T>
__global__ void countNanKernel(const T *x, uint64_t n,
                               unsigned long long *nans) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n;
       i += uint64_t(gridDim.x) * blockDim.x)
    if (isnan(load(x[i])))
      atomicAdd(nans, 1ull);
}

template <class T> struct Precision;
template <> struct Precision<__nv_bfloat16> {
  static constexpr const char *name = "bf16";
  static constexpr double tolerance = 1e-2;
};
template <> struct Precision<float> {
  static constexpr const char *name = "fp32";
  static constexpr double tolerance = 1e-4;
};

struct Handles {
  cudaStream_t stream;
  cublasHandle_t tensorCore; // default math
  cublasHandle_t pedantic;   // CUBLAS_PEDANTIC_MATH, as hypipe's runtime
};

/// C = X W^T on one input set, row-major, as hypipe's linearForward.
void gemm(const Handles &h, const Shape &s, const __nv_bfloat16 *X,
          const __nv_bfloat16 *W, __nv_bfloat16 *Y) {
  const float one = 1.0f, zero = 0.0f;
  PROBE_CUBLAS(cublasGemmEx(h.tensorCore, CUBLAS_OP_T, CUBLAS_OP_N, int(s.N),
                            int(s.M), int(s.K), &one, W, CUDA_R_16BF, int(s.K),
                            X, CUDA_R_16BF, int(s.K), &zero, Y, CUDA_R_16BF,
                            int(s.N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void gemm(const Handles &h, const Shape &s, const float *X, const float *W,
          float *Y) {
  const float one = 1.0f, zero = 0.0f;
  PROBE_CUBLAS(cublasSgemm(h.pedantic, CUBLAS_OP_T, CUBLAS_OP_N, int(s.N),
                           int(s.M), int(s.K), &one, W, int(s.K), X, int(s.K),
                           &zero, Y, int(s.N)));
}

template <class T> T *deviceArray(uint64_t n) {
  T *p = nullptr;
  PROBE_CUDA(cudaMalloc(&p, n * sizeof(T)));
  return p;
}

template <class T> std::vector<T> download(const T *p, uint64_t n) {
  std::vector<T> host(n);
  PROBE_CUDA(cudaMemcpy(host.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

/// Checks one product: every output written, sampled entries right.
template <class T>
void checkProduct(const Handles &h, const Shape &s, const T *X, const T *W,
                  T *Y) {
  const uint64_t outputs = uint64_t(s.M) * s.N;
  PROBE_CUDA(cudaMemsetAsync(Y, 0xff, outputs * sizeof(T), h.stream));
  gemm(h, s, X, W, Y);
  unsigned long long *nans = deviceArray<unsigned long long>(1);
  PROBE_CUDA(cudaMemsetAsync(nans, 0, sizeof(*nans), h.stream));
  countNanKernel<<<1024, 256, 0, h.stream>>>(Y, outputs, nans);
  probe::checkLaunch("countNanKernel");
  PROBE_CUDA(cudaStreamSynchronize(h.stream));
  unsigned long long unwritten = download(nans, 1)[0];
  PROBE_CUDA(cudaFree(nans));
  const std::string what =
      std::string(Precision<T>::name) + " GEMM " + s.name();
  if (unwritten)
    probe::fail(what + ": " + std::to_string(unwritten) + " of " +
                std::to_string(outputs) +
                " outputs still NaN (unwritten or overflowed)");

  double worst = 0;
  for (int sample = 0; sample < 16; ++sample) {
    int64_t m = sample == 0 ? 0 : probe::patternWord(2 * sample, 7) % s.M;
    int64_t n =
        sample == 0 ? s.N - 1 : probe::patternWord(2 * sample + 1, 7) % s.N;
    std::vector<T> x = download(X + m * s.K, uint64_t(s.K));
    std::vector<T> w = download(W + n * s.K, uint64_t(s.K));
    double ref = 0, sumSquares = 0;
    for (int64_t k = 0; k < s.K; ++k) {
      double p = double(load(x[k])) * double(load(w[k]));
      ref += p;
      sumSquares += p * p;
    }
    double got = load(download(Y + m * s.N + n, 1)[0]);
    double error =
        std::fabs(got - ref) / std::max(std::fabs(ref), std::sqrt(sumSquares));
    worst = std::max(worst, error);
    if (!(error <= Precision<T>::tolerance))
      probe::fail(what + ": Y[" + std::to_string(m) + "," + std::to_string(n) +
                  "] = " + std::to_string(got) + ", host reference " +
                  std::to_string(ref) + " (relative error " +
                  std::to_string(error) + ")");
  }
  std::printf("%s: no output unwritten, 16 sampled entries within %.0e "
              "(worst %.2e)\n",
              what.c_str(), Precision<T>::tolerance, worst);
}

template <class T> void measure(const Handles &h, const Shape &s) {
  const uint64_t inputs = uint64_t(s.M) * s.K + uint64_t(s.N) * s.K;
  const uint64_t outputs = uint64_t(s.M) * s.N;
  const uint64_t setBytes = (inputs + outputs) * sizeof(T);
  const uint64_t rotate = uint64_t(512) << 20;
  int sets = int(std::min<uint64_t>(
      8, std::max<uint64_t>(2, (rotate + inputs * sizeof(T) - 1) /
                                   (inputs * sizeof(T)))));
  size_t freeBytes = 0, totalBytes = 0;
  PROBE_CUDA(cudaMemGetInfo(&freeBytes, &totalBytes));
  while (sets > 1 && double(sets) * setBytes > 0.8 * double(freeBytes))
    --sets;
  if (double(setBytes) > 0.8 * double(freeBytes))
    probe::fail(std::string(Precision<T>::name) + " GEMM " + s.name() +
                " needs " + std::to_string(setBytes >> 20) + " MiB, " +
                std::to_string(freeBytes >> 20) + " MiB free");

  std::vector<T *> X(sets), W(sets), Y(sets);
  for (int i = 0; i < sets; ++i) {
    X[i] = deviceArray<T>(uint64_t(s.M) * s.K);
    W[i] = deviceArray<T>(uint64_t(s.N) * s.K);
    Y[i] = deviceArray<T>(outputs);
    fillRandomKernel<<<1024, 256, 0, h.stream>>>(X[i], uint64_t(s.M) * s.K,
                                                 uint32_t(2 * i + 1));
    probe::checkLaunch("fillRandomKernel");
    fillRandomKernel<<<1024, 256, 0, h.stream>>>(W[i], uint64_t(s.N) * s.K,
                                                 uint32_t(2 * i + 2));
    probe::checkLaunch("fillRandomKernel");
  }
  checkProduct(h, s, X[0], W[0], Y[0]);

  double ms = probe::medianMs(h.stream, 3, 20, sets, [&](int call) {
    int i = call % sets;
    gemm(h, s, X[i], W[i], Y[i]);
  });
  double tflops =
      2.0 * double(s.M) * double(s.N) * double(s.K) / (ms * 1e-3) / 1e12;
  std::printf("%s GEMM %s: %.3f ms, %.1f TFLOP/s (%d input sets)\n",
              Precision<T>::name, s.name().c_str(), ms, tflops, sets);
  probe::figure(std::string("gemm_") + Precision<T>::name + "_" + s.name(),
                tflops, "TFLOP/s");
  for (int i = 0; i < sets; ++i) {
    PROBE_CUDA(cudaFree(X[i]));
    PROBE_CUDA(cudaFree(W[i]));
    PROBE_CUDA(cudaFree(Y[i]));
  }
}

} // namespace

int main(int argc, char **argv) {
  // --smoke: one small case only, for running under compute-sanitizer and
  // ncu (the GPU kit's environment suite checks the tools with it).
  const bool smoke = argc > 1 && std::string(argv[1]) == "--smoke";
  std::vector<Shape> shapes;
  if (smoke)
    shapes.push_back({256, 256, 256});
  else
    shapes.push_back({8192, 8192, 8192});
  for (int i = smoke ? 2 : 1; i < argc; ++i)
    shapes.push_back(parseShape(argv[i]));
  probe::requireGpu();
  PROBE_CUDA(cudaSetDevice(0));
  probe::printDevice(0);

  Handles h{};
  PROBE_CUDA(cudaStreamCreateWithFlags(&h.stream, cudaStreamNonBlocking));
  PROBE_CUBLAS(cublasCreate(&h.tensorCore));
  PROBE_CUBLAS(cublasCreate(&h.pedantic));
  PROBE_CUBLAS(cublasSetStream(h.tensorCore, h.stream));
  PROBE_CUBLAS(cublasSetStream(h.pedantic, h.stream));
  PROBE_CUBLAS(cublasSetMathMode(h.tensorCore, CUBLAS_DEFAULT_MATH));
  PROBE_CUBLAS(cublasSetMathMode(h.pedantic, CUBLAS_PEDANTIC_MATH));
  int version = 0;
  PROBE_CUBLAS(cublasGetVersion(h.tensorCore, &version));
  std::printf("cuBLAS %d\n", version);

  for (const Shape &s : shapes) {
    measure<__nv_bfloat16>(h, s);
    measure<float>(h, s);
  }
  PROBE_CUBLAS(cublasDestroy(h.tensorCore));
  PROBE_CUBLAS(cublasDestroy(h.pedantic));
  PROBE_CUDA(cudaStreamDestroy(h.stream));
  std::printf("PASSED: cuBLAS GEMM baseline\n");
  return probe::kPassed;
}
