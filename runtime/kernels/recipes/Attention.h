//===- Attention.h - the attention layer, written once over a target ------===//
//
// One recipe for both targets around their own attention core: RMSNorm,
// linear_qkv, RoPE (when the layer has it), the core, the output
// projection and the residual forward; the input gradient back through
// them; the two weight GEMMs. `P` is a target's primitive set
// (cpu/Kernels.h, cuda/Kernels.h; the cores in each target's Attention
// file): the linear and norm kernels under their own names, plus
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
  /// The target's primitives, in the call's precision.
  const P &k;
  /// The call's tensor-parallel collectives (null: the layer is whole).
  /// Split by query groups, linear_qkv is column-parallel and linear_proj
  /// row-parallel: the output's and the input gradient's partial sums are
  /// summed over the group.
  TensorParallelCalls *tp = nullptr;

  template <class Tokens>
  void forward(const AttentionShape &s, const Tokens &t, const float *params,
               const float *x, float *y, const SavedBases &saved,
               float *) const {
    const int64_t T = t.tokens(), Wd = s.qkvWidth(), Cw = s.contextWidth();
    const float *norm = params, *wQkv = norm + s.hidden,
                *wProj = wQkv + Wd * s.hidden;
    AttnSaved a = attnSaved(s, k.shape(t), saved);
    const SequenceShard q = sequenceShard(tp, T);
    k.copy(a.x, x, q.local * s.hidden);
    normedInput(k, tp, q, s.hidden, x, norm, a.xn, a.rstd);
    k.linearForward(T, s.hidden, Wd, a.xn, wQkv, a.qkv);
    k.round(a.qkv, T * Wd);
    if (s.rope) {
      k.rope(s, t, a.qkv, 1.0f);
      k.round(a.qkv, T * Wd);
    }
    core(s, t, a);
    k.linearForward(T, Cw, s.hidden, a.ctx, wProj, y);
    residualOutput(k, tp, q, s.hidden, x, y);
  }

  /// Selective recompute: the tensors of the modules `saved` drops,
  /// computed again from the kept ones exactly as the forward computed
  /// them (the normed input from x; the core's log-sum-exp and context
  /// from q, k and v).
  template <class Tokens>
  void recompute(const AttentionShape &s, const Tokens &t, const float *params,
                 const SavedBases &saved) const {
    AttnSaved a = attnSaved(s, k.shape(t), saved);
    if (saved.drops(RecomputeModule::LayerNorm))
      normedInput(k, tp, sequenceShard(tp, t.tokens()), s.hidden, a.x, params,
                  a.xn, a.rstd);
    if (saved.drops(RecomputeModule::CoreAttn))
      core(s, t, a);
  }

private:
  /// The core reads bf16 q, k and v and keeps its softmax statistics in
  /// fp32; its output, the context, is an activation.
  template <class Tokens>
  void core(const AttentionShape &s, const Tokens &t, AttnSaved &a) const {
    k.coreForward(s, t, a);
    k.round(a.ctx, t.tokens() * s.contextWidth());
  }

public:
  template <class Tokens>
  void backwardInput(const AttentionShape &s, const Tokens &t,
                     const float *params, float *grads, const SavedBases &saved,
                     const float *dy, float *dx, float *ws) const {
    const int64_t T = t.tokens(), Wd = s.qkvWidth(), Cw = s.contextWidth();
    const float *norm = params, *wQkv = norm + s.hidden,
                *wProj = wQkv + Wd * s.hidden;
    AttnSaved a = attnSaved(s, k.shape(t), saved);
    float *dctx = ws;                 // [T, Cw]
    float *dxn = dctx + T * Cw;       // [T, hidden]
    float *rows = dxn + T * s.hidden; // [T, heads]: the core's scratch
    const SequenceShard q = sequenceShard(tp, T);
    wholeGradient(k, tp, q, s.hidden, dy, a.dout);
    k.linearBackwardInput(T, Cw, s.hidden, a.dout, wProj, dctx);
    k.round(dctx, T * Cw);
    k.coreBackward(s, t, a, dctx, rows);
    // dq, dk and dv are complete once the core is done; with RoPE the
    // rotated q and k and the projection's output are two tensors, each
    // gradient rounded.
    k.round(a.dqkv, T * Wd);
    if (s.rope) {
      k.rope(s, t, a.dqkv, -1.0f);
      k.round(a.dqkv, T * Wd);
    }
    k.linearBackwardInput(T, s.hidden, Wd, a.dqkv, wQkv, dxn);
    preNormBackward(k, tp, q, s.hidden, a.x, norm, a.rstd, dxn, dy, dx, grads);
  }

  template <class Tokens>
  void backwardWeight(const AttentionShape &s, const Tokens &t,
                      const SavedBases &saved, float *grads) const {
    const int64_t T = t.tokens(), Wd = s.qkvWidth(), Cw = s.contextWidth();
    AttnSaved a = attnSaved(s, k.shape(t), saved);
    float *gQkv = grads + s.hidden, *gProj = gQkv + Wd * s.hidden;
    k.linearBackwardWeight(T, s.hidden, Wd, a.dqkv, a.xn, gQkv);
    k.linearBackwardWeight(T, Cw, s.hidden, a.dout, a.ctx, gProj);
  }
};

} // namespace hypipe::rt::recipes

#endif
