//===- cublas_gemm.cu - cuBLAS GEMM throughput, the baseline --------------===//
//
// The GEMM rates hypipe's kernels are measured against, on the layout of
// hypipe's linear layers (row-major, as its gemm(): column-major C^T =
// op(B)^T op(A)^T), for each of a linear layer's three products, with X the
// layer's input [M, K], W its weight [N, K] and dY the output's gradient:
//   fwd    Y[M,N]   = X W^T
//   dgrad  dX[M,K]  = dY W
//   wgrad  dW[N,K] += dY^T X   (beta 1: the gradient accumulates)
// Three modes:
//   bf16         cublasGemmEx, bf16 operands and output, CUBLAS_COMPUTE_32F
//                (tensor cores, fp32 accumulation): what a bf16 framework gets;
//   hypipe_bf16  hypipe's own bf16 mode (runtime/kernels/cuda/Primitives.cu):
//                fp32 operands holding bf16 values and fp32 output,
//                cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_16BF;
//   fp32         cublasSgemm on a handle in CUBLAS_PEDANTIC_MATH (no TF32),
//                hypipe's fp32 mode (forward at 8192^3 only: the checking
//                precision, not the speed path).
// The bf16 modes run all three products at 8192x8192x8192 and every MxNxK
// given. Repeats rotate over 2..8 sets of random inputs (at least 512 MiB of
// A and B in all) so that they are not served from L2. Before timing, one
// product per mode, pass and shape is checked: the output starts as NaN (0
// for wgrad's accumulation) and must have no NaN left, and 16 sampled
// entries must match a double-precision host dot product of the same
// (rounded) inputs within 1e-2 (bf16 output), 1e-3 (hypipe_bf16) or 1e-4
// (fp32) of the larger of |value| and the root-sum-square of the products.
// Figures: `@figure gemm_<mode>_<pass>_<M>x<N>x<K> X TFLOP/s` (2MNK per
// product, median of 20 event-timed batches after 3 warm-ups).
// Usage: cublas_gemm [--smoke] [MxNxK ...]   e.g. cublas_gemm 4096x10304x2048
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

enum class Mode { Bf16, HypipeBf16, Fp32 };
enum class Pass { Forward, InputGrad, WeightGrad };

const char *modeName(Mode m) {
  return m == Mode::Bf16         ? "bf16"
         : m == Mode::HypipeBf16 ? "hypipe_bf16"
                                 : "fp32";
}
const char *passName(Pass p) {
  return p == Pass::Forward ? "fwd" : p == Pass::InputGrad ? "dgrad" : "wgrad";
}
double tolerance(Mode m) {
  return m == Mode::Bf16 ? 1e-2 : m == Mode::HypipeBf16 ? 1e-3 : 1e-4;
}

/// One product as hypipe's gemm() takes it: row-major C[m,n] (+)= op(A)
/// op(B), op(A) m x k, op(B) k x n, and the sizes of the three operands.
struct Product {
  bool transA, transB;
  int64_t m, n, k, lda, ldb, ldc;
  float beta;
  uint64_t sizeA, sizeB, sizeC;
};

Product productOf(Pass pass, const Shape &s) {
  const uint64_t x = uint64_t(s.M) * s.K, w = uint64_t(s.N) * s.K,
                 y = uint64_t(s.M) * s.N;
  switch (pass) {
  case Pass::Forward: // A = X [M,K], B = W [N,K]
    return {false, true, s.M, s.N, s.K, s.K, s.K, s.N, 0.0f, x, w, y};
  case Pass::InputGrad: // A = dY [M,N], B = W [N,K]
    return {false, false, s.M, s.K, s.N, s.N, s.K, s.K, 0.0f, y, w, x};
  case Pass::WeightGrad: // A = dY [M,N] transposed, B = X [M,K]
    return {true, false, s.N, s.K, s.M, s.N, s.K, s.K, 1.0f, y, x, w};
  }
  return {};
}

__device__ float randomValue(uint64_t i, uint32_t seed) {
  // In (-1, 1) and never zero: an odd multiple of 2^-24.
  uint32_t bits = probe::patternWord(i, seed) >> 8;
  return (float(bits) + 0.5f) * (2.0f / 16777216.0f) - 1.0f;
}

