//===- EmitStage.cpp - translate a planned stage to CUDA C++ --------------===//

#include "targets/cuda/EmitStage.h"

#include "targets/cpu/EmitStage.h"

namespace hypipe::cuda {

std::string emitStageCuda(const cpu::StagePlan &plan,
                          const std::string &modelName) {
  static const cpu::StageFlavour flavour = {
      "runtime/kernels/cuda/Layers.h", "hypipe::rt::cuda", "HYPIPE_TARGET_CUDA",
      "const Tokens t = withBoundaries(kTokens, a->cu_seqlens, "
      "a->cu_seqlens_device, a->num_seqs);",
      "copyFloats({dst}, {src}, t.tokens() * kHidden);"};
  return cpu::emitStage(plan, modelName, flavour);
}

} // namespace hypipe::cuda
