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
// `saved` holds the T ids (as int32) and then the T x hidden gradient.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_RECIPES_EMBEDDING_H
#define HYPIPE_RUNTIME_KERNELS_RECIPES_EMBEDDING_H

#include "core/model/LayerShapes.h"

#include <cstdint>

namespace hypipe::rt::recipes {

template <class P> struct Embedding {
  /// The target's primitives, in the call's precision.
  const P &k;

  template <class Tokens>
  void forward(const EmbeddingShape &s, const Tokens &t, const float *params,
               const int32_t *tokens, float *y, float *saved) const {
    k.embeddingLookup(t.tokens(), s.hidden, params, tokens, y,
                      reinterpret_cast<int32_t *>(saved));
  }

  template <class Tokens>
  void backwardInput(const EmbeddingShape &s, const Tokens &t, const float *dy,
                     float *saved) const {
    k.copy(saved + t.tokens(), dy, t.tokens() * s.hidden);
  }

  template <class Tokens>
  void backwardWeight(const EmbeddingShape &s, const Tokens &t,
                      const float *saved, float *grads) const {
    k.embeddingScatterAdd(t.tokens(), s.hidden,
                          reinterpret_cast<const int32_t *>(saved),
                          saved + t.tokens(), grads);
  }
};

} // namespace hypipe::rt::recipes

#endif
