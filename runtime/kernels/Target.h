//===- Target.h - one object per backend: memory, kernels, collectives ----===//
//
// A backend is one object behind one vtable (as IREE's HAL gives a driver
// one): the memory a rank's tensors live in, the stage-running entry (one
// pass of a stage's kernel program over the target's kernels), the
// optimizer's kernels and the collectives' device side (packBf16). The
// trainer keeps parameters, gradients, AdamW moments, workspaces, saved
// slots and activations in its memory, allocated when first needed and
// reused every step, and everything it does to tensors between stage calls
// goes through here: zeroing, tied-gradient sums, the squared gradient norm
// and the AdamW update.
//
// The cpu target (cpu/CpuTarget.cpp) is plain memory and the CPU kernels;
// the cuda target (cuda/CudaTarget.cpp over cuda/Device.cu) is the GPU
// chosen by the launcher's local rank. Neither holds a precision: a stage's
// program says what its activations are kept in, and every kernel call gets
// it from there.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_TARGET_H
#define HYPIPE_RUNTIME_KERNELS_TARGET_H

#include "runtime/formats/StageProgram.h"
#include "runtime/kernels/StageArgs.h"
#include "runtime/kernels/cpu/Optimizer.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hypipe::rt {

/// The base of every target (the name the trainer knows it by).
class Device {
public:
  virtual ~Device() = default;
  /// Runs one pass of a stage's kernel program (StageProgram.h) over this
  /// target's kernels, in the program's precision. Throws RuntimeError for
  /// a program compiled for another target.
  virtual void runStagePass(const StageProgram &program, StagePass pass,
                            StageArgs &args) = 0;
  /// "cpu" or e.g. "cuda:0 (NVIDIA H100 80GB HBM3, sm_90)".
  virtual std::string describe() const = 0;
  /// True when the CPU can address the memory (the host device).
  virtual bool host() const = 0;
  /// Zeroed memory; throws RuntimeError-like std::runtime_error when out of
  /// memory, with the sizes in the message.
  virtual void *allocate(int64_t bytes) = 0;
  virtual void release(void *p) = 0;
  virtual void toDevice(void *dst, const void *src, int64_t bytes) = 0;
  virtual void toHost(void *dst, const void *src, int64_t bytes) = 0;
  virtual void copy(void *dst, const void *src, int64_t bytes) = 0;
  virtual void zero(float *x, int64_t n) = 0;
  /// dst += src.
  virtual void add(float *dst, const float *src, int64_t n) = 0;
  /// dst = src rounded to the nearest bfloat16 (a bf16 run's working copy
  /// of its fp32 main weights: docs/precision.md).
  virtual void roundToBf16(float *dst, const float *src, int64_t n) = 0;
  /// start + the sum of x[i]^2 over `segments` (in double), in their order.
  virtual double sumSquares(const float *x,
                            const std::vector<ParamSegment> &segments,
                            double start) = 0;
  /// major * 10 + minor of a GPU; 0 for the host.
  virtual int computeCapability() const { return 0; }
  /// One AdamW step of `segments` of w (gradients g); the moments m and v
  /// are indexed from `momentBase` (the rank's shard's first float).
  virtual void adamw(const AdamWStep &step,
                     const std::vector<ParamSegment> &segments, float *w,
                     const float *g, float *m, float *v,
                     int64_t momentBase) = 0;
  /// Waits for queued work.
  virtual void synchronize() = 0;

  /// Host memory for staging transfers (pinned on a GPU, so copies run at
  /// full speed and asynchronously); freed with releaseHost.
  virtual void *allocateHost(int64_t bytes) = 0;
  virtual void releaseHost(void *p) = 0;
  /// bf16 messages between ranks: packs `n` floats (bf16 values already)
  /// in place into the first 2n bytes of `x`, and widens them back.
  virtual void packBf16(float *x, int64_t n) = 0;
  virtual void unpackBf16(float *x, int64_t n) = 0;
  /// A bf16 run's saved tensors (runtime/exec/SavedBuffers.h): packs
  /// `runs` of `buffer` in place into its first stashBytes(runs) bytes (a
  /// bf16 run narrowed: its values are bf16 already, so nothing is lost),
  /// and widens them back to where they were.
  virtual void packSaved(float *buffer, const std::vector<StashRun> &runs) = 0;
  virtual void unpackSaved(float *buffer,
                           const std::vector<StashRun> &runs) = 0;
  /// Exchanges the first `bytes` bytes of `a` and `b` (apart).
  virtual void swapBytes(void *a, void *b, int64_t bytes) = 0;

  /// Bytes held by this device's DeviceArrays now, and the most held at
  /// once so far: what the run's tensors really took.
  int64_t liveBytes() const { return live; }
  int64_t peakBytes() const { return peak; }
  /// The most held at once since startPeakWindow() (a step's peak).
  int64_t windowPeakBytes() const { return windowPeak; }
  void startPeakWindow() { windowPeak = live; }
  void account(int64_t bytes) {
    live += bytes;
    peak = std::max(peak, live);
    windowPeak = std::max(windowPeak, live);
  }

private:
  int64_t live = 0, peak = 0, windowPeak = 0;
};

/// Plain memory and the CPU kernels: the cpu target (CpuTarget.cpp).
std::unique_ptr<Device> makeHostDevice();
/// The cuda target on GPU `ordinal` (CudaTarget.cpp). Throws std::runtime_error
/// with a message for users when hypipe was built without CUDA or no such GPU
/// is there.
std::unique_ptr<Device> makeCudaDevice(int ordinal);
/// The GPUs this process sees (0 without CUDA or a driver).
int cudaDeviceCount();
/// GPU `ordinal`'s PCI bus id, the same in every process that sees it
/// whatever CUDA_VISIBLE_DEVICES numbers it ("" without CUDA).
std::string cudaDeviceId(int ordinal);

/// A typed buffer on a device, freed with it.
template <typename T> class DeviceArray {
public:
  DeviceArray() = default;
  DeviceArray(Device &device, int64_t n)
      : dev(&device), count(n),
        ptr(static_cast<T *>(n ? device.allocate(n * int64_t(sizeof(T)))
                               : nullptr)) {
    dev->account(n * int64_t(sizeof(T)));
  }
  DeviceArray(DeviceArray &&o) noexcept { swap(o); }
  DeviceArray &operator=(DeviceArray &&o) noexcept {
    swap(o);
    return *this;
  }
  DeviceArray(const DeviceArray &) = delete;
  DeviceArray &operator=(const DeviceArray &) = delete;
  ~DeviceArray() {
    if (ptr)
      dev->release(ptr);
    if (dev)
      dev->account(-count * int64_t(sizeof(T)));
  }
  T *data() { return ptr; }
  const T *data() const { return ptr; }
  int64_t size() const { return count; }
  /// Copies of the contents on the host.
  std::vector<T> download() const {
    std::vector<T> out(count);
    if (count)
      dev->toHost(out.data(), ptr, count * int64_t(sizeof(T)));
    return out;
  }
  void upload(const T *src, int64_t n, int64_t at = 0) {
    if (n)
      dev->toDevice(ptr + at, src, n * int64_t(sizeof(T)));
  }

private:
  void swap(DeviceArray &o) {
    std::swap(dev, o.dev);
    std::swap(count, o.count);
    std::swap(ptr, o.ptr);
  }
  Device *dev = nullptr;
  int64_t count = 0;
  T *ptr = nullptr;
};

} // namespace hypipe::rt

#endif
