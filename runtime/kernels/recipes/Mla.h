//===- Mla.h - multi-latent attention, written once over a target ---------===//
//
// Megatron-LM's MLASelfAttention (multi_latent_attention.py) around the
// attention layer's core (recipes/Attention.h): the pre-norm; the queries
// through linear_q_down_proj, its RMSNorm (qk_layernorm) and
// linear_q_up_proj, or one linear_q_proj; [c_kv | k_pe] from
// linear_kv_down_proj, c_kv (normed with qk_layernorm) through
// linear_kv_up_proj to each head's [k_nope; v]. The target's `mlaAssemble`
// lays q, k and v out for the core, heads padded to MlaShape::coreHeadDim()
// with zeros (which change no score and no output), RoPE or YaRN on q_pe and
// the one k_pe every head shares; the core runs with MLA's scale
// (MlaShape::softmaxScale); each head's v columns of its padded context
// make linear_proj's input. Backward, the target's `mlaGatherGradients`
// and `mlaRopeBackward` are the assembly's transpose (k_pe's gradient the
// sum over the heads). Rounding as recipes/Attention.h's: each tensor the
// float64 reference (torch_reference.py's mla) stores is rounded once it is
// complete, forward and backward.
//
// Over tensor-parallel ranks (Megatron-LM's split: the heads) every rank
// computes the latents of every token (the down-projections and the
// latents' norms are replicated; Megatron-LM computes them on a rank's own
// rows and gathers the latents instead), its heads' up-projections,
// attention and linear_proj's partial output, which is summed. Backward,
// as Megatron-LM, the latents'
// gradients from a rank's heads are partial: they are summed into the rows
// the rank holds (with sequence parallelism a reduce-scatter, else an
// all-reduce), and the latents' norms, the down-projections' input and
// weight gradients and the pre-norm run over those rows only, so the
// replicated weights' gradients are partial by rows, summed over the group
// as every norm's are under sequence parallelism (and whole without it).
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_RECIPES_MLA_H
#define HYPIPE_RUNTIME_KERNELS_RECIPES_MLA_H

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/recipes/Primitives.h"

