//===- Dsa.h - DeepSeek sparse attention, written once over a target ------===//
//
// Megatron-LM's DSAttention (experimental_attention_variant/dsa.py) inside
// MLASelfAttention: recipes/Mla.h's projections and output around a core
// that attends, per query, only to the keys its lightning indexer keeps.
// MLA runs in its non-absorbed form (every head its own k and v from c_kv):
// the absorbed single-key-head form of DeepSeek-V3.2 folds linear_kv_up_proj
// into the query and the output and computes the same scores and outputs.
//
// The indexer reads the layer's normed input and the query latent (the
// normed input without q_lora_rank), both detached as Megatron detaches
// them: q from linear_wq_b, k from linear_wk and the LayerNorm k_norm, RoPE
// (MLA's) on the last qk_pos_emb_head_dim channels of each, head weights
// from linear_weights_proj; I[s, t] = sum_h w[s, h] n^-1/2 d^-1/2
// ReLU(q[s, h] . k[t]) over each sample's causal pairs. Each query keeps its
// min(topk, s + 1) highest-scoring earlier keys, equal scores to the lower
// key index. The indexer's KL loss against the attention's distribution
// (Megatron's compute_dsa_indexer_loss: every head's causal softmax of the
// detached q and k, summed over heads, L1-normalised; the mean over the
// microbatch's queries, times dsa_indexer_loss_coeff) is the forward's
// return value, added to the stage's auxiliary loss as MoE's is; its
// gradient of the index scores is kept from the forward and reaches only
// the indexer's weights, scaled like MoE's by d(objective)/d(aux loss).
// The target is kept as its difference from the index softmax (the
// target's kernels in TargetKernels.inc), which floats hold precisely.
//
// Over tensor-parallel ranks MLA splits as recipes/Mla.h splits it (the
// heads) and the indexer is every rank's (Megatron's parallel_mode
// "duplicated"): it reads the normed input and query latent MLA computed
// for every token, so every rank scores, keeps and weighs the same keys.
// The target's difference from a rank's heads is summed over the group
// (Megatron-LM all-reduces the attention scores, dsa.py), so every rank
// holds the same loss and its gradient. Backward, with sequence
// parallelism a rank takes the indexer's gradients from the queries of
// its own rows, so its replicated weights' gradients are partial by rows
// and summed over the group as the norms' are; without it every rank
// computes them whole.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_RECIPES_DSA_H
#define HYPIPE_RUNTIME_KERNELS_RECIPES_DSA_H

#include "runtime/kernels/recipes/Mla.h"

