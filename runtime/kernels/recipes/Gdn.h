//===- Gdn.h - the Gated DeltaNet mixer, written once over a target -------===//
//
// One recipe for both targets around their own conv, gate, rule and
// out-norm kernels: RMSNorm, in_proj, the conv with its SiLU, the L2 norms
// of q and k with g and beta, the chunked gated delta rule, the out norm
// times SiLU(z), out_proj and the residual forward; the input gradient back
// through them; the two weight GEMMs. The rounding points
// (docs/precision.md) are here, so both targets keep them alike: those of
// test/reference/torch_reference.py's gated_delta_net. `P` is a target's
// primitive set (cpu/Kernels.h, cuda/Kernels.h; the kernels in each
// target's Gdn file): RecipeBasics, the linear and norm kernels, and
//   gdnConvForward(s, t, p, m)      m.proj's [q k v] to m.conv (SiLU'd)
//   gdnGatesForward(s, t, p, m)     m.conv's q, k to m.qk (L2-normalised)
//                                   and m.qkInv; m.proj's beta and alpha
//                                   to m.beta and m.g
//   gdnRuleForward(s, t, m, ws)     m.qk, m.conv's v, m.g, m.beta to m.o
//                                   and m.states
//   gdnNormForward(s, t, p, m)      m.o, z to m.orstd and m.normed
//   gdnNormBackward(s, t, p, gp, m, dnormed, dO)
//                                   dO, z's gradient in m.dproj, the out
//                                   norm's weight gradient
//   gdnRuleBackward(s, t, m, dO, dqk, dconv, dg, dbeta, ws)
//                                   q's and k's gradients per value head
//                                   (dqk [T, 2, value heads, dk]), v's in
//                                   dconv, g's and beta's
//   gdnGatesBackward(s, t, p, gp, m, dqk, dg, dbeta, dconv)
//                                   q's and k's in dconv (through the L2
//                                   norms), beta's and alpha's in m.dproj,
//                                   A_log's and dt_bias's gradients
//   gdnConvBackward(s, t, p, gp, m, dconv)
//                                   the SiLU's and the conv's input
//                                   gradients into m.dproj's [q k v], the
//                                   conv weight's gradient
// A call of no tokens does nothing (the GPU launches nothing for it).
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_RECIPES_GDN_H
#define HYPIPE_RUNTIME_KERNELS_RECIPES_GDN_H

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/recipes/Primitives.h"