namespace hypipe::rt::recipes {

template <class P> struct Mla {
  /// The target's primitives, in the call's precision.
  const P &k;
  /// The call's tensor-parallel collectives (null: the layer is whole).
  TensorParallelCalls *tp = nullptr;

  template <class Tokens>
  void forward(const MlaShape &s, const Tokens &t, const float *params,
               const float *x, float *y, const SavedBases &saved,
               float *ws) const {
    MlaSaved m = mlaSaved(s, k.shape(t), saved);
    project(s, t, params, x, m, ws);
    k.coreForward(s.core(), t, m.core);
    attend(s, t, params, x, y, m);
  }

  /// The forward up to the core: the normed input, the latents and the
  /// core's q, k and v in m.core.qkv.
  template <class Tokens>
  void project(const MlaShape &s, const Tokens &t, const float *params,
               const float *x, MlaSaved &m, float *ws) const {
    const int64_t T = t.tokens();
    const MlaParams<const float> p = mlaParams(s, params);
    AttnSaved &a = m.core;
    const SequenceShard rows = sequenceShard(tp, T);
    k.copy(a.x, x, rows.local * s.hidden);
    normedInput(k, tp, rows, s.hidden, x, p.norm, a.xn, a.rstd);
    if (s.qLoraRank > 0) {
      linear(T, s.hidden, s.qLoraRank, a.xn, p.wQDown, m.cq);
      if (s.qkLayernorm)
        preNorm(k, T, s.qLoraRank, m.cq, p.qNorm, m.cqn, m.cqRstd);
    }
    linear(T, s.hidden, s.kvDownWidth(), a.xn, p.wKvDown, m.kvd);
    k.copyRows(T, s.kvLoraRank, m.ckv, s.kvLoraRank, m.kvd, s.kvDownWidth());
    if (s.qkLayernorm)
      preNorm(k, T, s.kvLoraRank, m.ckv, p.kvNorm, m.ckvn, m.ckvRstd);
    upProjections(s, t, p, m, ws);
  }

  /// The forward after the core (its context in m.core.ctx): each head's v
  /// columns through linear_proj, and the residual.
  template <class Tokens>
  void attend(const MlaShape &s, const Tokens &t, const float *params,
              const float *x, float *y, MlaSaved &m) const {
    const int64_t T = t.tokens();
    const MlaParams<const float> p = mlaParams(s, params);
    const AttentionShape core = s.core();
    k.round(m.core.ctx, T * core.contextWidth());
    forEachHead(s, [&](int64_t padded, int64_t packed) {
      k.copyRows(T, s.vHeadDim, m.ctx + packed, s.contextWidth(),
                 m.core.ctx + padded, core.contextWidth());
    });
    k.linearForward(T, s.contextWidth(), s.hidden, m.ctx, p.wProj, y);
    residualOutput(k, tp, sequenceShard(tp, T), s.hidden, x, y);
  }

  /// Selective recompute of mla_up_proj: the core's q, k and v again from
  /// the kept latents, exactly as the forward computed them.
  template <class Tokens>
  void recompute(const MlaShape &s, const Tokens &t, const float *params,
                 const SavedBases &saved, float *ws) const {
    MlaSaved m = mlaSaved(s, k.shape(t), saved);
    if (saved.drops(RecomputeModule::MlaUpProj))
      upProjections(s, t, mlaParams(s, params), m, ws);
  }

  template <class Tokens>
  void backwardInput(const MlaShape &s, const Tokens &t, const float *params,
                     float *grads, const SavedBases &saved, const float *dy,
                     float *dx, float *ws) const {
    MlaSaved m = mlaSaved(s, k.shape(t), saved);
    const CoreGradient c = contextGradient(s, t, params, m, dy, ws);
    k.coreBackward(s.core(), t, m.core, c.dctx, c.rows);
    projectBackward(s, t, params, grads, m, dy, dx);
  }

  /// The core's input in the backward: the padded context's gradient and
  /// the [T, heads] of scratch for dO . O. The workspace (workspaceFloats)
  /// holds the context's gradient packed, then padded, the core's q, k and
  /// v gradient (m.core.dqkv), dO . O, the normed input's gradient and the
  /// latents'.
  struct CoreGradient {
    float *dctx, *rows;
  };

  /// The backward down to the core: the output's gradient through
  /// linear_proj into the core's padded context gradient.
  template <class Tokens>
  CoreGradient contextGradient(const MlaShape &s, const Tokens &t,
                               const float *params, MlaSaved &m,
                               const float *dy, float *ws) const {
    const int64_t T = t.tokens(), n = s.heads, D = s.coreHeadDim();
    const MlaParams<const float> p = mlaParams(s, params);
    AttnSaved &a = m.core;
    float *dctx = ws;                              // [T, heads x v]
    float *dctxPadded = dctx + T * n * s.vHeadDim; // [T, heads x D]
    a.dqkv = dctxPadded + T * n * D;               // [T, 3 heads x D]
    float *coreRows = a.dqkv + T * 3 * n * D;      // [T, heads]
    wholeGradient(k, tp, sequenceShard(tp, T), s.hidden, dy, a.dout);
    k.linearBackwardInput(T, s.contextWidth(), s.hidden, a.dout, p.wProj, dctx);
    k.round(dctx, T * s.contextWidth());
    k.zero(dctxPadded, T * n * D);
    forEachHead(s, [&](int64_t padded, int64_t packed) {
      k.copyRows(T, s.vHeadDim, dctxPadded + padded, n * D, dctx + packed,
                 s.contextWidth());
    });
    return {dctxPadded, coreRows};
  }

  /// The backward from the core's gradient (m.core.dqkv, whole, in the
  /// workspace contextGradient laid out) to the layer's input.
  template <class Tokens>
  void projectBackward(const MlaShape &s, const Tokens &t, const float *params,
                       float *grads, MlaSaved &m, const float *dy,
                       float *dx) const {
    const int64_t T = t.tokens(), n = s.heads, D = s.coreHeadDim();
    const int64_t kv = s.kvLoraRank, kvd = s.kvDownWidth(), h = s.hidden;
    const MlaParams<const float> p = mlaParams(s, params);
    const MlaParams<float> g = mlaParams(s, grads);
    AttnSaved &a = m.core;
    float *dxn = a.dqkv + T * 3 * n * D + T * n; // [T, hidden]
    float *dcqn = dxn + T * h;                   // [T, q_lora_rank]
    float *dckvn = dcqn + T * s.qLoraRank;       // [T, kv_lora_rank]
    float *dckv = dckvn + T * kv;                // [T, kv_lora_rank]
    const SequenceShard q = sequenceShard(tp, T);
    const int64_t at = q.first;
    // The gradients of the stored q_pe and k_pe (k_pe's summed over the
    // heads first), of q and of kv_up_proj's output: each rounded once
    // complete, then the rotary parts back through RoPE into q and kvd.
    k.mlaGatherGradients(s, t, a.dqkv, m.dq, m.dkvu, m.dkvd);
    k.round(m.dq, T * s.queryWidth());
    k.round(m.dkvu, T * s.kvUpWidth());
    if (!tp) // else k_pe's is a rank's heads' part: rounded once summed
      k.round(m.dkvd, T * kvd);
    k.mlaRopeBackward(s, t, m.dq + s.qkHeadDim, s.queryWidth(), n,
                      s.queryDim());
    k.round(m.dq, T * s.queryWidth());
    k.mlaRopeBackward(s, t, m.dkvd + kv, kvd, 1, 0);
    // c_kv's gradient through linear_kv_up_proj beside k_pe's, [c_kv | k_pe]
    // summed over the group into this rank's rows (a rank's heads give a
    // part of each), then through c_kv's norm there.
    k.linearBackwardInput(T, kv, s.kvUpWidth(), m.dkvu, p.wKvUp, dckvn);
    k.copyRows(T, kv, m.dkvd, kvd, dckvn, kv);
    tensorParallel(tp, sumKind(q), m.dkvd, kvd);
    k.copyRows(q.local, kv, dckvn + at * kv, kv, m.dkvd + at * kvd, kvd);
    if (s.qkLayernorm) {
      k.round(dckvn + at * kv, q.local * kv);
      k.rmsnormBackward(q.local, kv, m.ckv + at * kv, p.kvNorm, m.ckvRstd + at,
                        dckvn + at * kv, dckv + at * kv, g.kvNorm, false);
      k.copyRows(q.local, kv, m.dkvd + at * kvd, kvd, dckv + at * kv, kv);
    }
    k.round(m.dkvd + at * kvd, q.local * kvd);
    // The normed input's gradient of this rank's rows: the query branch's
    // (through the query latent, summed like c_kv's, or linear_q_proj's
    // partial one summed) and kv_down_proj's.
    float *mine = dxn + at * h;
    if (s.qLoraRank > 0) {
      const int64_t ql = s.qLoraRank;
      float *dLatent = s.qkLayernorm ? dcqn : m.dcq;
      k.linearBackwardInput(T, ql, s.queryWidth(), m.dq, p.wQ, dLatent);
      tensorParallel(tp, sumKind(q), dLatent, ql);
      if (s.qkLayernorm) {
        k.round(dcqn + at * ql, q.local * ql);
        k.rmsnormBackward(q.local, ql, m.cq + at * ql, p.qNorm, m.cqRstd + at,
                          dcqn + at * ql, m.dcq + at * ql, g.qNorm, false);
      }
      k.round(m.dcq + at * ql, q.local * ql);
      k.linearBackwardInput(q.local, h, ql, m.dcq + at * ql, p.wQDown, mine);
    } else {
      k.linearBackwardInput(T, h, s.queryWidth(), m.dq, p.wQ, dxn);
      tensorParallel(tp, sumKind(q), dxn, h);
    }
    k.linearBackwardInput(q.local, h, kvd, m.dkvd + at * kvd, p.wKvDown, mine,
                          true);
    preNormBackwardRows(k, q, h, a.x, p.norm, a.rstd, mine, dy, dx, g.norm);
  }

  template <class Tokens>
  void backwardWeight(const MlaShape &s, const Tokens &t,
                      const SavedBases &saved, float *grads) const {
    const int64_t T = t.tokens(), h = s.hidden;
    const MlaParams<float> g = mlaParams(s, grads);
    const MlaSaved m = mlaSaved(s, k.shape(t), saved);
    // The down-projections over this rank's rows (projectBackward).
    const SequenceShard q = sequenceShard(tp, T);
    const float *xn = m.core.xn + q.first * h;
    if (s.qLoraRank > 0) {
      k.linearBackwardWeight(q.local, h, s.qLoraRank,
                             m.dcq + q.first * s.qLoraRank, xn, g.wQDown);
      k.linearBackwardWeight(T, s.qLoraRank, s.queryWidth(), m.dq, m.cqn, g.wQ);
    } else {
      k.linearBackwardWeight(T, h, s.queryWidth(), m.dq, m.core.xn, g.wQ);
    }
    k.linearBackwardWeight(q.local, h, s.kvDownWidth(),
                           m.dkvd + q.first * s.kvDownWidth(), xn, g.wKvDown);
    k.linearBackwardWeight(T, s.kvLoraRank, s.kvUpWidth(), m.dkvu, m.ckvn,
                           g.wKvUp);
    k.linearBackwardWeight(T, s.contextWidth(), h, m.core.dout, m.ctx, g.wProj);
  }

private:
  /// How a partial gradient is summed: into this rank's rows (sequence
  /// parallelism) or every row.
  static CollectiveKind sumKind(const SequenceShard &q) {
    return q.split() ? CollectiveKind::ReduceScatter
                     : CollectiveKind::AllReduce;
  }

  /// Megatron's qkv_up_proj_and_rope_apply: q (linear_q_up_proj of the
  /// query latent, or linear_q_proj of the normed input) and
  /// linear_kv_up_proj's output, in the workspace, laid out with k_pe for
  /// the core in m.core.qkv.
  template <class Tokens>
  void upProjections(const MlaShape &s, const Tokens &t,
                     const MlaParams<const float> &p, MlaSaved &m,
                     float *ws) const {
    const int64_t T = t.tokens();
    float *q = ws, *kvu = q + T * s.queryWidth();
    if (s.qLoraRank > 0)
      linear(T, s.qLoraRank, s.queryWidth(), m.cqn, p.wQ, q);
    else
      linear(T, s.hidden, s.queryWidth(), m.core.xn, p.wQ, q);
    linear(T, s.kvLoraRank, s.kvUpWidth(), m.ckvn, p.wKvUp, kvu);
    // The content parts are rounded already; the rotary ones are new.
    k.mlaAssemble(s, t, q, kvu, m.kvd, m.core.qkv);
    k.round(m.core.qkv, T * 3 * s.heads * s.coreHeadDim());
  }

  /// y = x W^T, rounded: every projection's output is a stored tensor.
  void linear(int64_t T, int64_t in, int64_t out, const float *x,
              const float *w, float *y) const {
    k.linearForward(T, in, out, x, w, y);
    k.round(y, T * out);
  }

  /// f(padded, packed) per head: the column of its context in the core's
  /// padded [T, heads x D] and in linear_proj's [T, heads x v].
  template <class F> static void forEachHead(const MlaShape &s, F &&f) {
    for (int64_t h = 0; h < s.heads; ++h)
      f(h * s.coreHeadDim(), h * s.vHeadDim);
  }
};

} // namespace hypipe::rt::recipes

#endif