namespace hypipe::rt::recipes {

template <class P> struct Dsa {
  const P &k;
  /// The call's tensor-parallel collectives (null: the layer is whole).
  TensorParallelCalls *tp = nullptr;

  /// The layer's output in `y`; returns the indexer's KL loss.
  template <class Tokens>
  float forward(const DsaShape &s, const Tokens &t, const float *params,
                const float *x, float *y, const SavedBases &saved,
                float *ws) const {
    const int64_t T = t.tokens();
    DsaSaved m = dsaSaved(s, k.shape(t), saved);
    const DsaParams<const float> p = dsaParams(s, params);
    const Mla<P> mla{k, tp};
    mla.project(s.mla(), t, params, x, m.mla, ws);
    // The indexer, on the detached normed input and query latent.
    const float *xn = m.mla.core.xn;
    const float *latent = s.mla().qLoraRank > 0 ? m.mla.cq : xn;
    linear(T, s.indexerQueryIn(), s.indexerQueryWidth(), latent, p.wqB, m.q);
    k.mlaRope(s.mla(), t, m.q + s.indexerHeadDim - s.mla().posEmbDim,
              s.indexerQueryWidth(), s.indexerHeads, s.indexerHeadDim);
    k.round(m.q, T * s.indexerQueryWidth());
    linear(T, s.mla().hidden, s.indexerHeadDim, xn, p.wk, m.k);
    k.dsaKeyNormForward(T, s.indexerHeadDim, m.k, p.kNormWeight, p.kNormBias,
                        m.kn, m.kMean, m.kRstd);
    k.round(m.kn, T * s.indexerHeadDim);
    k.mlaRope(s.mla(), t, m.kn + s.indexerHeadDim - s.mla().posEmbDim,
              s.indexerHeadDim, 1, 0);
    k.round(m.kn, T * s.indexerHeadDim);
    linear(T, s.mla().hidden, s.indexerHeads, xn, p.wWeights, m.w);
    float *scores = ws + s.mla().workspaceFloats(k.shape(t));
    k.dsaIndexScores(s, t, m.q, m.kn, m.w, scores);
    k.dsaTopk(s, t, scores, m.keep);
    k.dsaTargetDifference(s, t, m.mla.core, scores, m.keep, m.dScores);
    // Every head's part: Megatron-LM's all-reduce of the attention scores.
    tensorParallel(tp, CollectiveKind::AllReduce, m.dScores, s.seq);
    const int64_t heads = s.heads * (tp ? tp->size() : 1);
    const float loss = k.dsaIndexerLoss(s, t, heads, scores, m.keep, m.dScores);
    k.dsaCoreForward(s.mla().core(), t, m.mla.core, m.keep);
    mla.attend(s.mla(), t, params, x, y, m.mla);
    return loss;
  }

  /// `lossScale` is d(objective)/d(aux loss), as MoE's.
  template <class Tokens>
  void backwardInput(const DsaShape &s, const Tokens &t, const float *params,
                     float *grads, const SavedBases &saved, const float *dy,
                     float *dx, float *ws, float lossScale) const {
    const int64_t T = t.tokens();
    DsaSaved m = dsaSaved(s, k.shape(t), saved);
    const DsaParams<const float> p = dsaParams(s, params);
    const DsaParams<float> g = dsaParams(s, grads);
    const Mla<P> mla{k, tp};
    const typename Mla<P>::CoreGradient c =
        mla.contextGradient(s.mla(), t, params, m.mla, dy, ws);
    k.dsaCoreBackward(s.mla().core(), t, m.mla.core, m.keep, c.dctx, c.rows);
    mla.projectBackward(s.mla(), t, params, grads, m.mla, dy, dx);
    // The indexer's gradients from its loss alone: its inputs are detached.
    float *scratch = ws + s.mla().workspaceFloats(k.shape(t));
    float *dkn = scratch + DsaShape::pairFloats(k.shape(t));
    const SequenceShard rows = sequenceShard(tp, T);
    k.dsaIndexScoresBackward(s, t, rows.first, rows.local, m.q, m.kn, m.w,
                             m.dScores, lossScale, scratch, m.dq, dkn, m.dw);
    k.round(m.dq, T * s.indexerQueryWidth());
    k.round(dkn, T * s.indexerHeadDim);
    k.round(m.dw, T * s.indexerHeads);
    k.mlaRopeBackward(s.mla(), t, m.dq + s.indexerHeadDim - s.mla().posEmbDim,
                      s.indexerQueryWidth(), s.indexerHeads, s.indexerHeadDim);
    k.mlaRopeBackward(s.mla(), t, dkn + s.indexerHeadDim - s.mla().posEmbDim,
                      s.indexerHeadDim, 1, 0);
    k.round(m.dq, T * s.indexerQueryWidth());
    k.round(dkn, T * s.indexerHeadDim);
    k.dsaKeyNormBackward(T, s.indexerHeadDim, m.k, p.kNormWeight, m.kMean,
                         m.kRstd, dkn, m.dk, g.kNormWeight, g.kNormBias);
    k.round(m.dk, T * s.indexerHeadDim);
  }

  template <class Tokens>
  void backwardWeight(const DsaShape &s, const Tokens &t,
                      const SavedBases &saved, float *grads) const {
    const int64_t T = t.tokens();
    Mla<P>{k, tp}.backwardWeight(s.mla(), t, saved, grads);
    const DsaSaved m = dsaSaved(s, k.shape(t), saved);
    const DsaParams<float> g = dsaParams(s, grads);
    const float *xn = m.mla.core.xn;
    const float *latent = s.mla().qLoraRank > 0 ? m.mla.cq : xn;
    k.linearBackwardWeight(T, s.indexerQueryIn(), s.indexerQueryWidth(), m.dq,
                           latent, g.wqB);
    k.linearBackwardWeight(T, s.mla().hidden, s.indexerHeadDim, m.dk, xn, g.wk);
    k.linearBackwardWeight(T, s.mla().hidden, s.indexerHeads, m.dw, xn,
                           g.wWeights);
  }

private:
  /// y = x W^T, rounded: every projection's output is a stored tensor.
  void linear(int64_t T, int64_t in, int64_t out, const float *x,
              const float *w, float *y) const {
    k.linearForward(T, in, out, x, w, y);
    k.round(y, T * out);
  }
};

} // namespace hypipe::rt::recipes

#endif
