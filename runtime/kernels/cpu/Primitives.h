//===- Primitives.h - CPU building blocks shared by the layer kernels -----===//
//
// Row-major float tensors. GEMMs go to OpenBLAS; the elementwise work around
// them (norms with the residual, activations with their gate) is fused into
// single passes here.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_CPU_PRIMITIVES_H
#define HYPIPE_RUNTIME_KERNELS_CPU_PRIMITIVES_H

#include "core/model/LayerShapes.h"
#include "runtime/formats/StageProgram.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace hypipe::rt::cpu {

// roundActivations, gemm, the linear layer, RMSNorm and the activations.
// bf16 is emulated in floats (docs/precision.md): each activation rounded
// to the nearest bfloat16 once it is complete, while statistics and weight
// gradients stay fp32. Here gemm is cblas_sgemm on one thread, a large one cut
// into tiles fixed by its shape and shared over the OpenMP threads, so the
// bits do not depend on their number.
#include "runtime/kernels/SharedPrimitives.inc"

/// e^x in float, written so loops over arrays vectorise (std::exp does not
/// without -ffast-math; the kernels build with -fno-trapping-math, which
/// lets std::floor vectorise): Cody-Waite reduction to r in [-ln2/2, ln2/2],
/// the degree-6 minimax polynomial of Cephes' expf, scaled by 2^n through the
/// exponent bits. Within 2 ulp of std::exp over [-87, 88]; arguments are
/// clamped there (below: 1.2e-38 instead of a denormal or 0).
inline float fastExp(float x) {
  x = std::min(std::max(x, -87.33654f), 88.0f);
  const float n = std::floor(x * 1.44269504088896341f + 0.5f);
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const int32_t bits = (int32_t(n) + 127) << 23;
  return y * __builtin_bit_cast(float, bits);
}

inline float sigmoid(float x) { return 1.0f / (1.0f + fastExp(-x)); }
inline float silu(float x) { return x * sigmoid(x); }
inline float siluGrad(float x) {
  float s = sigmoid(x);
  return s * (1.0f + x * (1.0f - s));
}
inline float softplus(float x) {
  return x > 20.0f ? x : std::log1p(std::exp(x));
}

/// y[i] += x[i] for n floats (a residual connection), over the threads.
void addResidual(int64_t n, const float *x, float *y);

/// What every layer recipe (runtime/kernels/recipes/) takes of the target
/// besides its kernels: the call's precision, the token shape, a copy, the
/// residual add, the rounding to the precision.
struct RecipeBasics {
  DType activations = DType::F32;
  static const TokenShape &shape(const TokenShape &t) { return t; }
  static void copy(float *dst, const float *src, int64_t n) {
    std::memcpy(dst, src, sizeof(float) * size_t(n));
  }
  static void addInto(float *y, const float *x, int64_t n) {
    addResidual(n, x, y);
  }
  static void zero(float *p, int64_t n) { std::fill(p, p + n, 0.0f); }
  void round(float *p, int64_t n) const { roundActivations(activations, p, n); }
};

/// The OpenBLAS core type to ask for (OPENBLAS_CORETYPE) when OpenBLAS took
/// this CPU for an older one than it is -- a virtual machine that hides its
/// CPU model is seen as "Prescott" (SSE3), with a fraction of the sgemm
/// rate (bench/results/train.md) -- or "" when its choice stands.
std::string preferredBlasCore();

/// Sets, where the user has not, OPENBLAS_CORETYPE to preferredBlasCore()
/// when that is not "". OpenBLAS reads it when it loads, so a process that
/// gets `true` must start again (execv) for it to apply. (OpenBLAS's own
/// threads are not used: setNumThreads gives it one.)
bool setOpenBlasEnvironment();

/// Number of threads the kernels' loops and gemm()'s tiles use (OpenMP);
/// OpenBLAS itself runs on one.
void setNumThreads(int threads);

/// A depthwise conv's weight [channels][taps] as [taps][channels] (so a
/// row's channels vectorise), in a buffer of the calling thread that lives
/// across calls (the Mamba and Gated DeltaNet convs).
const float *transposedTaps(int64_t channels, int64_t taps, const float *w);

/// First row of the sequence each of the t.tokens() rows belongs to, into
/// `first` (the caller's buffer, reused from step to step: nothing is
/// allocated once it has the size).
void sequenceStartOfRows(const TokenShape &t, std::vector<int64_t> &first);
/// For each row, the row `shift` places ahead in the same sequence, or -1
/// past its end (Megatron's roll_tensor with its zero fill, per sample):
/// where an MTP depth reads its tokens and labels. Into `ahead`, likewise.
void rowsAhead(const TokenShape &t, int64_t shift, std::vector<int64_t> &ahead);
int numThreads();

} // namespace hypipe::rt::cpu

#endif
