//===- Kernels.h - the CUDA target's primitive set ------------------------===//
//
// What the layer recipes (runtime/kernels/recipes/) and the stage
// interpreter run on the GPU: one object holding the call's precision
// (RecipeBasics::activations) with the CUDA primitives (cuBLAS GEMMs -- on
// the tensor cores in a bf16 call --, the fused norms and activations) and
// the kernels of TargetKernels.inc, with the same parameter and saved-buffer
// layouts as the CPU's (LayerShapes.h with Target::Cuda). Every pointer is
// device memory; the work goes on the stream of cuda::context(). Kernels
// read sample boundaries (THD) from `Tokens::cuSeqlens`, a device copy of
// the host boundaries in `Tokens::shape`.
//
// This header is plain C++: the runtime includes it without CUDA headers.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_CUDA_KERNELS_H
#define HYPIPE_RUNTIME_KERNELS_CUDA_KERNELS_H

#include "core/model/BufferLayouts.h"
#include "core/model/LayerShapes.h"
#include "runtime/formats/StageProgram.h"
#include "runtime/kernels/StageArgs.h"
#include "runtime/kernels/recipes/Mlp.h"
#include "runtime/kernels/recipes/Primitives.h"

#include <cstdint>

namespace hypipe::rt::cuda {

/// One call's tokens: the host shape (counts, boundaries) and the device
/// copy of its boundaries (null when the microbatch is not packed).
struct Tokens {
  TokenShape shape;
  const int32_t *cuSeqlens = nullptr;
  int64_t tokens() const { return shape.tokens(); }
  /// The longest sequence of the call.
  int64_t maxLength() const {
    int64_t n = 0;
    for (int64_t i = 0; i < shape.sequences(); ++i)
      n = shape.length(i) > n ? shape.length(i) : n;
    return n;
  }
};

/// Copies `floats` floats between device buffers.
void copyFloats(float *dst, const float *src, int64_t floats);
/// Sets n floats to zero (Primitives.cuh's, for the recipes).
void zero(float *x, int64_t n);
/// dst[i] = src[i] rounded to the nearest bfloat16, on the stream.
void roundCopy(float *dst, const float *src, int64_t n);

// roundActivations, gemm, the linear layer, RMSNorm and the activations.
// Here a bf16 call rounds at the CPU kernels' points (roundCopy), so the
// targets agree up to the order of sums, and the linear layers' GEMMs run
// on the tensor cores (bf16 products, fp32 accumulation: exact on bf16
// values).
#include "runtime/kernels/SharedPrimitives.inc"

/// y += x over n floats.
void addInPlace(float *y, const float *x, int64_t n);

/// What every layer recipe takes of the target besides its kernels: the
/// call's precision, its host token shape, a copy, the residual add, the
/// rounding to the precision.
struct RecipeBasics {
  DType activations = DType::F32;
  static const TokenShape &shape(const Tokens &t) { return t.shape; }
  static void copy(float *dst, const float *src, int64_t n) {
    copyFloats(dst, src, n);
  }
  static void addInto(float *y, const float *x, int64_t n) {
    addInPlace(y, x, n);
  }
  static void zero(float *p, int64_t n) { cuda::zero(p, n); }
  void round(float *p, int64_t n) const { roundActivations(activations, p, n); }
};

struct Kernels : RecipeBasics {
  using Tokens = cuda::Tokens;
  /// A call's tokens: the stage's planned capacity, with the microbatch's
  /// sample boundaries when it is packed (host and device copies).
  static Tokens tokens(TokenShape capacity, const int32_t *hostCuSeqlens,
                       const int32_t *deviceCuSeqlens, int64_t numSeqs,
                       bool paddedTail, const int64_t *replicaTokens) {
    return {packedTokens(capacity, hostCuSeqlens, numSeqs, paddedTail,
                         replicaTokens),
            hostCuSeqlens ? deviceCuSeqlens : nullptr};
  }

  HYPIPE_MLP_PRIMITIVES(cuda)
#include "runtime/kernels/TargetKernels.inc"
};

} // namespace hypipe::rt::cuda

#endif
