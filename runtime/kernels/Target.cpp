//===- Target.cpp - what a hypipe built without CUDA says about GPUs ------===//

#include "runtime/kernels/Target.h"

#include <stdexcept>

namespace hypipe::rt {

#ifndef HYPIPE_HAVE_CUDA
std::unique_ptr<Device> makeCudaDevice(int) {
  throw std::runtime_error(
      "error: this artifact runs on a CUDA GPU, and this hypipe-run was built "
      "without CUDA\nhelp: rebuild with the CUDA toolkit at /usr/local/cuda "
      "(or CUDAToolkit_ROOT), or compile the spec with --target cpu");
}

int cudaDeviceCount() { return 0; }
std::string cudaDeviceId(int) { return ""; }
#endif

} // namespace hypipe::rt
