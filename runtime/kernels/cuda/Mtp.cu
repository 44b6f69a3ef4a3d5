//===- Mtp.cu - multi-token prediction depths on the GPU ------------------===//
//
// The CPU kernel's sequence (runtime/kernels/cpu/Mtp.cpp) with the same
// saved layouts: input (embedding of the tokens `depth` places ahead and
// the previous hidden states, both normalised, concatenated [e' | h'],
// projected by eh_proj), the MTP pattern's layers (the ordinary layer
// kernels), output (final norm, the shared output layer and the loss of
// Head.cu against the labels `depth` places ahead). docs/model.md has the
// equations.
//
//===----------------------------------------------------------------------===//

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/cuda/Primitives.cuh"

namespace hypipe::rt::cuda {
namespace {

/// ids[i] = the token `shift` rows ahead of row i in its sequence, 0 past
/// its end (Megatron's roll_tensor with its zero fill, per sample).
__global__ void tokensAheadKernel(int64_t T, Seqs seqs, int shift,
                                  const int32_t *tokens, int32_t *ids) {
  const int64_t row = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= T)
    return;
  const int ahead = seqs.rowAhead(int(row), shift);
  ids[row] = ahead < 0 ? 0 : tokens[ahead];
}

/// T rows of n floats from rows `srcStride` floats apart to rows
/// `dstStride` apart (a half of [e' | h'] to or from its own buffer).
void copyRows(int64_t T, int64_t n, float *dst, int64_t dstStride,
              const float *src, int64_t srcStride) {
  if (T == 0)
    return;
  check(cudaMemcpy2DAsync(dst, sizeof(float) * dstStride, src,
                          sizeof(float) * srcStride, sizeof(float) * n,
                          size_t(T), cudaMemcpyDeviceToDevice, stream()),
        "row copy");
}

} // namespace

void Kernels::mtpInputForward(const MtpInputShape &s, const Tokens &t,
                              const float *params, const float *table,
                              const int32_t *tokens, const float *hPrev,
                              float *y, float *saved, float *ws) const {
  const int64_t T = t.tokens(), H = s.hidden;
  if (T == 0)
    return;
  const float *enorm = params, *hnorm = params + H, *w = params + 2 * H;
  MtpInputSaved m = mtpInputSaved(s, t.shape, saved);
  tokensAheadKernel<<<blocksFor(T), 256, 0, stream()>>>(
      T, seqsOf(t), int(s.depth), tokens, m.ids);
  launched("MTP tokens ahead");
  gatherRows(T, H, table, m.ids, m.e);
  copyFloats(m.h, hPrev, T * H);
  float *en = ws, *hn = ws + T * H;
  rmsnormForward(T, H, m.e, enorm, en, m.rstdE);
  rmsnormForward(T, H, m.h, hnorm, hn, m.rstdH);
  roundActivations(activations, en, 2 * T * H); // en and hn, side by side in ws
  copyRows(T, H, m.cat, 2 * H, en, H);
  copyRows(T, H, m.cat + H, 2 * H, hn, H);
  linearForward(T, 2 * H, H, m.cat, w, y);
  roundActivations(activations, y, T * H);
}

void Kernels::mtpInputBackwardInput(const MtpInputShape &s, const Tokens &t,
                                    const float *params, float *grads,
                                    float *saved, const float *dy,
                                    float *dhPrev, float *ws) const {
  const int64_t T = t.tokens(), H = s.hidden;
  if (T == 0)
    return;
  const float *enorm = params, *hnorm = params + H, *w = params + 2 * H;
  MtpInputSaved m = mtpInputSaved(s, t.shape, saved);
  copyFloats(m.dOut, dy, T * H); // for the weight pass
  // d[e' | h'] = dy W, one GEMM per half of W's columns, so that each half
  // lands in its own [T, H] buffer for its norm's backward (the CPU copies
  // the halves out of one [T, 2H] product: the same sums).
  float *dEn = ws, *dHn = ws + T * H;
  gemm(false, false, T, H, H, 1.0f, dy, H, w, 2 * H, 0.0f, dEn, H);
  gemm(false, false, T, H, H, 1.0f, dy, H, w + H, 2 * H, 0.0f, dHn, H);
  roundActivations(activations, dEn,
                   2 * T * H); // bf16: Mtp.cpp's rounding points
  rmsnormBackward(T, H, m.e, enorm, m.rstdE, dEn, m.dE, grads, false);
  roundActivations(activations, m.dE, T * H);
  // dhPrev is a part of the previous normed output's gradient, rounded
  // once the head (or the previous depth) has added it.
  rmsnormBackward(T, H, m.h, hnorm, m.rstdH, dHn, dhPrev, grads + H, false);
}

void Kernels::mtpInputBackwardWeight(const MtpInputShape &s, const Tokens &t,
                                     const float *saved, float *grads,
                                     float *tableGrads) const {
  const int64_t T = t.tokens(), H = s.hidden;
  MtpInputSaved m = mtpInputSaved(s, t.shape, const_cast<float *>(saved));
  linearBackwardWeight(T, 2 * H, H, m.dOut, m.cat, grads + 2 * H);
  scatterAddRows(T, H, m.ids, m.dE, tableGrads);
}

} // namespace hypipe::rt::cuda
