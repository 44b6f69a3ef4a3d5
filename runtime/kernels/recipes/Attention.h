//===- Attention.h - the attention layer, written once over a target ------===//
//
// One recipe for both targets around their own attention core: RMSNorm,
// linear_qkv, RoPE (when the layer has it), the core, the output
// projection and the residual forward; the input gradient back through
// them; the two weight GEMMs. `P` is a target's primitive set (CPU:
// runtime/kernels/cpu/Attention.cpp, CUDA: runtime/kernels/cuda/
// Attention.cu): the linear and norm kernels under their own names, plus
// `copy(dst, src, n)`, `addInto(y, x, n)` (y += x), `round(p, n)`
// (docs/precision.md's rounding points), `shape(tokens)`, `rope(s, t, qkv,
// sign)` (q and k rotated by +angle, or -angle for gradients), and the core:
// `coreForward(s, t, a)` (a.qkv to a.ctx and each row's log-sum-exp in
// a.softmax) and `coreBackward(s, t, a, dctx, rows)` (a.dqkv whole, from the
// context's gradient; `rows` is [T, heads] of scratch). The saved layout is
// BufferLayouts.h's, so both targets keep the same tensors.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_RECIPES_ATTENTION_H
#define HYPIPE_RUNTIME_KERNELS_RECIPES_ATTENTION_H

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/recipes/Primitives.h"

namespace hypipe::rt::recipes {

template <class P> struct Attention {
  template <class Tokens>
  static void forward(const AttentionShape &s, const Tokens &t,
                      const float *params, const float *x, float *y,
                      float *saved) {
    const int64_t T = t.tokens(), Wd = s.qkvWidth(), Cw = s.contextWidth();
    const float *norm = params, *wQkv = norm + s.hidden,
                *wProj = wQkv + Wd * s.hidden;
    AttnSaved a = attnSaved(s, P::shape(t), saved);
    P::copy(a.x, x, T * s.hidden);
    P::rmsnormForward(T, s.hidden, x, norm, a.xn, a.rstd);
    P::round(a.xn, T * s.hidden);
    P::linearForward(T, s.hidden, Wd, a.xn, wQkv, a.qkv);
    P::round(a.qkv, T * Wd);
    if (s.rope) {
      P::rope(s, t, a.qkv, 1.0f);
      P::round(a.qkv, T * Wd);
    }
    // The core reads bf16 q, k and v and keeps its softmax statistics in
    // fp32; its output is an activation.
    P::coreForward(s, t, a);
    P::round(a.ctx, T * Cw);
    P::linearForward(T, Cw, s.hidden, a.ctx, wProj, y);
    P::round(y, T * s.hidden);
    P::addInto(y, x, T * s.hidden);
    P::round(y, T * s.hidden);
  }

  template <class Tokens>
  static void backwardInput(const AttentionShape &s, const Tokens &t,
                            const float *params, float *grads, float *saved,
                            const float *dy, float *dx, float *ws) {
    const int64_t T = t.tokens(), Wd = s.qkvWidth(), Cw = s.contextWidth();
    const float *norm = params, *wQkv = norm + s.hidden,
                *wProj = wQkv + Wd * s.hidden;
    AttnSaved a = attnSaved(s, P::shape(t), saved);
    float *dctx = ws;                 // [T, Cw]
    float *dxn = dctx + T * Cw;       // [T, hidden]
    float *rows = dxn + T * s.hidden; // [T, heads]: the core's scratch
    P::copy(a.dout, dy, T * s.hidden);
    P::linearBackwardInput(T, Cw, s.hidden, dy, wProj, dctx);
    P::round(dctx, T * Cw);
    P::coreBackward(s, t, a, dctx, rows);
    // dq, dk and dv are complete once the core is done; with RoPE the
    // rotated q and k and the projection's output are two tensors, each
    // gradient rounded.
    P::round(a.dqkv, T * Wd);
    if (s.rope) {
      P::rope(s, t, a.dqkv, -1.0f);
      P::round(a.dqkv, T * Wd);
    }
    P::linearBackwardInput(T, s.hidden, Wd, a.dqkv, wQkv, dxn);
    P::round(dxn, T * s.hidden);
    P::copy(dx, dy, T * s.hidden);
    P::rmsnormBackward(T, s.hidden, a.x, norm, a.rstd, dxn, dx, grads, true);
    P::round(dx, T * s.hidden);
  }

  template <class Tokens>
  static void backwardWeight(const AttentionShape &s, const Tokens &t,
                             const float *saved, float *grads) {
    const int64_t T = t.tokens(), Wd = s.qkvWidth(), Cw = s.contextWidth();
    AttnSaved a = attnSaved(s, P::shape(t), const_cast<float *>(saved));
    float *gQkv = grads + s.hidden, *gProj = gQkv + Wd * s.hidden;
    P::linearBackwardWeight(T, s.hidden, Wd, a.dqkv, a.xn, gQkv);
    P::linearBackwardWeight(T, Cw, s.hidden, a.dout, a.ctx, gProj);
  }
};

} // namespace hypipe::rt::recipes

#endif
