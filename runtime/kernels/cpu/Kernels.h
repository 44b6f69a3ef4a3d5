//===- Kernels.h - the CPU target's primitive set -------------------------===//
//
// What the layer recipes (runtime/kernels/recipes/) and the stage
// interpreter run on the CPU: one object holding the call's precision
// (RecipeBasics::activations) with the CPU's primitives (Primitives.h:
// OpenBLAS GEMMs, fused norms and activations) and the kernels of
// TargetKernels.inc. Row-major float tensors in host memory. Each layer's
// parameters lie in `Shape::params()`'s order; `saved` holds
// `Shape::savedFloats()` floats and `ws` `Shape::workspaceFloats()`
// (BufferLayouts.h); gradients accumulate (+=).
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_CPU_KERNELS_H
#define HYPIPE_RUNTIME_KERNELS_CPU_KERNELS_H

#include "core/model/BufferLayouts.h"
#include "core/model/LayerShapes.h"
#include "runtime/kernels/StageArgs.h"
#include "runtime/kernels/cpu/Primitives.h"
#include "runtime/kernels/recipes/Mlp.h"
#include "runtime/kernels/recipes/Primitives.h"

#include <cstdint>

namespace hypipe::rt::cpu {

struct Kernels : RecipeBasics {
  /// A call's token shape: the stage's planned capacity, with the
  /// microbatch's sample boundaries when it is packed (`cuSeqlens`
  /// non-null; the host copy is the one the CPU reads).
  using Tokens = TokenShape;
  static Tokens tokens(TokenShape capacity, const int32_t *cuSeqlens,
                       const int32_t *, int64_t numSeqs, bool paddedTail,
                       const int64_t *replicaTokens) {
    return packedTokens(capacity, cuSeqlens, numSeqs, paddedTail,
                        replicaTokens);
  }

  HYPIPE_MLP_PRIMITIVES(cpu)
#include "runtime/kernels/TargetKernels.inc"
};

} // namespace hypipe::rt::cpu

#endif
