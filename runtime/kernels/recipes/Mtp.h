//===- Mtp.h - a multi-token-prediction depth's two ends ------------------===//
//
// A depth's input (MtpInput: the embedding rows `depth` tokens ahead and the
// previous depth's normed output, each normed, concatenated, through
// eh_proj) and its output (MtpOutput: the head's loss, Head.h, with the
// labels `depth` rows ahead and the loss's gradient weighted by the depth's
// lossWeight). `P` is a target's primitive set (cpu/Kernels.h,
// cuda/Kernels.h) with tokensAhead and copyRows (TargetKernels.inc) beside
// the embedding's, linear and norm kernels. Split over tensor-parallel
// ranks, both ends follow Megatron-LM (TensorParallel.h's collectivesOf).
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_RECIPES_MTP_H
#define HYPIPE_RUNTIME_KERNELS_RECIPES_MTP_H

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/recipes/Head.h"

namespace hypipe::rt::recipes {

template <class P> struct MtpInput {
  /// The target's primitives, in the call's precision.
  const P &k;
  /// The call's tensor-parallel collectives (null: the depth is whole).
  /// Split, the depth looks up the vocabulary-parallel embedding (the
  /// group sums the rows) and eh_proj is column-parallel: each rank
  /// projects [e' | h'] to its tp-th of the hidden columns and the group
  /// gathers them (Megatron's MultiTokenPredictionLayer).
  TensorParallelCalls *tp = nullptr;

  /// What a pass reads: the parameters [enorm; hnorm; eh_proj], the saved
  /// tensors, the rows this rank holds and its columns of eh_proj's output.
  struct Parts {
    const float *enorm, *hnorm, *w;
    MtpInputSaved m;
    SequenceShard q;
    int64_t cols;
  };
  template <class Tokens>
  Parts partsOf(const MtpInputShape &s, const Tokens &t, const float *params,
                float *saved) const {
    const int64_t H = s.hidden;
    return {params,
            params + H,
            params + 2 * H,
            mtpInputSaved(s, k.shape(t), saved),
            sequenceShard(tp, t.tokens()),
            tp ? H / tp->size() : H};
  }

  /// `table` is the model's embedding [vocab, hidden] (this rank's rows),
  /// `hPrev` the previous depth's (or the head's) normed output, whole.
  /// `ws`: [T, 3 hidden].
  template <class Tokens>
  void forward(const MtpInputShape &s, const Tokens &t, const float *params,
               const float *table, const int32_t *tokens, const float *hPrev,
               float *y, float *saved, float *ws) const {
    const int64_t T = t.tokens(), H = s.hidden;
    if (T == 0)
      return;
    const auto [enorm, hnorm, w, m, q, cols] = partsOf(s, t, params, saved);
    // The token `depth` places ahead in the same sequence; token 0 past its
    // end (Megatron rolls the ids with a zero fill, per sequence).
    k.tokensAhead(t, s.depth, tokens, m.ids);
    if (tp) {
      k.embeddingLookupShard(T, H, table, m.ids, tp->rank() * s.vocab, s.vocab,
                             m.e, m.ids);
      sumOutput(k, tp, q, H, m.e);
    } else {
      k.embeddingLookup(T, H, table, m.ids, m.e, m.ids);
    }
    k.copy(m.h, hPrev + q.first * H, q.local * H);
    float *en = ws, *hn = ws + q.local * H;
    k.rmsnormForward(q.local, H, m.e, enorm, en, m.rstdE);
    k.rmsnormForward(q.local, H, m.h, hnorm, hn, m.rstdH);
    k.round(en, 2 * q.local * H); // en and hn, side by side
    float *cat = m.cat + q.first * 2 * H;
    k.copyRows(q.local, H, cat, 2 * H, en, H);
    k.copyRows(q.local, H, cat + H, 2 * H, hn, H);
    if (!tp) {
      k.linearForward(T, 2 * H, H, m.cat, w, y);
      k.round(y, T * H);
      return;
    }
    if (q.split())
      tensorParallel(tp, CollectiveKind::AllGather, m.cat, 2 * H);
    // Rank r's columns [T, H/tp] as the r-th block of `blocks`; gathered,
    // the blocks are laid side by side into the whole output's rows.
    float *blocks = ws, *whole = q.split() ? ws + T * H : y;
    float *mine = blocks + tp->rank() * T * cols;
    k.linearForward(T, 2 * H, cols, m.cat, w, mine);
    k.round(mine, T * cols);
    tensorParallel(tp, CollectiveKind::AllGather, blocks, H);
    for (int64_t r = 0; r < tp->size(); ++r)
      k.copyRows(T, cols, whole + r * cols, H, blocks + r * T * cols, cols);
    if (q.split())
      k.copy(y, whole + q.first * H, q.local * H);
  }

  /// Writes the gradient of hPrev (the rows this rank holds) into
  /// `dhPrev`. `ws`: [T, 3 hidden].
  template <class Tokens>
  void backwardInput(const MtpInputShape &s, const Tokens &t,
                     const float *params, float *grads, float *saved,
                     const float *dy, float *dhPrev, float *ws) const {
    const int64_t T = t.tokens(), H = s.hidden;
    if (T == 0)
      return;
    const auto [enorm, hnorm, w, m, q, cols] = partsOf(s, t, params, saved);
    // The output's gradient this rank's columns of eh_proj produced, kept
    // for the weight pass.
    if (tp) {
      wholeGradient(k, tp, q, H, dy, ws);
      k.copyRows(T, cols, m.dOut, cols, ws + tp->rank() * cols, H);
    } else {
      k.copy(m.dOut, dy, T * H);
    }
    float *dcat = ws, *half = ws + 2 * T * H;
    k.linearBackwardInput(T, 2 * H, cols, m.dOut, w, dcat);
    float *mine = tp ? sumInputGradient(tp, q, 2 * H, dcat) : dcat;
    k.round(mine, q.local * 2 * H);
    // The looked-up rows' gradient, complete; whole for the weight pass's
    // scatter into the table.
    float *dE = m.dE + q.first * H;
    k.copyRows(q.local, H, half, H, mine, 2 * H);
    k.rmsnormBackward(q.local, H, m.e, enorm, m.rstdE, half, dE, grads, false);
    k.round(dE, q.local * H);
    if (q.split())
      tensorParallel(tp, CollectiveKind::AllGather, m.dE, H);
    // dhPrev is a part of the previous normed output's gradient, which the
    // previous depth (or the head) completes and rounds.
    k.copyRows(q.local, H, half, H, mine + H, 2 * H);
    k.rmsnormBackward(q.local, H, m.h, hnorm, m.rstdH, half, dhPrev, grads + H,
                      false);
  }

  /// Adds the looked-up rows' gradient to `tableGrads` (this rank's rows).
  template <class Tokens>
  void backwardWeight(const MtpInputShape &s, const Tokens &t,
                      const float *saved, float *grads,
                      float *tableGrads) const {
    const int64_t T = t.tokens(), H = s.hidden;
    if (T == 0)
      return;
    const int64_t cols = tp ? H / tp->size() : H;
    MtpInputSaved m = mtpInputSaved(s, k.shape(t), const_cast<float *>(saved));
    k.linearBackwardWeight(T, 2 * H, cols, m.dOut, m.cat, grads + 2 * H);
    if (tp)
      k.embeddingScatterAddShard(T, H, m.ids, tp->rank() * s.vocab, s.vocab,
                                 m.dE, tableGrads);
    else
      k.embeddingScatterAdd(T, H, m.ids, m.dE, tableGrads);
  }
};

template <class P> struct MtpOutput {
  /// The target's primitives, in the call's precision.
  const P &k;
  /// The call's tensor-parallel collectives (null: whole): the head's.
  TensorParallelCalls *tp = nullptr;

  /// The depth's loss (unweighted) against the output layer `wOut`.
  template <class Tokens>
  float forward(const MtpOutputShape &s, const Tokens &t, const float *params,
                const float *wOut, const float *x, const int32_t *labels,
                const float *lossMask, float *saved, float *ws) const {
    return Head<P>{k, tp}.lossForward(t, s.hidden, s.vocab, s.lossChunk, params,
                                      wOut, x, labels, lossMask, s.depth,
                                      headSaved(s, k.shape(t), saved), ws);
  }

  /// The loss's gradient scaled by lossScale x s.lossWeight, plus `dyNext`
  /// (the next depth's gradient of this depth's normed output, or null).
  /// A chunked loss adds the output layer's (`wOut`'s) gradient to
  /// `outGrads` here.
  template <class Tokens>
  void backwardInput(const MtpOutputShape &s, const Tokens &t,
                     const float *params, float *grads, const float *wOut,
                     float *outGrads, float *saved, float lossScale,
                     const float *dyNext, float *dx, float *ws) const {
    Head<P>{k, tp}.lossBackwardInput(t, s.hidden, s.vocab, s.lossChunk, params,
                                     wOut, headSaved(s, k.shape(t), saved),
                                     float(lossScale * s.lossWeight), dyNext,
                                     dx, grads, outGrads, ws);
  }

  /// Adds the output layer's (`wOut`'s) gradient to `outGrads` (a chunked
  /// loss's came with the input gradient).
  template <class Tokens>
  void backwardWeight(const MtpOutputShape &s, const Tokens &t,
                      const float *saved, float *outGrads) const {
    Head<P>{k, tp}.lossBackwardWeight(
        t, s.hidden, s.vocab, s.lossChunk,
        headSaved(s, k.shape(t), const_cast<float *>(saved)), outGrads);
  }

  /// The normed output the depth keeps (the next depth's input).
  template <class Tokens>
  const float *normed(const MtpOutputShape &s, const Tokens &t,
                      const float *saved) const {
    return headSaved(s, k.shape(t), const_cast<float *>(saved)).xn;
  }
};

} // namespace hypipe::rt::recipes

#endif
