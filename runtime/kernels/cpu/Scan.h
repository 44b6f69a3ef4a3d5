//===- Scan.h - Mamba-2's SSD scan on the CPU -----------------------------===//
//
// The scan of one microbatch, on the mixer's post-conv rows. Row layouts
// are the layer's: `xbc` [T, convChannels] = x | B | C, `dt` [T, heads]
// after softplus, `y` and `dy` [T, inner]; A = -exp(A_log) per head. `states`
// is the layer's saved [chunk][head][headDim x state]: the state entering every
// kScanChunk-th row (zero where a sequence starts). `ws` holds
// scanWorkspaceFloats().
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_CPU_SCAN_H
#define HYPIPE_RUNTIME_KERNELS_CPU_SCAN_H

#include "core/model/LayerShapes.h"

#include <cstdint>

namespace hypipe::rt::cpu {

int64_t scanWorkspaceFloats(const MambaShape &s, const TokenShape &t);

/// y = the scan's output (D x included); writes `states`.
void scanForward(const MambaShape &s, const TokenShape &t, const float *xbc,
                 const float *dt, const float *aLog, const float *D, float *y,
                 float *states, float *ws);

/// From dy: dxbc's x, B and C columns (added to; zero them first), ddt
/// (written), and the A_log and D gradients (added to).
void scanBackward(const MambaShape &s, const TokenShape &t, const float *xbc,
                  const float *dt, const float *aLog, const float *D,
                  const float *states, const float *dy, float *dxbc, float *ddt,
                  float *gALog, float *gD, float *ws);

} // namespace hypipe::rt::cpu

#endif
