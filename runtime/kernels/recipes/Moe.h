//===- Moe.h - the MoE layer, written once over a target's kernels --------===//
//
// The MoE layer's sequence of primitives, the same on the CPU and the GPU:
// the norm, the router's GEMM, the experts' GEMMs and the tensor-parallel
// collectives. The routing itself (softmax, top-k, grouping the routed rows
// by expert, the weighted combine and their gradients) differs between the
// targets -- on the GPU the dispatch sizes come back to the host -- and is
// each target's kernels (TargetKernels.inc's moeRoute and the others, in
// Moe.cpp and Moe.cu).
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_RECIPES_MOE_H
#define HYPIPE_RUNTIME_KERNELS_RECIPES_MOE_H

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/recipes/Primitives.h"

#include <vector>

namespace hypipe::rt::recipes {

/// The experts a rank holds, [first, first + count): all of them, or on an
/// expert grid inside the tensor-parallel group the experts of its
/// expert-parallel rank (tp rank / etp), in its parameters' slots
/// (MoeParams::w1 of e - first).
struct LocalExperts {
  int64_t first = 0, count = 0;
};

inline LocalExperts localExperts(const MoeShape &s,
                                 const TensorParallelCalls *tp) {
  if (!tp || s.expertRanks == 1)
    return {0, s.experts};
  const int64_t etp = tp->size() / s.expertRanks;
  return {tp->rank() / etp * s.localExperts(), s.localExperts()};
}

/// Every local expert's forward over the rows routed to it: fc1, the
/// activation and fc2 from the gathered rows m.xr into m.h1, m.act and
/// m.yr, each rounded to the call's precision once complete. `k` is the
/// target's primitive set (recipes/Primitives.h) with activationForward.
template <class P>
void moeExpertsForward(const P &k, const MoeShape &s, const MoeSaved &m,
                       const MoeParams<const float> &p,
                       const std::vector<int64_t> &off, LocalExperts mine) {
  const int64_t Hd = s.hidden;
  for (int64_t e = mine.first; e < mine.first + mine.count; ++e) {
    int64_t r0 = off[e], n = off[e + 1] - off[e];
    if (n == 0)
      continue;
    k.linearForward(n, Hd, s.fc1Width(), m.xr + r0 * Hd,
                    p.w1(s, e - mine.first), m.h1 + r0 * s.fc1Width());
    k.round(m.h1 + r0 * s.fc1Width(), n * s.fc1Width());
    k.activationForward(s.act, n, s.ffn, m.h1 + r0 * s.fc1Width(),
                        m.act + r0 * s.ffn);
    k.round(m.act + r0 * s.ffn, n * s.ffn);
    k.linearForward(n, s.ffn, Hd, m.act + r0 * s.ffn, p.w2(s, e - mine.first),
                    m.yr + r0 * Hd);
    k.round(m.yr + r0 * Hd, n * Hd);
  }
}

/// Every expert's input-gradient chain over the rows routed to it, from
/// the routed rows' output gradients m.dyr (complete and rounded): fc2's
/// input gradient into `dact` [rows, ffn], the activation's into m.dh1, and
/// fc1's into `dxr` [rows, hidden] (a part of the norm output's gradient:
/// rounded once that is complete, by the caller). `k` as above, with
/// activationBackward.
template <class P>
void moeExpertsBackwardInput(const P &k, const MoeShape &s, const MoeSaved &m,
                             const MoeParams<const float> &p,
                             const std::vector<int64_t> &off, LocalExperts mine,
                             float *dact, float *dxr) {
  const int64_t Hd = s.hidden;
  for (int64_t e = mine.first; e < mine.first + mine.count; ++e) {
    int64_t r0 = off[e], n = off[e + 1] - off[e];
    if (n == 0)
      continue;
    k.linearBackwardInput(n, s.ffn, Hd, m.dyr + r0 * Hd,
                          p.w2(s, e - mine.first), dact + r0 * s.ffn);
    k.round(dact + r0 * s.ffn, n * s.ffn);
    k.activationBackward(s.act, n, s.ffn, m.h1 + r0 * s.fc1Width(),
                         dact + r0 * s.ffn, m.dh1 + r0 * s.fc1Width());
    k.round(m.dh1 + r0 * s.fc1Width(), n * s.fc1Width());
    k.linearBackwardInput(n, Hd, s.fc1Width(), m.dh1 + r0 * s.fc1Width(),
                          p.w1(s, e - mine.first), dxr + r0 * Hd);
  }
}

/// Every expert's two weight gradients over the rows routed to it: `off`
/// holds the experts' first rows (expertOffsets), `k` the target's
/// primitive set.
template <class P>
void moeExpertWeightGradients(const P &k, const MoeShape &s, const MoeSaved &m,
                              const std::vector<int64_t> &off,
                              LocalExperts mine, float *grads) {
  const int64_t Hd = s.hidden;
  MoeParams<float> gp = moeParams(s, grads);
  for (int64_t e = mine.first; e < mine.first + mine.count; ++e) {
    int64_t r0 = off[e], n = off[e + 1] - off[e];
    if (n == 0)
      continue;
    k.linearBackwardWeight(n, Hd, s.fc1Width(), m.dh1 + r0 * s.fc1Width(),
                           m.xr + r0 * Hd, gp.w1(s, e - mine.first));
    k.linearBackwardWeight(n, s.ffn, Hd, m.dyr + r0 * Hd, m.act + r0 * s.ffn,
                           gp.w2(s, e - mine.first));
  }
}

/// The MoE layer, written once over a target's routing kernels
/// (TargetKernels.inc: moeRoute, moeCombine and their backwards) and the
/// experts' recipes above. Split over tensor-parallel ranks (Megatron-LM's
/// expert tensor parallelism at its default, the tensor-parallel size,
/// which needs sequence parallelism) each rank holds a tp-th of every
/// expert's width: fc1 column-parallel, fc2 row-parallel. The group
/// gathers the normed input, every rank routes all the microbatch's tokens
/// with the replicated router (the same logits, so the same choices and
/// load-balancing loss as one rank), runs the experts' shards over every
/// routed row and reduce-scatters the weighted sum; backward, the output's
/// gradient is gathered, the routing weights' gradients (partial: each
/// rank's experts see a tp-th of the width) summed, and the normed input's
/// gradient reduce-scattered before the router's part of it is added for
/// the rows the rank holds, whose router weight gradient the group sums
/// (Trainer::sumSequenceParallelGrads) as Megatron-LM does.
template <class P> struct Moe {
  /// The target's primitives, in the call's precision.
  const P &k;
  /// The call's tensor-parallel collectives (null: the layer is whole).
  TensorParallelCalls *tp = nullptr;

  /// Returns the layer's load-balancing loss (already times its
  /// coefficient); a NaN or infinite router logit is recorded in `check`.
  template <class Tokens>
  float forward(const MoeShape &s, const Tokens &t, const float *params,
                const float *x, float *y, const SavedBases &saved, float *ws,
                RouterCheck *check) const {
    const int64_t T = t.tokens(), E = s.experts, Hd = s.hidden;
    if (T == 0 && !tp)
      return 0.0f;
    MoeParams<const float> p = moeParams(s, params);
    MoeSaved m = moeSaved(s, k.shape(t), saved);
    float *logits = ws;                                             // [T, E]
    int32_t *slotRow = reinterpret_cast<int32_t *>(logits + T * E); // [T, k]
    float *scratch = logits + T * (E + s.topk);
    thread_local std::vector<int64_t> off;
    const SequenceShard q = sequenceShard(tp, T);

    k.copy(m.x, x, q.local * Hd);
    normedInput(k, tp, q, Hd, x, p.norm, m.xn, m.rstd);
    k.linearForward(T, Hd, E, m.xn, p.router, logits);
    // bf16 logits (the router's GEMM writes them); its softmax, the
    // probabilities and the weights stay fp32.
    k.round(logits, T * E);
    const float aux =
        k.moeRoute(s, k.shape(t), logits, m, slotRow, off, check, scratch);
    const LocalExperts mine = localExperts(s, tp);
    // On an expert grid the other ranks' experts' rows stay zero here:
    // their outputs are in the group's sum.
    if (mine.count < s.experts)
      k.zero(m.yr, T * s.topk * Hd);
    moeExpertsForward(k, s, m, p, off, mine);
    if (!tp) {
      // Whole: the residual added in the same pass as the weighted sum.
      k.moeCombine(s, T, m, slotRow, x, y);
      return aux;
    }
    k.moeCombine(s, T, m, slotRow, nullptr, y);
    residualOutput(k, tp, q, Hd, x, y);
    return aux;
  }

  /// Selective recompute: the tensors of the modules `saved` drops,
  /// computed again from the kept ones exactly as the forward computed
  /// them (the normed input from x; every routed row's activation from its
  /// fc1 output: elementwise, so one call over all rows equals the
  /// experts' calls one by one). The moe module runs the layer's forward
  /// again from its kept input, copied to `x` first, into `y` (dropped),
  /// its load-balancing loss dropped too.
  template <class Tokens>
  void recompute(const MoeShape &s, const Tokens &t, const float *params,
                 const SavedBases &saved, float *x, float *y, float *ws,
                 RouterCheck *check) const {
    const int64_t T = t.tokens(), R = T * s.topk;
    MoeSaved m = moeSaved(s, k.shape(t), saved);
    const SequenceShard q = sequenceShard(tp, T);
    if (saved.drops(RecomputeModule::Moe)) {
      k.copy(x, m.x, q.local * s.hidden);
      (void)forward(s, t, params, x, y, saved, ws, check);
      return;
    }
    if (saved.drops(RecomputeModule::LayerNorm))
      normedInput(k, tp, q, s.hidden, m.x, moeParams(s, params).norm, m.xn,
                  m.rstd);
    if (saved.drops(RecomputeModule::MoeAct)) {
      k.activationForward(s.act, R, s.ffn, m.h1, m.act);
      k.round(m.act, R * s.ffn);
    }
  }

  /// `lossScale` is d(objective)/d(aux loss).
  template <class Tokens>
  void backwardInput(const MoeShape &s, const Tokens &t, const float *params,
                     float *grads, const SavedBases &saved, const float *dy,
                     float *dx, float *ws, float lossScale) const {
    const int64_t T = t.tokens(), E = s.experts, Hd = s.hidden, R = T * s.topk;
    if (T == 0 && !tp)
      return;
    MoeParams<const float> p = moeParams(s, params);
    MoeParams<float> gp = moeParams(s, grads);
    MoeSaved m = moeSaved(s, k.shape(t), saved);
    float *dlogits = ws;            // [T, E]
    float *dTopW = dlogits + T * E; // [T, k] (of a [T, E] region)
    float *dxn = dTopW + T * E;     // [T, Hd]
    float *dxr = dxn + T * Hd;      // [R, Hd]
    float *dact = dxr + R * Hd;     // [R, ffn]
    int32_t *slotRow = reinterpret_cast<int32_t *>(dact + R * s.ffn);
    thread_local std::vector<int64_t> off;
    k.moeOffsets(s, m, off);
    const SequenceShard q = sequenceShard(tp, T);

    // The output's gradient whole (gathered into dxn, free until the
    // rows' gradients are gathered there), then each routed row's and
    // each routing weight's.
    const float *dyWhole = dy;
    if (tp) {
      wholeGradient(k, tp, q, Hd, dy, dxn);
      dyWhole = dxn;
    }
    k.moeCombineBackward(s, T, m, dyWhole, dTopW);
    // Each row's output gradient is complete (one token reads a row).
    k.round(m.dyr, R * Hd);
    tensorParallel(tp, CollectiveKind::AllReduce, dTopW, s.topk);

    // dxr is a part of xn's gradient: rounded once xn's is complete. On an
    // expert grid the other ranks' experts' rows add nothing here.
    const LocalExperts held = localExperts(s, tp);
    if (held.count < s.experts)
      k.zero(dxr, R * Hd);
    moeExpertsBackwardInput(k, s, m, p, off, held, dact, dxr);
    k.moeGatherRowGradients(s, T, m, dxr, dxn, slotRow);
    k.moeRouterBackward(s, T, m, dTopW, lossScale, dlogits);
    k.round(dlogits, T * E);
    // The experts' part summed over the group; the router's, the same on
    // every rank, added for this rank's rows only.
    float *mine = sumInputGradient(tp, q, Hd, dxn);
    const float *dl = dlogits + q.first * E;
    k.linearBackwardInput(q.local, Hd, E, dl, p.router, mine,
                          /*accumulate=*/true);
    k.linearBackwardWeight(q.local, Hd, E, dl, m.xn + q.first * Hd, gp.router);
    k.round(mine, q.local * Hd);
    k.copy(dx, dy, q.local * Hd);
    k.rmsnormBackward(q.local, Hd, m.x, p.norm, m.rstd, mine, dx, gp.norm,
                      true);
    k.round(dx, q.local * Hd);
  }

  template <class Tokens>
  void backwardWeight(const MoeShape &s, const Tokens &t,
                      const SavedBases &saved, float *grads) const {
    if (t.tokens() == 0)
      return;
    MoeSaved m = moeSaved(s, k.shape(t), saved);
    thread_local std::vector<int64_t> off;
    k.moeOffsets(s, m, off);
    moeExpertWeightGradients(k, s, m, off, localExperts(s, tp), grads);
  }
};

} // namespace hypipe::rt::recipes

#endif
