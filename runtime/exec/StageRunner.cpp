//===- StageRunner.cpp - the CPU instantiation of the stage interpreter ---===//

#include "runtime/exec/StageRunner.h"

#include "runtime/exec/StageInterpreter.h"
#include "runtime/formats/Artifact.h"
#include "runtime/kernels/cpu/Layers.h"
#include "runtime/kernels/cpu/Primitives.h"

#include <cstring>
#include <utility>

namespace hypipe::rt {
namespace {

#define HYPIPE_FORWARD_KERNEL(name) HYPIPE_FORWARD_TO(cpu, name)

/// runtime/kernels/cpu/Layers.h, as StageInterpreter takes it.
struct CpuKernels {
  using Tokens = TokenShape;
  static Tokens tokens(TokenShape capacity, const int32_t *cuSeqlens,
                       const int32_t *, int64_t numSeqs) {
    return cpu::withBoundaries(capacity, cuSeqlens, numSeqs);
  }
  static void copy(float *dst, const float *src, int64_t floats) {
    std::memcpy(dst, src, sizeof(float) * size_t(floats));
  }
  HYPIPE_STAGE_KERNELS(HYPIPE_FORWARD_KERNEL)
};

#undef HYPIPE_FORWARD_KERNEL

} // namespace

void runStagePass(const StageProgram &program, StagePass pass,
                  StageArgs &args) {
  if (program.target == Target::Cpu) {
    return runStagePassOn<CpuKernels>(program, pass, args);
  }
#if HYPIPE_HAVE_CUDA
  return runCudaStagePass(program, pass, args);
#else
  throw RuntimeError("error: this hypipe-run was built without CUDA, and the "
                     "artifact's stages are compiled for cuda\nhelp: run it "
                     "with a hypipe built with the CUDA toolkit, or compile "
                     "the spec with --target cpu");
#endif
}

} // namespace hypipe::rt
