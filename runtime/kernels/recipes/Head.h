//===- Head.h - the output layer and its loss, written once over a target -===//
//
// The final RMSNorm, the output layer's logits and the cross-entropy over
// them (the main head and every MTP depth's, whose labels lie `shift` rows
// ahead), and the gradient back through them: one recipe for both targets
// around their own cross-entropy kernels. `P` is a target's primitive set
// (cpu/Kernels.h, cuda/Kernels.h; the cores in cpu/Head.cpp, cuda/Head.cu):
// RecipeBasics, the linear and norm kernels (recipes/Primitives.h), and
//   crossEntropy(t, vocab, shift, labels, lossMask, h, scratch)
//                         the masked mean loss over the logits in h.logits
//                         (left as they are), each row's softmax
//                         statistics, h.mask and h.labels
//   lossCoefficients, crossEntropyBackwardChunk
//                         the mask to each row's gradient coefficient, and
//                         logits to their gradient in place (the softmax
//                         made again from the row statistics), a chunk of
//                         rows or all of them
// and, for a chunked loss (the shape's loss_chunk, Megatron's linear
// cross-entropy fusion), lossTargets, crossEntropyChunk and
// crossEntropyChunked (TargetKernels.inc): the output layer and the loss a
// chunk of rows at a time, whose logits live in the workspace only. The
// backward makes each chunk's logits once more and takes both the input's and
// the output layer's weight gradient from them (as Megatron-LM's linear
// cross-entropy backward does), so no [T, vocab] tensor is kept and W has
// nothing left to do: four output-layer GEMMs a microbatch, against the native
// loss's three. A call of no tokens does nothing (its loss is 0).
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_RECIPES_HEAD_H
#define HYPIPE_RUNTIME_KERNELS_RECIPES_HEAD_H

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/recipes/Primitives.h"

#include <algorithm>

