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
//   crossEntropyBackward(t, vocab, h, lossScale, scratch)
//                         h.logits to their gradient in place (the softmax
//                         made again from the row statistics)
// A call of no tokens does nothing (its loss is 0).
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_RECIPES_HEAD_H
#define HYPIPE_RUNTIME_KERNELS_RECIPES_HEAD_H

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/recipes/Primitives.h"

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
    return lossForward(t, s.hidden, s.vocab, params, params + s.hidden, x,
                       labels, lossMask, 0, headSaved(s, k.shape(t), saved),
                       ws);
  }

  /// With multi-token prediction `dxnExtra` is the first depth's gradient
  /// of the normed output (else null), added before the norm's backward.
  template <class Tokens>
  void backwardInput(const HeadShape &s, const Tokens &t, const float *params,
                     float *grads, float *saved, float lossScale,
                     const float *dxnExtra, float *dx, float *ws) const {
    lossBackwardInput(t, s.hidden, s.vocab, params, params + s.hidden,
                      headSaved(s, k.shape(t), saved), lossScale, dxnExtra, dx,
                      grads, ws);
  }

  template <class Tokens>
  void backwardWeight(const HeadShape &s, const Tokens &t, const float *saved,
                      float *grads) const {
    backwardWeight(t, s.hidden, s.vocab,
                   headSaved(s, k.shape(t), const_cast<float *>(saved)),
                   grads + s.hidden);
  }

  /// The normed output the head keeps (the first MTP depth's input).
  template <class Tokens>
  const float *normed(const HeadShape &s, const Tokens &t,
                      const float *saved) const {
    return headSaved(s, k.shape(t), const_cast<float *>(saved)).xn;
  }

  /// `ws`: the cross-entropy's scratch (a [T] row loss and two sums on the
  /// GPU; none on the CPU).
  template <class Tokens>
  float lossForward(const Tokens &t, int64_t hidden, int64_t vocab,
                    const float *norm, const float *wOut, const float *x,
                    const int32_t *labels, const float *lossMask, int64_t shift,
                    HeadSaved h, float *ws) const {
    const int64_t T = t.tokens();
    if (T == 0)
      return 0.0f;
    const SequenceShard q = sequenceShard(tp, T);
    k.copy(h.x, x, q.local * hidden);
    normedInput(k, tp, q, hidden, x, norm, h.xn, h.rstd);
    k.linearForward(T, hidden, vocab, h.xn, wOut, h.logits);
    // bf16 logits, as the output layer writes them; the loss reads them in
    // fp32 (Megatron upcasts before the cross-entropy).
    k.round(h.logits, T * vocab);
    if (tp)
      return k.crossEntropyShard(t, vocab, tp->rank() * vocab, shift, labels,
                                 lossMask, h, *tp, ws);
    return k.crossEntropy(t, vocab, shift, labels, lossMask, h, ws);
  }

  /// `dxnExtra`: the next MTP depth's gradient of the normed output, or
  /// null. `ws`: [T, hidden] for the norm's input gradient, then the
  /// cross-entropy's scratch.
  template <class Tokens>
  void lossBackwardInput(const Tokens &t, int64_t hidden, int64_t vocab,
                         const float *norm, const float *wOut, HeadSaved h,
                         float lossScale, const float *dxnExtra, float *dx,
                         float *gNorm, float *ws) const {
    const int64_t T = t.tokens();
    if (T == 0)
      return;
    float *dxn = ws;
    if (tp)
      k.crossEntropyBackwardShard(t, vocab, tp->rank() * vocab, h, lossScale,
                                  ws + T * hidden);
    else
      k.crossEntropyBackward(t, vocab, h, lossScale, ws + T * hidden);
    // The logits' gradient leaves the fp32 loss as bf16.
    k.round(h.logits, T * vocab);
    k.linearBackwardInput(T, hidden, vocab, h.logits, wOut, dxn);
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

  /// The output layer's weight gradient (the logits' gradient is in
  /// h.logits after lossBackwardInput).
  template <class Tokens>
  void backwardWeight(const Tokens &t, int64_t hidden, int64_t vocab,
                      HeadSaved h, float *gOut) const {
    k.linearBackwardWeight(t.tokens(), hidden, vocab, h.logits, h.xn, gOut);
  }
};

} // namespace hypipe::rt::recipes

#endif