__device__ void store(float *p, float v, bool roundToBf16) {
  *p = roundToBf16 ? __bfloat162float(__float2bfloat16_rn(v)) : v;
}
__device__ void store(__nv_bfloat16 *p, float v, bool) {
  *p = __float2bfloat16_rn(v);
}
__host__ __device__ float load(float v) { return v; }
__host__ __device__ float load(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class T>
__global__ void fillRandomKernel(T *x, uint64_t n, uint32_t seed,
                                 bool roundToBf16) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n;
       i += uint64_t(gridDim.x) * blockDim.x)
    store(x + i, randomValue(i, seed), roundToBf16);
}

template <class T>
__global__ void countNanKernel(const T *x, uint64_t n,
                               unsigned long long *nans) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n;
       i += uint64_t(gridDim.x) * blockDim.x)
    if (isnan(load(x[i])))
      atomicAdd(nans, 1ull);
}

struct Handles {
  cudaStream_t stream;
  cublasHandle_t tensorCore; // default math
  cublasHandle_t pedantic;   // CUBLAS_PEDANTIC_MATH, as hypipe's runtime
};

void gemm(const Handles &h, Mode mode, const Product &p, const void *A,
          const void *B, void *C) {
  const float one = 1.0f;
  const cublasOperation_t opA = p.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opB = p.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (mode == Mode::Fp32) {
    PROBE_CUBLAS(cublasSgemm(h.pedantic, opB, opA, int(p.n), int(p.m), int(p.k),
                             &one, static_cast<const float *>(B), int(p.ldb),
                             static_cast<const float *>(A), int(p.lda), &p.beta,
                             static_cast<float *>(C), int(p.ldc)));
    return;
  }
  const cudaDataType_t type = mode == Mode::Bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasComputeType_t compute =
      mode == Mode::Bf16 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_FAST_16BF;
  PROBE_CUBLAS(cublasGemmEx(h.tensorCore, opB, opA, int(p.n), int(p.m),
                            int(p.k), &one, B, type, int(p.ldb), A, type,
                            int(p.lda), &p.beta, C, type, int(p.ldc), compute,
                            CUBLAS_GEMM_DEFAULT));
}

template <class T> T *deviceArray(uint64_t n) {
  T *p = nullptr;
  PROBE_CUDA(cudaMalloc(&p, n * sizeof(T)));
  return p;
}

/// `count` elements of `src`, `stride` apart, to the host.
template <class T>
std::vector<T> download(const T *src, uint64_t count, uint64_t stride = 1) {
  std::vector<T> host(count);
  PROBE_CUDA(cudaMemcpy2D(host.data(), sizeof(T), src, stride * sizeof(T),
                          sizeof(T), count, cudaMemcpyDeviceToHost));
  return host;
}

/// Checks one product: every output written, sampled entries right.
template <class T>
void checkProduct(const Handles &h, Mode mode, const Product &p,
                  const std::string &what, const T *A, const T *B, T *C) {
  const uint64_t outputs = uint64_t(p.m) * p.n;
  // wgrad accumulates: it starts from zeros; the others must write every
  // entry over a NaN.
  PROBE_CUDA(cudaMemsetAsync(C, p.beta != 0.0f ? 0 : 0xff, outputs * sizeof(T),
                             h.stream));
  gemm(h, mode, p, A, B, C);
  unsigned long long *nans = deviceArray<unsigned long long>(1);
  PROBE_CUDA(cudaMemsetAsync(nans, 0, sizeof(*nans), h.stream));
  countNanKernel<<<1024, 256, 0, h.stream>>>(C, outputs, nans);
  probe::checkLaunch("countNanKernel");
  PROBE_CUDA(cudaStreamSynchronize(h.stream));
  unsigned long long unwritten = download(nans, 1)[0];
  PROBE_CUDA(cudaFree(nans));
  if (unwritten)
    probe::fail(what + ": " + std::to_string(unwritten) + " of " +
                std::to_string(outputs) +
                " outputs still NaN (unwritten or overflowed)");

  double worst = 0;
  for (int sample = 0; sample < 16; ++sample) {
    int64_t i = sample == 0 ? 0 : probe::patternWord(2 * sample, 7) % p.m;
    int64_t j =
        sample == 0 ? p.n - 1 : probe::patternWord(2 * sample + 1, 7) % p.n;
    // Row i of op(A) and column j of op(B).
    std::vector<T> a =
        p.transA ? download(A + i, p.k, p.lda) : download(A + i * p.lda, p.k);
    std::vector<T> b =
        p.transB ? download(B + j * p.ldb, p.k) : download(B + j, p.k, p.ldb);
    double ref = 0, sumSquares = 0;
    for (int64_t q = 0; q < p.k; ++q) {
      double product = double(load(a[q])) * double(load(b[q]));
      ref += product;
      sumSquares += product * product;
    }
    double got = load(download(C + i * p.ldc + j, 1)[0]);
    double error =
        std::fabs(got - ref) / std::max(std::fabs(ref), std::sqrt(sumSquares));
    worst = std::max(worst, error);
    if (!(error <= tolerance(mode)))
      probe::fail(what + ": C[" + std::to_string(i) + "," + std::to_string(j) +
                  "] = " + std::to_string(got) + ", host reference " +
                  std::to_string(ref) + " (relative error " +
                  std::to_string(error) + ")");
  }
  std::printf("%s: no output unwritten, 16 sampled entries within %.0e "
              "(worst %.2e)\n",
              what.c_str(), tolerance(mode), worst);
}