namespace hypipe::rt::recipes {

template <class P> struct Head {
  /// The target's primitives, in the call's precision.
  const P &k;
  /// The call's tensor-parallel collectives (null: the output layer is
  /// whole). Vocabulary-parallel, the output layer is column-parallel over
  /// the vocabulary: the cross-entropy is Megatron's vocabulary-parallel
  /// one, and the normed input's partial gradients are summed.
  TensorParallelCalls *tp = nullptr;

  /// The head layer: the final norm and the output layer (params: the
  /// norm's weights, then the output layer's), the loss over the labels.
  template <class Tokens>
  float forward(const HeadShape &s, const Tokens &t, const float *params,
                const float *x, const int32_t *labels, const float *lossMask,
                float *saved, float *ws) const {
    return lossForward(t, s.hidden, s.vocab, s.lossChunk, params,
                       params + s.hidden, x, labels, lossMask, 0,
                       headSaved(s, k.shape(t), saved), ws);
  }

  /// With multi-token prediction `dxnExtra` is the first depth's gradient
  /// of the normed output (else null), added before the norm's backward.
  /// A chunked loss adds the output layer's weight gradient here too.
  template <class Tokens>
  void backwardInput(const HeadShape &s, const Tokens &t, const float *params,
                     float *grads, float *saved, float lossScale,
                     const float *dxnExtra, float *dx, float *ws) const {
    lossBackwardInput(t, s.hidden, s.vocab, s.lossChunk, params,
                      params + s.hidden, headSaved(s, k.shape(t), saved),
                      lossScale, dxnExtra, dx, grads, grads + s.hidden, ws);
  }

  /// The output layer's weight gradient (a chunked loss's came with the
  /// input gradient: nothing to do).
  template <class Tokens>
  void backwardWeight(const HeadShape &s, const Tokens &t, const float *saved,
                      float *grads) const {
    lossBackwardWeight(t, s.hidden, s.vocab, s.lossChunk,
                       headSaved(s, k.shape(t), const_cast<float *>(saved)),
                       grads + s.hidden);
  }

  /// The normed output the head keeps (the first MTP depth's input).
  template <class Tokens>
  const float *normed(const HeadShape &s, const Tokens &t,
                      const float *saved) const {
    return headSaved(s, k.shape(t), const_cast<float *>(saved)).xn;
  }

  /// `chunk`: rows of a chunked loss at a time, or 0. `ws`: the
  /// cross-entropy's scratch (a [T] row loss and two sums on the GPU; none
  /// on the CPU); a chunked loss's statistics, then its chunk's logits.
  template <class Tokens>
  float lossForward(const Tokens &t, int64_t hidden, int64_t vocab,
                    int64_t chunk, const float *norm, const float *wOut,
                    const float *x, const int32_t *labels,
                    const float *lossMask, int64_t shift, HeadSaved h,
                    float *ws) const {
    const int64_t T = t.tokens();
    if (T == 0)
      return 0.0f;
    const SequenceShard q = sequenceShard(tp, T);
    k.copy(h.x, x, q.local * hidden);
    normedInput(k, tp, q, hidden, x, norm, h.xn, h.rstd);
    if (chunk > 0) {
      const LossChunkStats stats = lossChunkStats(T, ws);
      k.lossTargets(t, shift, labels, lossMask, h);
      forEachChunk(
          T, hidden, vocab, chunk, wOut, h, ws + lmLossChunkStatsFloats(T),
          [&](HeadSaved c, int64_t row0, int64_t rows) {
            k.crossEntropyChunk(row0, rows, vocab, vocabFirst(vocab), c, stats);
          });
      return k.crossEntropyChunked(T, h, tp, stats);
    }
    k.linearForward(T, hidden, vocab, h.xn, wOut, h.logits);
    // bf16 logits, as the output layer writes them; the loss reads them in
    // fp32 (Megatron upcasts before the cross-entropy).
    k.round(h.logits, T * vocab);
    if (tp)
      return k.crossEntropyShard(t, vocab, vocabFirst(vocab), shift, labels,
                                 lossMask, h, *tp, ws);
    return k.crossEntropy(t, vocab, shift, labels, lossMask, h, ws);
  }

  /// `dxnExtra`: the next MTP depth's gradient of the normed output, or
  /// null. `gOut`: the output layer's weight gradient, which a chunked loss
  /// adds to here (the native loss leaves it to lossBackwardWeight). `ws`:
  /// [T, hidden] for the norm's input gradient, then the cross-entropy's
  /// scratch.
  template <class Tokens>
  void lossBackwardInput(const Tokens &t, int64_t hidden, int64_t vocab,
                         int64_t chunk, const float *norm, const float *wOut,
                         HeadSaved h, float lossScale, const float *dxnExtra,
                         float *dx, float *gNorm, float *gOut,
                         float *ws) const {
    const int64_t T = t.tokens();
    if (T == 0)
      return;
    float *dxn = ws;
    if (chunk > 0) {
      // Each row's coefficient replaces its mask. Both GEMMs read the
      // chunk's logits' gradient while it is in the workspace, the weight
      // gradient adding the chunks in row order.
      float *rest = ws + T * hidden;
      k.lossCoefficients(T, h, lossScale, rest + std::min(chunk, T) * vocab);
      forEachChunk(T, hidden, vocab, chunk, wOut, h, rest,
                   [&](HeadSaved c, int64_t row0, int64_t rows) {
                     logitsGradient(c, row0, rows, vocab);
                     k.linearBackwardInput(rows, hidden, vocab, c.logits, wOut,
                                           dxn + row0 * hidden);
                     k.linearBackwardWeight(rows, hidden, vocab, c.logits,
                                            h.xn + row0 * hidden, gOut);
                   });
    } else {
      // The kept logits are the whole microbatch's one chunk (nothing
      // reads the mask after I); their gradient leaves the fp32 loss as
      // bf16 and stays for W.
      k.lossCoefficients(T, h, lossScale, ws + T * hidden);
      logitsGradient(h, 0, T, vocab);
      k.linearBackwardInput(T, hidden, vocab, h.logits, wOut, dxn);
    }
    const SequenceShard q = sequenceShard(tp, T);
    float *mine = sumInputGradient(tp, q, hidden, dxn);
    // The normed output also feeds the next MTP depth: its gradient adds
    // (that part not rounded yet), and the sum is the complete gradient.
    // (With sequence parallelism both hold this rank's rows.)
    if (dxnExtra)
      k.addInto(mine, dxnExtra, q.local * hidden);
    k.round(mine, q.local * hidden);
    k.rmsnormBackward(q.local, hidden, h.x, norm, h.rstd, mine, dx, gNorm,
                      false);
    k.round(dx, q.local * hidden);
  }

  /// The output layer's weight gradient from the logits' gradient in
  /// h.logits after lossBackwardInput; a chunked loss's was added there.
  template <class Tokens>
  void lossBackwardWeight(const Tokens &t, int64_t hidden, int64_t vocab,
                          int64_t chunk, HeadSaved h, float *gOut) const {
    if (chunk <= 0)
      k.linearBackwardWeight(t.tokens(), hidden, vocab, h.logits, h.xn, gOut);
  }

private:
  /// The first vocabulary row this rank's logits are of.
  int64_t vocabFirst(int64_t vocab) const {
    return tp ? tp->rank() * vocab : 0;
  }

  /// f(c, row0, rows) for each chunk of `chunk` rows, c the head's saved
  /// tensors with the chunk's logits (the output layer's, rounded as it
  /// writes them) at c.logits = `logits` [chunk, vocab].
  template <class F>
  void forEachChunk(int64_t T, int64_t hidden, int64_t vocab, int64_t chunk,
                    const float *wOut, HeadSaved h, float *logits,
                    F &&f) const {
    HeadSaved c = h;
    c.logits = logits;
    for (int64_t row0 = 0; row0 < T; row0 += chunk) {
      const int64_t rows = std::min(chunk, T - row0);
      k.linearForward(rows, hidden, vocab, h.xn + row0 * hidden, wOut, logits);
      k.round(logits, rows * vocab);
      f(c, row0, rows);
    }
  }

  /// A chunk's logits to their gradient (from h.mask's coefficients),
  /// rounded as the output layer's input gradient is.
  void logitsGradient(HeadSaved c, int64_t row0, int64_t rows,
                      int64_t vocab) const {
    k.crossEntropyBackwardChunk(row0, rows, vocab, vocabFirst(vocab), c);
    k.round(c.logits, rows * vocab);
  }
};

} // namespace hypipe::rt::recipes

#endif
