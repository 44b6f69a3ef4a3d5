//===- Moe.h - what the MoE layer does alike on both targets --------------===//
//
// The parts of the MoE layer whose sequence of primitives is the same on
// the CPU and the GPU, written once over a target's linear kernels; the
// routing, gathering and scattering differ (on the GPU the dispatch sizes
// come back to the host) and stay in each target's file.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_RECIPES_MOE_H
#define HYPIPE_RUNTIME_KERNELS_RECIPES_MOE_H

#include "core/model/BufferLayouts.h"

#include <vector>

namespace hypipe::rt::recipes {

/// Every expert's two weight gradients over the rows routed to it: `off`
/// holds the experts' first rows (expertOffsets), `linearBackwardWeight` the
/// target's kernel.
template <class LinearBackwardWeight>
void moeExpertWeightGradients(LinearBackwardWeight linearBackwardWeight,
                              const MoeShape &s, const MoeSaved &m,
                              const std::vector<int64_t> &off, float *grads) {
  const int64_t Hd = s.hidden;
  MoeParams<float> gp = moeParams(s, grads);
  for (int64_t e = 0; e < s.experts; ++e) {
    int64_t r0 = off[e], n = off[e + 1] - off[e];
    if (n == 0)
      continue;
    linearBackwardWeight(n, Hd, s.fc1Width(), m.dh1 + r0 * s.fc1Width(),
                         m.xr + r0 * Hd, gp.w1(s, e));
    linearBackwardWeight(n, s.ffn, Hd, m.dyr + r0 * Hd, m.act + r0 * s.ffn,
                         gp.w2(s, e));
  }
}

} // namespace hypipe::rt::recipes

#endif
