//===- CudaTarget.cpp - the cuda target's stage-running entry -------------===//
//
// Plain C++ over the CUDA kernel library's primitive set (cuda/Kernels.h),
// in the program's precision; built only where hypipe is built with CUDA.
//
//===----------------------------------------------------------------------===//

#include "runtime/kernels/cuda/CudaTarget.h"
#include "runtime/formats/RuntimeError.h"
#include "runtime/kernels/StageInterpreter.h"
#include "runtime/kernels/cuda/Kernels.h"

namespace hypipe::rt {
namespace {

void runCudaStagePass(const StageProgram &program, StagePass pass,
                      StageArgs &args) {
  if (program.target != Target::Cuda)
    throw RuntimeError("error: the artifact's stages are compiled for cpu, "
                       "and this rank runs them on a GPU\nhelp: compile the "
                       "spec with --target cuda");
  cuda::Kernels kernels;
  kernels.activations = program.activations;
  runStagePassOn(kernels, program, pass, args);
}

} // namespace

std::unique_ptr<Device> makeCudaDevice(int ordinal) {
  return cuda::openTarget(ordinal, runCudaStagePass);
}

} // namespace hypipe::rt
