//===- Device.cu - the cuda target's memory, optimizer and collectives ----===//
//
// The CUDA half of the cuda target (CudaTarget.h); its stage-running entry
// is CudaTarget.cpp's.
// Memory is allocated once per buffer, stream-ordered (cudaMallocAsync: the
// trainer reuses its buffers every step); copies and kernels go on the
// context's stream. The squared norm is reduced in double, in a fixed order,
// so it does not depend on timing.
//
//===----------------------------------------------------------------------===//

#include "runtime/kernels/cuda/CudaTarget.h"
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

/// One segment per blockIdx.y, kNormBlocks blocks over it (each segment's
/// partials in the order a launch per segment made them): the whole
/// stage's squared norm in one launch and one read-back.
__global__ void sumSquaresKernel(const float *x, const ParamSegment *segments,
                                 double *partial) {
  __shared__ double part[256];
  const ParamSegment seg = segments[blockIdx.y];
  double s = 0;
  for (int64_t i = seg.begin + int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       i < seg.end; i += int64_t(gridDim.x) * blockDim.x)
    s += double(x[i]) * x[i];
  part[threadIdx.x] = s;
  __syncthreads();
  for (int o = blockDim.x / 2; o > 0; o >>= 1) {
    if (int(threadIdx.x) < o)
      part[threadIdx.x] += part[threadIdx.x + o];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    partial[int64_t(blockIdx.y) * gridDim.x + blockIdx.x] = part[0];
}

/// Every segment in one launch (blockIdx.y), grid-stride within it; the
/// moments are indexed from `momentBase`.
__global__ void adamwKernel(AdamWStep s, const ParamSegment *segments, float *w,
                            const float *g, float *m, float *v,
                            int64_t momentBase) {
  const ParamSegment seg = segments[blockIdx.y];
  const float decay = seg.decay ? s.decay : 1.0f;
  for (int64_t i = seg.begin + int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       i < seg.end; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t k = i - momentBase;
    float gi = float(g[i] * s.clipScale);
    m[k] = float(s.beta1 * m[k] + (1 - s.beta1) * gi);
    v[k] = float(s.beta2 * v[k] + (1 - s.beta2) * double(gi) * gi);
    double update = (m[k] / s.c1) / (sqrt(v[k] / s.c2) + s.eps);
    w[i] = float(w[i] * decay - s.lr * update);
  }
}

/// The grid's y dimension: segments per launch.
constexpr size_t kMaxSegmentsPerLaunch = 65535;

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

class CudaTarget final : public Device {
public:
  CudaTarget(int ordinal, cuda::StagePassRunner runStages)
      : info(cuda::open(ordinal)), runStages(runStages) {}
  ~CudaTarget() override {
    for (void *p : {static_cast<void *>(partial), segmentTable})
      if (p)
        cudaFreeAsync(p, stream());
  }

  void runStagePass(const StageProgram &program, StagePass pass,
                    StageArgs &args) override {
    runStages(program, pass, args);
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
  // A stage's segments in launches of up to 65,535 (one in practice): one
  // launch and one read-back for the norm, one launch for AdamW, where a
  // launch (and for the norm a synchronisation) per parameter was.
  double sumSquares(const float *x, const std::vector<ParamSegment> &segments,
                    double start) override {
    double sum = start;
    for (size_t first = 0; first < segments.size();
         first += kMaxSegmentsPerLaunch) {
      const size_t n = std::min(kMaxSegmentsPerLaunch, segments.size() - first);
      const ParamSegment *table = uploadSegments(segments, first, n);
      double *partials = partialsFor(n);
      sumSquaresKernel<<<dim3(kNormBlocks, unsigned(n)), 256, 0, stream()>>>(
          x, table, partials);
      launched("squared norm");
      std::vector<double> host(n * kNormBlocks);
      toHost(host.data(), partials, int64_t(sizeof(double) * host.size()));
      // Each segment's partials, then the segments, in order: the sum the
      // launch per segment made.
      for (size_t k = 0; k < n; ++k) {
        double s = 0;
        for (int b = 0; b < kNormBlocks; ++b)
          s += host[k * kNormBlocks + size_t(b)];
        sum += s;
      }
    }
    return sum;
  }
  void adamw(const AdamWStep &s, const std::vector<ParamSegment> &segments,
             float *w, const float *g, float *m, float *v,
             int64_t momentBase) override {
    for (size_t first = 0; first < segments.size();
         first += kMaxSegmentsPerLaunch) {
      const size_t n = std::min(kMaxSegmentsPerLaunch, segments.size() - first);
      int64_t longest = 0;
      for (size_t k = first; k < first + n; ++k)
        longest = std::max(longest, segments[k].end - segments[k].begin);
      if (!longest)
        continue;
      const ParamSegment *table = uploadSegments(segments, first, n);
      const unsigned blocks = std::min(blocksFor(longest), 1024u);
      adamwKernel<<<dim3(blocks, unsigned(n)), 256, 0, stream()>>>(
          s, table, w, g, m, v, momentBase);
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

  // In place, as the CPU does it, a chunk of at most kStashChunkFloats at a
  // time through the scratch buffer (threads of one kernel cannot narrow
  // or widen a range in place without racing): each run's packed bytes
  // start at or before its floats (StashRun::at <= 4 offset), so packing
  // the chunks in order and widening them in reverse order overwrites
  // nothing still to be read, and the scratch stays small.
  static constexpr int64_t kStashChunkFloats = int64_t(8) << 20; // 32 MiB
  void packSaved(float *buffer, const std::vector<StashRun> &runs) override {
    auto *bytes = reinterpret_cast<unsigned char *>(buffer);
    auto *tmp = static_cast<float *>(scratchBytes(4 * kStashChunkFloats));
    for (const StashRun &r : runs)
      for (int64_t i = 0; i < r.floats; i += kStashChunkFloats) {
        const int64_t n = std::min(kStashChunkFloats, r.floats - i);
        unsigned char *to = bytes + r.at + i * (r.bf16 ? 2 : 4);
        check(cudaMemcpyAsync(tmp, buffer + r.offset + i, size_t(4 * n),
                              cudaMemcpyDeviceToDevice, stream()),
              "saved tensors' packing");
        if (r.bf16) {
          packBf16Kernel<<<blocksFor(n), 256, 0, stream()>>>(
              tmp, reinterpret_cast<__nv_bfloat16 *>(to), n);
          launched("saved tensors' packing");
        } else {
          check(cudaMemcpyAsync(to, tmp, size_t(4 * n),
                                cudaMemcpyDeviceToDevice, stream()),
                "saved tensors' packing");
        }
      }
  }
  void unpackSaved(float *buffer, const std::vector<StashRun> &runs) override {
    auto *bytes = reinterpret_cast<unsigned char *>(buffer);
    auto *tmp = static_cast<float *>(scratchBytes(4 * kStashChunkFloats));
    for (auto r = runs.rbegin(); r != runs.rend(); ++r) {
      if (r->floats == 0)
        continue;
      const int64_t width = r->bf16 ? 2 : 4;
      for (int64_t i = (r->floats - 1) / kStashChunkFloats * kStashChunkFloats;
           i >= 0; i -= kStashChunkFloats) {
        const int64_t n = std::min(kStashChunkFloats, r->floats - i);
        check(cudaMemcpyAsync(tmp, bytes + r->at + i * width, size_t(width * n),
                              cudaMemcpyDeviceToDevice, stream()),
              "saved tensors' unpacking");
        float *to = buffer + r->offset + i;
        if (r->bf16) {
          unpackBf16Kernel<<<blocksFor(n), 256, 0, stream()>>>(
              reinterpret_cast<const __nv_bfloat16 *>(tmp), to, n);
          launched("saved tensors' unpacking");
        } else {
          check(cudaMemcpyAsync(to, tmp, size_t(4 * n),
                                cudaMemcpyDeviceToDevice, stream()),
                "saved tensors' unpacking");
        }
      }
    }
  }
  void swapBytes(void *a, void *b, int64_t bytes) override {
    auto *x = static_cast<unsigned char *>(a),
         *y = static_cast<unsigned char *>(b);
    const int64_t chunk = 4 * kStashChunkFloats;
    void *tmp = scratchBytes(chunk);
    for (int64_t at = 0; at < bytes; at += chunk) {
      const size_t n = size_t(std::min(chunk, bytes - at));
      for (auto [to, from] : {std::pair<void *, const void *>{tmp, x + at},
                              {x + at, y + at},
                              {y + at, tmp}})
        check(cudaMemcpyAsync(to, from, n, cudaMemcpyDeviceToDevice, stream()),
              "saved tensors' exchange");
    }
  }

private:
  /// Segments [first, first + n) in device memory for the next launch
  /// (stream-ordered: the copy lands before the kernel reads it; the host
  /// copy lives until the copy has been made, as cudaMemcpyAsync from
  /// pageable memory returns once it has staged the data).
  const ParamSegment *uploadSegments(const std::vector<ParamSegment> &segments,
                                     size_t first, size_t n) {
    const int64_t bytes = int64_t(sizeof(ParamSegment) * n);
    if (bytes > segmentBytes) {
      if (segmentTable)
        check(cudaFreeAsync(segmentTable, stream()), "cudaFreeAsync");
      check(cudaMallocAsync(&segmentTable, size_t(bytes), stream()),
            "cudaMallocAsync");
      segmentBytes = bytes;
    }
    check(cudaMemcpyAsync(segmentTable, segments.data() + first, size_t(bytes),
                          cudaMemcpyHostToDevice, stream()),
          "copy of the optimizer's segments");
    return static_cast<const ParamSegment *>(segmentTable);
  }
  /// Room for kNormBlocks partial sums per segment of `n`.
  double *partialsFor(size_t n) {
    const int64_t bytes = int64_t(sizeof(double) * kNormBlocks * n);
    if (bytes > partialBytes) {
      if (partial)
        check(cudaFreeAsync(partial, stream()), "cudaFreeAsync");
      check(cudaMallocAsync(&partial, size_t(bytes), stream()),
            "cudaMallocAsync");
      partialBytes = bytes;
    }
    return partial;
  }

  /// A device buffer of at least `bytes` (cuda::GrowingBuffer).
  void *scratchBytes(int64_t bytes) {
    return scratch.bytes(bytes, "cudaMallocAsync (scratch)");
  }

  cuda::DeviceInfo info;
  cuda::StagePassRunner runStages;
  double *partial = nullptr;
  int64_t partialBytes = 0;
  void *segmentTable = nullptr;
  int64_t segmentBytes = 0;
  cuda::GrowingBuffer scratch;
  int64_t allocated = 0;
};

} // namespace

std::unique_ptr<Device> cuda::openTarget(int ordinal,
                                         cuda::StagePassRunner runStages) {
  return std::make_unique<CudaTarget>(ordinal, runStages);
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
