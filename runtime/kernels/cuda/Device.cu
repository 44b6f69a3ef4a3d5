//===- Device.cu - the CUDA device of the runtime -------------------------===//
//
// Memory is allocated once per buffer, stream-ordered (cudaMallocAsync: the
// trainer reuses its buffers every step); copies and kernels go on the
// context's stream. The squared norm is reduced in double, in a fixed order,
// so it does not depend on timing.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/Device.h"
#include "runtime/kernels/cuda/Primitives.cuh"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <string>

namespace hypipe::rt {
namespace {

using cuda::blocksFor;
using cuda::check;
using cuda::launched;
using cuda::stream;

constexpr int kNormBlocks = 256;

__global__ void sumSquaresKernel(const float *x, int64_t n, double *partial) {
  __shared__ double part[256];
  double s = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    s += double(x[i]) * x[i];
  part[threadIdx.x] = s;
  __syncthreads();
  for (int o = blockDim.x / 2; o > 0; o >>= 1) {
    if (int(threadIdx.x) < o)
      part[threadIdx.x] += part[threadIdx.x + o];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    partial[blockIdx.x] = part[0];
}

__global__ void adamwKernel(AdamWStep s, float *w, const float *g, float *m,
                            float *v, int64_t n) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  float gi = float(g[i] * s.clipScale);
  m[i] = float(s.beta1 * m[i] + (1 - s.beta1) * gi);
  v[i] = float(s.beta2 * v[i] + (1 - s.beta2) * double(gi) * gi);
  double update = (m[i] / s.c1) / (sqrt(v[i] / s.c2) + s.eps);
  w[i] = float(w[i] * s.decay - s.lr * update);
}

__global__ void packBf16Kernel(const float *x, __nv_bfloat16 *out, int64_t n) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = __float2bfloat16_rn(x[i]);
}

__global__ void unpackBf16Kernel(const __nv_bfloat16 *in, float *x, int64_t n) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    x[i] = __bfloat162float(in[i]);
}

std::string gib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f GiB", double(bytes) / (1 << 30));
  return buf;
}

class CudaDevice final : public Device {
public:
  explicit CudaDevice(int ordinal) : info(cuda::open(ordinal)) {
    check(cudaMalloc(&partial, sizeof(double) * kNormBlocks), "cudaMalloc");
  }
  ~CudaDevice() override {
    cudaFree(partial);
    cudaFreeAsync(scratch, stream());
  }

  std::string describe() const override {
    return "cuda:" + std::to_string(info.ordinal) + " (" + info.name + ", sm_" +
           std::to_string(info.major) + std::to_string(info.minor) + ")";
  }
  bool host() const override { return false; }
  void *allocate(int64_t bytes) override {
    // Stream-ordered (cudaMallocAsync / cudaFreeAsync on the compute
    // stream): neither waits for the whole GPU, as cudaMalloc and cudaFree
    // may, which would hold a rank whose NCCL receives wait for a peer.
    void *p = nullptr;
    cudaError_t status = cudaMallocAsync(&p, size_t(bytes), stream());
    if (status != cudaSuccess) {
      cudaGetLastError();
      size_t freeBytes = 0, totalBytes = 0;
      cudaMemGetInfo(&freeBytes, &totalBytes);
      throw cuda::CudaError(
          "error: the model does not fit in GPU memory: " + gib(allocated) +
          " allocated, " + gib(bytes) + " more asked, " +
          gib(int64_t(freeBytes)) + " free of " + gib(int64_t(totalBytes)) +
          " on " + describe() +
          "\nhelp: use more pipeline stages (pp), fewer microbatches in "
          "flight, or a smaller micro_batch_size / seq_length");
    }
    check(cudaMemsetAsync(p, 0, size_t(bytes), stream()), "cudaMemset");
    allocated += bytes;
    return p;
  }
  void release(void *p) override { cudaFreeAsync(p, stream()); }
  void toDevice(void *dst, const void *src, int64_t bytes) override {
    check(cudaMemcpyAsync(dst, src, size_t(bytes), cudaMemcpyHostToDevice,
                          stream()),
          "copy to the GPU");
    // The host buffer may change right after: wait for the copy.
    synchronize();
  }
  void toHost(void *dst, const void *src, int64_t bytes) override {
    check(cudaMemcpyAsync(dst, src, size_t(bytes), cudaMemcpyDeviceToHost,
                          stream()),
          "copy from the GPU");
    synchronize();
  }
  void copy(void *dst, const void *src, int64_t bytes) override {
    check(cudaMemcpyAsync(dst, src, size_t(bytes), cudaMemcpyDeviceToDevice,
                          stream()),
          "copy on the GPU");
  }
  void zero(float *x, int64_t n) override { cuda::zero(x, n); }
  void roundToBf16(float *dst, const float *src, int64_t n) override {
    cuda::roundCopy(dst, src, n);
  }
  void add(float *dst, const float *src, int64_t n) override {
    cuda::addInPlace(dst, src, n);
  }
  int computeCapability() const override {
    return info.major * 10 + info.minor;
  }
  double sumSquares(const float *x, const std::vector<ParamSegment> &segments,
                    double start) override {
    double sum = start;
    for (const ParamSegment &seg : segments) {
      const int64_t n = seg.end - seg.begin;
      if (!n)
        continue;
      sumSquaresKernel<<<kNormBlocks, 256, 0, stream()>>>(x + seg.begin, n,
                                                          partial);
      launched("squared norm");
      double host[kNormBlocks];
      toHost(host, partial, sizeof(host));
      double s = 0;
      for (double p : host)
        s += p;
      sum += s;
    }
    return sum;
  }
  void adamw(const AdamWStep &s, const std::vector<ParamSegment> &segments,
             float *w, const float *g, float *m, float *v,
             int64_t momentBase) override {
    for (const ParamSegment &seg : segments) {
      const int64_t n = seg.end - seg.begin;
      if (!n)
        continue;
      AdamWStep step = s;
      step.decay = seg.decay ? s.decay : 1.0f;
      const int64_t moment = seg.begin - momentBase;
      adamwKernel<<<blocksFor(n), 256, 0, stream()>>>(
          step, w + seg.begin, g + seg.begin, m + moment, v + moment, n);
      launched("adamw");
    }
  }
  void synchronize() override { cuda::synchronize(); }

