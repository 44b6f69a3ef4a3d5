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
/// The compute stream, as the cudaStream_t it is, for code that names no
/// CUDA type in its headers (the NCCL transport orders itself after it).
void *streamHandle();

// Streams and events for the transports, as opaque cudaStream_t and
// cudaEvent_t (made by this library's CUDA runtime, on the device open()
// selected). Failures throw CudaError.
void *createStream();
void destroyStream(void *stream);
void *createEvent();
void destroyEvent(void *event);
void recordEvent(void *event, void *stream);
/// Work queued on `stream` from now on waits for `event`.
void streamWaitEvent(void *stream, void *event);
/// True once the work before `event` has run.
bool eventDone(void *event);

} // namespace hypipe::rt::cuda

#endif
