//===- Mtp.h - a multi-token-prediction depth's two ends ------------------===//
//
// A depth's input (MtpInput: the embedding rows `depth` tokens ahead and the
// previous depth's normed output, each normed, concatenated, through
// eh_proj) and its output (MtpOutput: the head's loss, Head.h, with the
// labels `depth` rows ahead and the loss's gradient weighted by the depth's
// lossWeight). `P` is a target's primitive set (cpu/Kernels.h,
// cuda/Kernels.h). The input's gather, norms and concatenation are still
// each target's own kernels (mtpInputForward, mtpInputBackwardInput,
// mtpInputBackwardWeight, in the call's precision); the output is composed
// here.
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

  /// `table` is the model's embedding [vocab, hidden], `hPrev` the previous
  /// depth's (or the head's) normed output.
  template <class Tokens>
  void forward(const MtpInputShape &s, const Tokens &t, const float *params,
               const float *table, const int32_t *tokens, const float *hPrev,
               float *y, float *saved, float *ws) const {
    k.mtpInputForward(s, t, params, table, tokens, hPrev, y, saved, ws);
  }

  /// Writes the gradient of hPrev into `dhPrev`.
  template <class Tokens>
  void backwardInput(const MtpInputShape &s, const Tokens &t,
                     const float *params, float *grads, float *saved,
                     const float *dy, float *dhPrev, float *ws) const {
    k.mtpInputBackwardInput(s, t, params, grads, saved, dy, dhPrev, ws);
  }

  /// Adds the looked-up rows' gradient to `tableGrads`.
  template <class Tokens>
  void backwardWeight(const MtpInputShape &s, const Tokens &t,
                      const float *saved, float *grads,
                      float *tableGrads) const {
    k.mtpInputBackwardWeight(s, t, saved, grads, tableGrads);
  }
};

template <class P> struct MtpOutput {
  /// The target's primitives, in the call's precision.
  const P &k;

  /// The depth's loss (unweighted) against the output layer `wOut`.
  template <class Tokens>
  float forward(const MtpOutputShape &s, const Tokens &t, const float *params,
                const float *wOut, const float *x, const int32_t *labels,
                const float *lossMask, float *saved, float *ws) const {
    return Head<P>{k}.lossForward(t, s.hidden, s.vocab, params, wOut, x, labels,
                                  lossMask, s.depth,
                                  headSaved(s, k.shape(t), saved), ws);
  }

  /// The loss's gradient scaled by lossScale x s.lossWeight, plus `dyNext`
  /// (the next depth's gradient of this depth's normed output, or null).
  template <class Tokens>
  void backwardInput(const MtpOutputShape &s, const Tokens &t,
                     const float *params, float *grads, const float *wOut,
                     float *saved, float lossScale, const float *dyNext,
                     float *dx, float *ws) const {
    Head<P>{k}.lossBackwardInput(
        t, s.hidden, s.vocab, params, wOut, headSaved(s, k.shape(t), saved),
        float(lossScale * s.lossWeight), dyNext, dx, grads, ws);
  }

  /// Adds the output layer's gradient to `outGrads`.
  template <class Tokens>
  void backwardWeight(const MtpOutputShape &s, const Tokens &t,
                      const float *saved, float *outGrads) const {
    Head<P>{k}.backwardWeight(
        t, s.hidden, s.vocab,
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
