//===- StageRunnerCuda.cpp - the CUDA instantiation of the interpreter ----===//
//
// Plain C++ over runtime/kernels/cuda/Layers.h (host entry points of the
// CUDA kernel library); built only where hypipe is built with CUDA.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/StageInterpreter.h"
#include "runtime/exec/StageRunner.h"
#include "runtime/kernels/cuda/Layers.h"

#include <utility>

namespace hypipe::rt {
namespace {

#define HYPIPE_FORWARD_KERNEL(name) HYPIPE_FORWARD_TO(cuda, name)

/// runtime/kernels/cuda/Layers.h, as StageInterpreter takes it.
struct CudaKernels {
  using Tokens = cuda::Tokens;
  static Tokens tokens(TokenShape capacity, const int32_t *cuSeqlens,
                       const int32_t *deviceCuSeqlens, int64_t numSeqs) {
    return cuda::withBoundaries(capacity, cuSeqlens, deviceCuSeqlens, numSeqs);
  }
  static void copy(float *dst, const float *src, int64_t floats) {
    cuda::copyFloats(dst, src, floats);
  }
  HYPIPE_STAGE_KERNELS(HYPIPE_FORWARD_KERNEL)
};

#undef HYPIPE_FORWARD_KERNEL

} // namespace

void runCudaStagePass(const StageProgram &program, StagePass pass,
                      StageArgs &args) {
  runStagePassOn<CudaKernels>(program, pass, args);
}

} // namespace hypipe::rt