  void *allocateHost(int64_t bytes) override {
    void *p = nullptr;
    check(cudaMallocHost(&p, size_t(std::max<int64_t>(bytes, 1))),
          "pinned host memory for transfers");
    return p;
  }
  void releaseHost(void *p) override { cudaFreeHost(p); }
  // In place through a scratch buffer: threads of one kernel cannot
  // narrow or widen a buffer in place without racing each other.
  void packBf16(float *x, int64_t n) override {
    if (!n)
      return;
    auto *tmp = static_cast<__nv_bfloat16 *>(scratchBytes(2 * n));
    packBf16Kernel<<<blocksFor(n), 256, 0, stream()>>>(x, tmp, n);
    launched("bf16 packing");
    check(cudaMemcpyAsync(x, tmp, size_t(2 * n), cudaMemcpyDeviceToDevice,
                          stream()),
          "bf16 packing");
  }
  void unpackBf16(float *x, int64_t n) override {
    if (!n)
      return;
    auto *tmp = static_cast<__nv_bfloat16 *>(scratchBytes(2 * n));
    check(cudaMemcpyAsync(tmp, x, size_t(2 * n), cudaMemcpyDeviceToDevice,
                          stream()),
          "bf16 unpacking");
    unpackBf16Kernel<<<blocksFor(n), 256, 0, stream()>>>(tmp, x, n);
    launched("bf16 unpacking");
  }

private:
  /// A device buffer of at least `bytes`, grown on demand, stream-ordered:
  /// the old one is freed after the work queued on it, without waiting.
  void *scratchBytes(int64_t bytes) {
    if (bytes > scratchSize) {
      if (scratch)
        check(cudaFreeAsync(scratch, stream()), "cudaFreeAsync");
      scratch = nullptr;
      check(cudaMallocAsync(&scratch, size_t(bytes), stream()),
            "cudaMallocAsync");
      scratchSize = bytes;
    }
    return scratch;
  }

  cuda::DeviceInfo info;
  double *partial = nullptr;
  void *scratch = nullptr;
  int64_t scratchSize = 0;
  int64_t allocated = 0;
};

} // namespace

std::unique_ptr<Device> makeCudaDevice(int ordinal) {
  return std::make_unique<CudaDevice>(ordinal);
}

int cudaDeviceCount() { return cuda::deviceCount(); }

std::string cudaDeviceId(int ordinal) {
  char id[64] = {0};
  if (cudaDeviceGetPCIBusId(id, sizeof id, ordinal) != cudaSuccess) {
    cudaGetLastError();
    return "";
  }
  return id;
}

} // namespace hypipe::rt
