//===- Context.h - the CUDA device a process runs on ----------------------===//
//
// One device, one stream and one cuBLAS handle per process, shared by the
// runtime and every stage library (they all link libhypipe_kernels_cuda).
// Plain C++: no CUDA header.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_CUDA_CONTEXT_H
#define HYPIPE_RUNTIME_KERNELS_CUDA_CONTEXT_H

#include <cstdint>
#include <stdexcept>
#include <string>

namespace hypipe::rt::cuda {

/// A CUDA or cuBLAS call failed; the message says which and why.
struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int major = 0, minor = 0;
  int64_t totalBytes = 0, freeBytes = 0;
};

/// Selects device `ordinal` and creates the stream and cuBLAS handle (once).
/// Throws CudaError with a message for users when no device is usable.
DeviceInfo open(int ordinal);
/// The number of visible devices (0 when the driver or a device is missing).
int deviceCount();
/// Waits for all work on the stream.
void synchronize();

} // namespace hypipe::rt::cuda

#endif
