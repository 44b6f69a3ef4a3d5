//===- Mamba.h - the Mamba-2 mixer, written once over a target ------------===//
//
// One recipe for both targets around their own conv, scan and gated-norm
// kernels: RMSNorm, in_proj, the conv with its SiLU (and dt's softplus),
// the SSD scan, the gated group RMSNorm, out_proj and the residual forward;
// the input gradient back through them; the two weight GEMMs. The rounding
// points (docs/precision.md) are here, so both targets keep them alike.
// `P` is a target's primitive set (cpu/Kernels.h, cuda/Kernels.h; the
// kernels in each target's Mamba file): RecipeBasics, the linear and norm
// kernels under their own names (recipes/Primitives.h), and
//   convForward(s, t, p, m)             m.zxbcdt to m.xbc (SiLU'd) and m.dt
//   scanForward(s, t, p, m, ws)         m.xbc, m.dt to m.y, m.states
//   gatedNormForward(s, t, p, m)        m.y, z to m.gated, m.grstd, m.normed
//   gatedNormBackward(s, t, p, gp, m, dnormed, dyScan)
//                                       dyScan, z's gradient in m.dzxbcdt,
//                                       and the norm's weight gradient
//   scanBackward(s, t, p, gp, m, dyScan, dxbc, dtGrad, scratch)
//                                       dxbc (whole), dtGrad, A's and D's
//                                       gradients
//   convBackward(s, t, p, gp, m, dxbc, dtGrad)
//                                       dt's, the SiLU's and the conv's
//                                       input gradients into m.dzxbcdt, the
//                                       conv's and dt_bias's gradients
// A call of no tokens does nothing (the GPU launches nothing for it).
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_RECIPES_MAMBA_H
#define HYPIPE_RUNTIME_KERNELS_RECIPES_MAMBA_H

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/recipes/Primitives.h"

namespace hypipe::rt::recipes {

template <class P> struct Mamba {
  /// The target's primitives, in the call's precision.
  const P &k;
  /// The call's tensor-parallel collectives (null: the layer is whole).
  /// Split by heads and groups, in_proj is column-parallel (section by
  /// section), the conv, the scan and the gated norm stay within a rank and
  /// out_proj is row-parallel: the output's and the input gradient's
  /// partial sums are summed over the group.
  TensorParallelCalls *tp = nullptr;

  template <class Tokens>
  void forward(const MambaShape &s, const Tokens &t, const float *params,
               const float *x, float *y, float *saved, float *ws) const {
    const int64_t T = t.tokens(), I = s.inner(), W = s.inProj();
    if (T == 0)
      return;
    MambaParams<const float> p = mambaParams(s, params);
    MambaSaved m = mambaSaved(s, k.shape(t), saved);
    const SequenceShard q = sequenceShard(tp, T);
    k.copy(m.x, x, q.local * s.hidden);
    normedInput(k, tp, q, s.hidden, x, p.norm, m.xn, m.rstd);
    k.linearForward(T, s.hidden, W, m.xn, p.inProj, m.zxbcdt);
    k.round(m.zxbcdt, T * W);
    // The conv and its SiLU are one kernel (causal_conv1d's): one rounding.
    // dt stays fp32 (softplus inside the scan's kernel, as mamba_ssm does).
    k.convForward(s, t, p, m);
    k.round(m.xbc, T * s.convChannels());
    k.scanForward(s, t, p, m, ws);
    k.round(m.y, T * I);
    // The gate and the group norm are one kernel (RMSNormGated): the gated
    // product stays fp32, the normed output is rounded.
    k.gatedNormForward(s, t, p, m);
    k.round(m.normed, T * I);
    k.linearForward(T, I, s.hidden, m.normed, p.outProj, y);
    residualOutput(k, tp, q, s.hidden, x, y);
  }

  template <class Tokens>
  void backwardInput(const MambaShape &s, const Tokens &t, const float *params,
                     float *grads, float *saved, const float *dy, float *dx,
                     float *ws) const {
    const int64_t T = t.tokens(), I = s.inner(), W = s.inProj(),
                  Cc = s.convChannels();
    if (T == 0)
      return;
    MambaParams<const float> p = mambaParams(s, params);
    MambaParams<float> gp = mambaParams(s, grads);
    MambaSaved m = mambaSaved(s, k.shape(t), saved);
    float *dnormed = ws;               // [T, I]
    float *dyScan = dnormed + T * I;   // [T, I]
    float *dxbc = dyScan + T * I;      // [T, Cc]: after the SiLU
    float *dtGrad = dxbc + T * Cc;     // [T, heads]
    float *dxn = dtGrad + T * s.heads; // [T, hidden]
    float *scratch = dxn + T * s.hidden;

    const SequenceShard q = sequenceShard(tp, T);
    wholeGradient(k, tp, q, s.hidden, dy, m.dout);
    k.linearBackwardInput(T, I, s.hidden, m.dout, p.outProj, dnormed);
    k.round(dnormed, T * I);
    k.gatedNormBackward(s, t, p, gp, m, dnormed, dyScan);
    k.round(dyScan, T * I);
    k.scanBackward(s, t, p, gp, m, dyScan, dxbc, dtGrad, scratch);
    // The gradient of the conv's output (x, B, C); dt's stays fp32 into the
    // softplus, inside the scan's kernel.
    k.round(dxbc, T * Cc);
    k.convBackward(s, t, p, gp, m, dxbc, dtGrad);
    // in_proj's input gradient, then the pre-norm with the residual fused.
    k.round(m.dzxbcdt, T * W);
    k.linearBackwardInput(T, s.hidden, W, m.dzxbcdt, p.inProj, dxn);
    preNormBackward(k, tp, q, s.hidden, m.x, p.norm, m.rstd, dxn, dy, dx,
                    gp.norm);
  }

  template <class Tokens>
  void backwardWeight(const MambaShape &s, const Tokens &t, const float *saved,
                      float *grads) const {
    const int64_t T = t.tokens();
    MambaSaved m = mambaSaved(s, k.shape(t), const_cast<float *>(saved));
    MambaParams<float> gp = mambaParams(s, grads);
    k.linearBackwardWeight(T, s.hidden, s.inProj(), m.dzxbcdt, m.xn, gp.inProj);
    k.linearBackwardWeight(T, s.inner(), s.hidden, m.dout, m.normed,
                           gp.outProj);
  }
};

} // namespace hypipe::rt::recipes

#endif
