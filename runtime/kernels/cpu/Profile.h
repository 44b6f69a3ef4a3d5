//===- Profile.h - step time by kernel class ------------------------------===//
//
// `hypipe-run --profile` splits a rank's wall time into kernel classes. A
// ProfileScope charges the time until it ends to its class and pauses the
// class around it, so the classes are exclusive and add up to the time
// measured. Only the thread that turned profiling on records: scopes opened
// inside the kernels' own parallel loops (a per-head GEMM inside attention)
// count as the class of the loop, at any thread count (a one-thread
// parallel region is still a region).
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_CPU_PROFILE_H
#define HYPIPE_RUNTIME_KERNELS_CPU_PROFILE_H

#include <array>
#include <cstdint>

namespace hypipe::rt::cpu {

enum class KernelClass : int {
  Other, // outside every scope: the runtime's own bookkeeping
  Gemm,  // top-level OpenBLAS products (projections, output layer)
  Scan,
  Conv,
  Attention,
  Norm,
  Elementwise, // activations, residuals, embedding, softmax + cross-entropy
  MoeRouting,  // router softmax, top-k, gather and scatter
  Optimizer,   // AdamW, gradient norm
  Communication,
};
constexpr int kNumKernelClasses = int(KernelClass::Communication) + 1;

const char *kernelClassName(KernelClass c);

/// Starts (or restarts) recording on the calling thread with every class at
/// zero; `false` stops recording.
void setProfiling(bool on);

/// Seconds per class since setProfiling(true), the open class included up to
/// now.
std::array<double, kNumKernelClasses> profileSeconds();

class ProfileScope {
public:
  explicit ProfileScope(KernelClass c);
  ~ProfileScope();
  ProfileScope(const ProfileScope &) = delete;
  ProfileScope &operator=(const ProfileScope &) = delete;

private:
  bool active;
  KernelClass outer;
};

} // namespace hypipe::rt::cpu

#endif