namespace hypipe::rt::recipes {

/// Where the input gradient's pass keeps its tensors in the workspace
/// (GdnShape::workspaceFloats), the rule's scratch last (the forward's too).
struct GdnWorkspace {
  float *dnormed, *dO, *dconv, *dqk, *dg, *dbeta, *dxn, *scratch;
  GdnWorkspace(const GdnShape &s, int64_t T, float *ws) {
    dnormed = ws;                                   // [T, value width]
    dO = dnormed + T * s.valueWidth();              // [T, value width]
    dconv = dO + T * s.valueWidth();                // [T, conv channels]
    dqk = dconv + T * s.convChannels();             // [T, 2, nv, dk]
    dg = dqk + T * 2 * s.valueHeads * s.keyHeadDim; // [T, nv]
    dbeta = dg + T * s.valueHeads;                  // [T, nv]
    dxn = dbeta + T * s.valueHeads;                 // [T, hidden]
    scratch = dxn + T * s.hidden;                   // [nv, rule scratch]
  }
};

template <class P> struct Gdn {
  /// The target's primitives, in the call's precision.
  const P &k;
  /// The call's tensor-parallel collectives (null: the layer is whole).
  /// Over tp ranks a rank holds a tp-th of the key and value heads (in_proj
  /// and conv1d cut by section, dt_bias and A_log by head, out_proj by
  /// columns) and runs them as a whole layer of that many heads; in_proj's
  /// input and out_proj's output cross ranks as Mamba's do. The out norm's
  /// weight, which every head shares, gets its heads' part of the gradient
  /// (ParamSpec::sharedByHeads: summed over the group).
  TensorParallelCalls *tp = nullptr;

  template <class Tokens>
  void forward(const GdnShape &s, const Tokens &t, const float *params,
               const float *x, float *y, const SavedBases &saved,
               float *ws) const {
    const int64_t T = t.tokens(), W = s.inProj(), V = s.valueWidth();
    if (T == 0)
      return;
    GdnParams<const float> p = gdnParams(s, params);
    GdnSaved m = gdnSaved(s, k.shape(t), saved);
    const SequenceShard q = sequenceShard(tp, T);
    k.copy(m.x, x, q.local * s.hidden);
    normedInput(k, tp, q, s.hidden, x, p.norm, m.xn, m.rstd);
    k.linearForward(T, s.hidden, W, m.xn, p.inProj, m.proj);
    k.round(m.proj, T * W);
    // The conv and its SiLU are one kernel (causal_conv1d's): one rounding.
    k.gdnConvForward(s, t, p, m);
    k.round(m.conv, T * s.convChannels());
    // The L2 norms, g and beta stay fp32 into the rule (fla's kernels
    // compute them inside theirs).
    k.gdnGatesForward(s, t, p, m);
    k.gdnRuleForward(s, t, m, ws);
    k.round(m.o, T * V);
    normOut(s, t, p, m);
    k.linearForward(T, V, s.hidden, m.normed, p.outProj, y);
    residualOutput(k, tp, q, s.hidden, x, y);
  }

  /// Selective recompute of gdn_norm_out: the dropped out norm's output
  /// again, before the input gradient.
  template <class Tokens>
  void recompute(const GdnShape &s, const Tokens &t, const float *params,
                 const SavedBases &saved) const {
    if (t.tokens() == 0)
      return;
    GdnSaved m = gdnSaved(s, k.shape(t), saved);
    normOut(s, t, gdnParams(s, params), m);
  }

  template <class Tokens>
  void backwardInput(const GdnShape &s, const Tokens &t, const float *params,
                     float *grads, const SavedBases &saved, const float *dy,
                     float *dx, float *ws) const {
    const int64_t T = t.tokens(), W = s.inProj(), V = s.valueWidth();
    if (T == 0)
      return;
    GdnParams<const float> p = gdnParams(s, params);
    GdnParams<float> gp = gdnParams(s, grads);
    GdnSaved m = gdnSaved(s, k.shape(t), saved);
    GdnWorkspace w(s, T, ws);

    const SequenceShard q = sequenceShard(tp, T);
    wholeGradient(k, tp, q, s.hidden, dy, m.dout);
    k.linearBackwardInput(T, V, s.hidden, m.dout, p.outProj, w.dnormed);
    k.round(w.dnormed, T * V);
    k.gdnNormBackward(s, t, p, gp, m, w.dnormed, w.dO);
    k.round(w.dO, T * V);
    k.gdnRuleBackward(s, t, m, w.dO, w.dqk, w.dconv, w.dg, w.dbeta, w.scratch);
    k.gdnGatesBackward(s, t, p, gp, m, w.dqk, w.dg, w.dbeta, w.dconv);
    // The conv output's whole gradient (q, k through their norms, and v).
    k.round(w.dconv, T * s.convChannels());
    k.gdnConvBackward(s, t, p, gp, m, w.dconv);
    // in_proj's input gradient, then the pre-norm with the residual fused.
    k.round(m.dproj, T * W);
    k.linearBackwardInput(T, s.hidden, W, m.dproj, p.inProj, w.dxn);
    preNormBackward(k, tp, q, s.hidden, m.x, p.norm, m.rstd, w.dxn, dy, dx,
                    gp.norm);
  }

  template <class Tokens>
  void backwardWeight(const GdnShape &s, const Tokens &t,
                      const SavedBases &saved, float *grads) const {
    const int64_t T = t.tokens();
    GdnSaved m = gdnSaved(s, k.shape(t), saved);
    GdnParams<float> gp = gdnParams(s, grads);
    k.linearBackwardWeight(T, s.hidden, s.inProj(), m.dproj, m.xn, gp.inProj);
    k.linearBackwardWeight(T, s.valueWidth(), s.hidden, m.dout, m.normed,
                           gp.outProj);
  }

private:
  /// The norm and the gate are one kernel (FusedRMSNormGated): its output
  /// is rounded.
  template <class Tokens>
  void normOut(const GdnShape &s, const Tokens &t,
               const GdnParams<const float> &p, GdnSaved &m) const {
    k.gdnNormForward(s, t, p, m);
    k.round(m.normed, t.tokens() * s.valueWidth());
  }
};

} // namespace hypipe::rt::recipes

#endif