template <class T>
void measure(const Handles &h, Mode mode, Pass pass, const Shape &s) {
  const Product p = productOf(pass, s);
  const std::string what =
      std::string(modeName(mode)) + " " + passName(pass) + " " + s.name();
  const uint64_t inputs = p.sizeA + p.sizeB;
  const uint64_t setBytes = (inputs + p.sizeC) * sizeof(T);
  const uint64_t rotate = uint64_t(512) << 20;
  int sets = int(std::min<uint64_t>(
      8, std::max<uint64_t>(2, (rotate + inputs * sizeof(T) - 1) /
                                   (inputs * sizeof(T)))));
  size_t freeBytes = 0, totalBytes = 0;
  PROBE_CUDA(cudaMemGetInfo(&freeBytes, &totalBytes));
  while (sets > 1 && double(sets) * setBytes > 0.8 * double(freeBytes))
    --sets;
  if (double(setBytes) > 0.8 * double(freeBytes))
    probe::fail(what + " needs " + std::to_string(setBytes >> 20) + " MiB, " +
                std::to_string(freeBytes >> 20) + " MiB free");

  const bool roundToBf16 = mode == Mode::HypipeBf16; // bf16 values in fp32
  std::vector<T *> A(sets), B(sets), C(sets);
  for (int i = 0; i < sets; ++i) {
    A[i] = deviceArray<T>(p.sizeA);
    B[i] = deviceArray<T>(p.sizeB);
    C[i] = deviceArray<T>(p.sizeC);
    fillRandomKernel<<<1024, 256, 0, h.stream>>>(
        A[i], p.sizeA, uint32_t(2 * i + 1), roundToBf16);
    probe::checkLaunch("fillRandomKernel");
    fillRandomKernel<<<1024, 256, 0, h.stream>>>(
        B[i], p.sizeB, uint32_t(2 * i + 2), roundToBf16);
    probe::checkLaunch("fillRandomKernel");
    PROBE_CUDA(cudaMemsetAsync(C[i], 0, p.sizeC * sizeof(T), h.stream));
  }
  checkProduct(h, mode, p, what, A[0], B[0], C[0]);

  double ms = probe::medianMs(h.stream, 3, 20, sets, [&](int call) {
    int i = call % sets;
    gemm(h, mode, p, A[i], B[i], C[i]);
  });
  double tflops =
      2.0 * double(s.M) * double(s.N) * double(s.K) / (ms * 1e-3) / 1e12;
  std::printf("%s: %.3f ms, %.1f TFLOP/s (%d input sets)\n", what.c_str(), ms,
              tflops, sets);
  probe::figure(std::string("gemm_") + modeName(mode) + "_" + passName(pass) +
                    "_" + s.name(),
                tflops, "TFLOP/s");
  for (int i = 0; i < sets; ++i) {
    PROBE_CUDA(cudaFree(A[i]));
    PROBE_CUDA(cudaFree(B[i]));
    PROBE_CUDA(cudaFree(C[i]));
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

  for (size_t i = 0; i < shapes.size(); ++i) {
    for (Pass pass : {Pass::Forward, Pass::InputGrad, Pass::WeightGrad}) {
      measure<__nv_bfloat16>(h, Mode::Bf16, pass, shapes[i]);
      measure<float>(h, Mode::HypipeBf16, pass, shapes[i]);
    }
    if (i == 0)
      measure<float>(h, Mode::Fp32, Pass::Forward, shapes[i]);
  }
  PROBE_CUBLAS(cublasDestroy(h.tensorCore));
  PROBE_CUBLAS(cublasDestroy(h.pedantic));
  PROBE_CUDA(cudaStreamDestroy(h.stream));
  std::printf("PASSED: cuBLAS GEMM baseline\n");
  return probe::kPassed;
}
