//===- Optimizer.h - AdamW and the gradient norm on the CPU ---------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_CPU_OPTIMIZER_H
#define HYPIPE_RUNTIME_KERNELS_CPU_OPTIMIZER_H

#include <algorithm>
#include <cstdint>
#include <vector>

namespace hypipe::rt {

/// One AdamW update of a parameter (the trainer's fp32 state,
/// docs/runtime.md); the host and CUDA devices take the same.
struct AdamWStep {
  double lr, beta1, beta2, eps;
  double c1, c2;    ///< bias corrections 1 - beta^step
  float decay;      ///< 1 - lr * weight_decay, or 1
  double clipScale; ///< gradient clipping factor
};

/// A run of a stage's flat buffer the optimizer treats alike (one
/// parameter, or its part in this rank's shard): floats [begin, end), with
/// or without weight decay. A step's optimizer goes over a list of them in
/// one pass, so that threads share the whole buffer rather than each
/// parameter apart.
struct ParamSegment {
  int64_t begin = 0, end = 0;
  bool decay = false;
};

namespace cpu {

/// w, m, v updated in place from g over `segments` (indices into w and g;
/// the moments are indexed from `momentBase`: m[i - momentBase]).
/// Segments without decay use 1 for `s.decay`.
void adamwUpdate(const AdamWStep &s, const std::vector<ParamSegment> &segments,
                 float *w, const float *g, float *m, float *v,
                 int64_t momentBase);

/// start + the sum of x[i]^2 over `segments`, in the same order at any
/// thread count: each segment in blocks of a fixed size, blocks in order.
double sumOfSquares(const float *x, const std::vector<ParamSegment> &segments,
                    double start);

} // namespace cpu
} // namespace hypipe::rt

#endif
