//===- probe.cuh - what every GPU-kit probe shares ------------------------===//
//
// The exit codes (0 passed, 1 failed, 77 skipped), the `@figure NAME VALUE
// UNIT` line, checked CUDA calls that name the failing call, the median of
// event-timed repeats, and a hashed pattern that can be written and checked
// on the device without a host copy.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_GPU_KIT_PROBE_CUH
#define HYPIPE_GPU_KIT_PROBE_CUH

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace probe {

constexpr int kPassed = 0, kFailed = 1, kSkipped = 77;

/// Called with the exit code before a failing or skipping exit; the MPI
/// probe aborts the job so that no rank waits for a peer that left.
inline void (*exitHook)(int code) = nullptr;

[[noreturn]] inline void finish(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (exitHook)
    exitHook(code);
  std::exit(code);
}

[[noreturn]] inline void fail(const std::string &what) {
  std::fprintf(stderr, "FAILED: %s\n", what.c_str());
  finish(kFailed);
}

[[noreturn]] inline void skip(const std::string &why) {
  std::printf("SKIPPED: %s\n", why.c_str());
  finish(kSkipped);
}

inline void check(cudaError_t status, const char *call) {
  if (status != cudaSuccess)
    fail(std::string(call) + ": " + cudaGetErrorName(status) + ": " +
         cudaGetErrorString(status));
}

/// After a kernel launch: the launch error now, not at the next sync.
inline void checkLaunch(const char *kernel) {
  check(cudaGetLastError(), kernel);
}

#define PROBE_CUDA(call) ::probe::check((call), #call)

/// True when the CUDA runtime sees a device; otherwise prints why not.
inline bool gpuVisible() {
  int n = 0;
  cudaError_t status = cudaGetDeviceCount(&n);
  if (status != cudaSuccess) {
    std::printf("no GPU visible: cudaGetDeviceCount: %s\n",
                cudaGetErrorString(status));
    cudaGetLastError();
    return false;
  }
  if (n == 0)
    std::printf("no GPU visible: cudaGetDeviceCount returned 0\n");
  return n > 0;
}

inline void requireGpu() {
  if (!gpuVisible())
    skip("no GPU visible");
}

inline void printDevice(int ordinal) {
  cudaDeviceProp p{};
  PROBE_CUDA(cudaGetDeviceProperties(&p, ordinal));
  int driver = 0, runtime = 0;
  PROBE_CUDA(cudaDriverGetVersion(&driver));
  PROBE_CUDA(cudaRuntimeGetVersion(&runtime));
  std::printf("device %d: %s, sm_%d%d, %.1f GiB, driver %d, runtime %d\n",
              ordinal, p.name, p.major, p.minor,
              double(p.totalGlobalMem) / (1ull << 30), driver, runtime);
}

inline void figure(const std::string &name, double value, const char *unit) {
  std::printf("@figure %s %.6g %s\n", name.c_str(), value, unit);
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Milliseconds per call of `launch(i)` on `stream`: `warmup` calls, then the
/// median over `repeats` event-timed batches of `inner` calls each (a batch
/// keeps short kernels long enough for the events to resolve).
template <class Launch>
double medianMs(cudaStream_t stream, int warmup, int repeats, int inner,
                Launch launch) {
  int call = 0;
  for (int i = 0; i < warmup; ++i)
    launch(call++);
  PROBE_CUDA(cudaStreamSynchronize(stream));
  cudaEvent_t start, stop;
  PROBE_CUDA(cudaEventCreate(&start));
  PROBE_CUDA(cudaEventCreate(&stop));
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    PROBE_CUDA(cudaEventRecord(start, stream));
    for (int i = 0; i < inner; ++i)
      launch(call++);
    PROBE_CUDA(cudaEventRecord(stop, stream));
    PROBE_CUDA(cudaEventSynchronize(stop));
    float t = 0;
    PROBE_CUDA(cudaEventElapsedTime(&t, start, stop));
    ms.push_back(double(t) / inner);
  }
  PROBE_CUDA(cudaEventDestroy(start));
  PROBE_CUDA(cudaEventDestroy(stop));
  return median(ms);
}

/// The `i`th word of pattern `seed`: a hash, never zero, different for
/// every seed, so a stale or unwritten word shows.
__host__ __device__ inline uint32_t patternWord(uint64_t i, uint32_t seed) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull ^ (uint64_t(seed) << 32 | seed);
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return uint32_t(x) | 1u;
}

static __global__ void fillPatternKernel(uint32_t *words, uint64_t n,
                                         uint32_t seed) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n;
       i += uint64_t(gridDim.x) * blockDim.x)
    words[i] = patternWord(i, seed);
}

/// Counts the words that differ from pattern `seed` into `*mismatches` and
/// keeps the lowest differing index in `*first` (start it at ~0ull).
static __global__ void checkPatternKernel(const uint32_t *words, uint64_t n,
                                          uint32_t seed,
                                          unsigned long long *mismatches,
                                          unsigned long long *first) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n;
       i += uint64_t(gridDim.x) * blockDim.x)
    if (words[i] != patternWord(i, seed)) {
      atomicAdd(mismatches, 1ull);
      atomicMin(first, (unsigned long long)i);
    }
}

constexpr int kPatternBlocks = 1024, kPatternThreads = 256;

inline void fillPattern(uint32_t *words, uint64_t n, uint32_t seed,
                        cudaStream_t stream) {
  fillPatternKernel<<<kPatternBlocks, kPatternThreads, 0, stream>>>(words, n,
                                                                    seed);
  checkLaunch("fillPatternKernel");
}

/// Checks `n` device words against pattern `seed`; "" when all match,
/// otherwise a sentence saying how many differ and where the first is.
inline std::string checkPattern(const uint32_t *words, uint64_t n,
                                uint32_t seed, cudaStream_t stream) {
  unsigned long long *counters = nullptr;
  PROBE_CUDA(cudaMalloc(&counters, 2 * sizeof(unsigned long long)));
  unsigned long long init[2] = {0, ~0ull};
  PROBE_CUDA(cudaMemcpyAsync(counters, init, sizeof(init),
                             cudaMemcpyHostToDevice, stream));
  checkPatternKernel<<<kPatternBlocks, kPatternThreads, 0, stream>>>(
      words, n, seed, counters, counters + 1);
  checkLaunch("checkPatternKernel");
  unsigned long long out[2];
  PROBE_CUDA(cudaMemcpyAsync(out, counters, sizeof(out), cudaMemcpyDeviceToHost,
                             stream));
  PROBE_CUDA(cudaStreamSynchronize(stream));
  PROBE_CUDA(cudaFree(counters));
  if (out[0] == 0)
    return "";
  return std::to_string(out[0]) + " of " + std::to_string(n) +
         " words differ from pattern " + std::to_string(seed) +
         ", the first at word " + std::to_string(out[1]);
}

} // namespace probe

#endif
