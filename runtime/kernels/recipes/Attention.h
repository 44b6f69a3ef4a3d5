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
// BufferLayouts.h's, so both targets keep the same tensors. With fewer query
// groups than tensor-parallel ranks (AttentionShape::kvReplicas), it also
// takes `zero(p, n)` and `copyRows` (TargetKernels.inc).
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_RECIPES_ATTENTION_H
#define HYPIPE_RUNTIME_KERNELS_RECIPES_ATTENTION_H

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/recipes/Primitives.h"

#include <algorithm>

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
               float *ws) const {
    const int64_t T = t.tokens(), Wd = s.qkvWidth(), Cw = s.contextWidth(),
                  Lw = s.linearWidth();
    const float *norm = params, *wQkv = norm + s.hidden,
                *wProj = wQkv + Lw * s.hidden;
    AttnSaved a = attnSaved(s, k.shape(t), saved);
    const SequenceShard q = sequenceShard(tp, T);
    k.copy(a.x, x, q.local * s.hidden);
    normedInput(k, tp, q, s.hidden, x, norm, a.xn, a.rstd);
    if (s.kvReplicas == 1) {
      k.linearForward(T, s.hidden, Wd, a.xn, wQkv, a.qkv);
      k.round(a.qkv, T * Wd);
    } else {
      // The ranks' rows of linear_qkv gathered block by block, then this
      // rank's group's k and v and its heads' q taken out.
      float *blocks = gatheredQkv(s, T, ws);
      float *mine = blocks + tp->rank() * T * Lw;
      k.linearForward(T, s.hidden, Lw, a.xn, wQkv, mine);
      k.round(mine, T * Lw);
      tensorParallel(tp, CollectiveKind::AllGather, blocks, s.wholeQkvWidth());
      forEachSharedPiece(s, [&](int64_t column, int64_t at, int64_t n) {
        copyColumns(T, Lw, blocks, column, n, a.qkv + at, Wd, false);
      });
    }
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
  /// With replicated k and v, where the whole layer's q, k and v gathered
  /// [ranks][T, linearWidth] lie in the workspace: after the backward's
  /// context gradient, normed input gradient and the core's rows
  /// (AttentionShape::workspaceFloats).
  static float *gatheredQkv(const AttentionShape &s, int64_t T, float *ws) {
    return ws + T * (s.contextWidth() + s.hidden + s.heads);
  }

  /// With replicated k and v, f(column, at, n) for the three pieces of the
  /// whole layer's q, k and v this rank's shard holds: its heads' q, its
  /// group's k and v, each n columns from `column` of the whole to `at` of
  /// the shard's [q heads | k | v] (Megatron-LM's get_query_key_value_tensors
  /// with tp above num_query_groups).
  template <class F>
  void forEachSharedPiece(const AttentionShape &s, F &&f) const {
    const int64_t d = s.headDim, groupWidth = (s.heads * s.kvReplicas + 2) * d;
    const int64_t group = tp->rank() / s.kvReplicas,
                  part = tp->rank() % s.kvReplicas;
    const int64_t first = group * groupWidth, q = s.heads * d;
    f(first + part * q, int64_t(0), q);
    f(first + s.kvReplicas * q, q, d);
    f(first + s.kvReplicas * q + d, q + d, d);
  }

  /// Columns [column, column + n) of a [T, ranks x lw] tensor held block
  /// by block (rank b's [T, lw] columns b-th, as the all-gather leaves them)
  /// copied to (or, `scatter`, from) `shard` [T, n] rows `stride` apart.
  void copyColumns(int64_t T, int64_t lw, float *blocks, int64_t column,
                   int64_t n, float *shard, int64_t stride,
                   bool scatter) const {
    for (int64_t c = column; c < column + n;) {
      const int64_t b = c / lw, in = c % lw,
                    len = std::min(lw - in, column + n - c);
      float *block = blocks + b * T * lw + in, *part = shard + (c - column);
      if (scatter)
        k.copyRows(T, len, block, lw, part, stride);
      else
        k.copyRows(T, len, part, stride, block, lw);
      c += len;
    }
  }

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
    const int64_t T = t.tokens(), Wd = s.qkvWidth(), Cw = s.contextWidth(),
                  Lw = s.linearWidth();
    const float *norm = params, *wQkv = norm + s.hidden,
                *wProj = wQkv + Lw * s.hidden;
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
    if (s.kvReplicas > 1) {
      // Each piece's gradient into its place in the whole layer's (zero
      // elsewhere), summed over the ranks and cut back to each rank's
      // block: a group's k and v gradients add over the ranks sharing it.
      float *blocks = gatheredQkv(s, T, ws);
      k.zero(blocks, T * s.wholeQkvWidth());
      forEachSharedPiece(s, [&](int64_t column, int64_t at, int64_t n) {
        copyColumns(T, Lw, blocks, column, n, a.dqkv + at, Wd, true);
      });
      tensorParallel(tp, CollectiveKind::ReduceScatter, blocks,
                     s.wholeQkvWidth());
      k.copy(a.dqkv, blocks + tp->rank() * T * Lw, T * Lw);
      k.round(a.dqkv, T * Lw);
    }
    k.linearBackwardInput(T, s.hidden, Lw, a.dqkv, wQkv, dxn);
    preNormBackward(k, tp, q, s.hidden, a.x, norm, a.rstd, dxn, dy, dx, grads);
  }

  template <class Tokens>
  void backwardWeight(const AttentionShape &s, const Tokens &t,
                      const SavedBases &saved, float *grads) const {
    const int64_t T = t.tokens(), Lw = s.linearWidth(), Cw = s.contextWidth();
    AttnSaved a = attnSaved(s, k.shape(t), saved);
    float *gQkv = grads + s.hidden, *gProj = gQkv + Lw * s.hidden;
    k.linearBackwardWeight(T, s.hidden, Lw, a.dqkv, a.xn, gQkv);
    k.linearBackwardWeight(T, Cw, s.hidden, a.dout, a.ctx, gProj);
  }
};

} // namespace hypipe::rt::recipes

#endif
