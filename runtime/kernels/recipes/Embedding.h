//===- Embedding.h - the embedding layer, written once over a target ------===//
//
// Forward looks up each token's row of the table and keeps the ids; the
// input pass keeps the output's gradient (the embedding has no input
// gradient); the weight pass adds each row's gradient into its token's row
// of the table. `P` is a target's primitive set (cpu/Kernels.h,
// cuda/Kernels.h): RecipeBasics and
//   embeddingLookup(T, n, table, ids, y, keptIds)
//                         y[i] = table[ids[i]] (rows of n floats), ids kept
//   embeddingScatterAdd(T, n, ids, dy, grads)
//                         grads[ids[i]] += dy[i]
// `saved` holds the T ids (as int32) and then the T x hidden gradient
// (embeddingSaved).
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_RECIPES_EMBEDDING_H
#define HYPIPE_RUNTIME_KERNELS_RECIPES_EMBEDDING_H

#include "core/model/BufferLayouts.h"
#include "core/model/LayerShapes.h"
#include "runtime/kernels/recipes/Primitives.h"

#include <cstdint>

namespace hypipe::rt::recipes {

template <class P> struct Embedding {
  /// The target's primitives, in the call's precision.
  const P &k;
  /// The call's tensor-parallel collectives (null: the table is whole).
  /// Vocabulary-parallel, each rank looks up the ids its rows hold and the
  /// group sums the rows.
  TensorParallelCalls *tp = nullptr;

  template <class Tokens>
  void forward(const EmbeddingShape &s, const Tokens &t, const float *params,
               const int32_t *tokens, float *y, float *saved) const {
    int32_t *kept = embeddingSaved(s, k.shape(t), saved).ids;
    if (!tp) {
      k.embeddingLookup(t.tokens(), s.hidden, params, tokens, y, kept);
      return;
    }
    k.embeddingLookupShard(t.tokens(), s.hidden, params, tokens,
                           tp->rank() * s.vocab, s.vocab, y, kept);
    sumOutput(k, tp, sequenceShard(tp, t.tokens()), s.hidden, y);
  }

  template <class Tokens>
  void backwardInput(const EmbeddingShape &s, const Tokens &t, const float *dy,
                     float *saved) const {
    wholeGradient(k, tp, sequenceShard(tp, t.tokens()), s.hidden, dy,
                  embeddingSaved(s, k.shape(t), saved).dy);
  }

  template <class Tokens>
  void backwardWeight(const EmbeddingShape &s, const Tokens &t,
                      const float *saved, float *grads) const {
    const EmbeddingSaved e = embeddingSaved(s, k.shape(t), saved);
    if (!tp)
      k.embeddingScatterAdd(t.tokens(), s.hidden, e.ids, e.dy, grads);
    else
      k.embeddingScatterAddShard(t.tokens(), s.hidden, e.ids,
                                 tp->rank() * s.vocab, s.vocab, e.dy, grads);
  }
};

} // namespace hypipe::rt::recipes

#endif
