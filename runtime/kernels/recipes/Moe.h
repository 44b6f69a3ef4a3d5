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

#include <numeric>
#include <string>
#include <vector>

namespace hypipe::rt::recipes {

/// The experts a rank holds, [first, first + count): all of them, or on an
/// expert grid the experts of its expert-parallel rank (its rank in the
/// layer's group / etp: the tensor-parallel group, or over data-parallel
/// replicas the tp-ep group, whose calls `tp` then is), in its parameters'
/// slots (MoeParams::w1 of e - first).
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

/// The held routed rows (MoeSaved::rowFrom, rowTo) from the experts' first
/// rows `off`: the target's routing kernels set them as they find `off`.
inline void holdRowsOf(MoeSaved &m, const std::vector<int64_t> &off) {
  if (!holdRows(m, off))
    throw RuntimeError(
        "error: the experts " + std::to_string(m.expertFrom) + " to " +
        std::to_string(m.expertTo - 1) + " took " +
        std::to_string(off[size_t(m.expertTo)] - off[size_t(m.expertFrom)]) +
        " routed rows, more than the " + std::to_string(m.rowRoom) +
        " their saved tensors hold (MoeShape::heldRows)\nhelp: this is a bug "
        "in hypipe; please report it");
}

/// A run of `rows` consecutive routed rows from row `row` on.
struct RowSegment {
  int64_t row = 0, rows = 0;
};

/// What the alltoall dispatcher moves (Megatron-LM's
/// MoEAlltoAllTokenDispatcher over the tensor-parallel group of ep x etp
/// ranks, etp fastest): the rows routed from each tensor-parallel rank's
/// tokens (its sequence shard) to the experts of each expert-parallel rank.
/// Every rank routes every token the same way, so every rank knows every
/// count: nothing is exchanged but the rows. Rows routed to one expert are
/// in token order, so the rows of one rank's tokens to one expert are one
/// segment. `send[p]` lists, in order, the segments this rank sends to tp
/// rank p when dispatching (its tokens' rows to p's experts) and `recv[p]`
/// those it receives from p (p's tokens' rows to this rank's experts, into
/// the same places of the routed rows); returning the experts' outputs
/// swaps the two. So Megatron-LM's all-to-all over ep and all-gather over
/// etp are one all-to-all over the group: every etp rank of an ep rank
/// receives the rows routed to its experts (and going back, each etp rank's
/// partial output of a row reaches the row's rank, which sums them).
struct RowExchange {
  std::vector<std::vector<RowSegment>> send, recv;
};

/// The segments of rank `me` of `ranks` (`rowMap`: each routed row's slot,
/// `off`: each expert's first row, `T` the microbatch's tokens).
inline RowExchange rowExchange(const MoeShape &s,
                               const std::vector<int32_t> &rowMap,
                               const std::vector<int64_t> &off, int64_t T,
                               int64_t ranks, int64_t me) {
  const int64_t E = s.experts, perRank = T / ranks, etp = ranks / s.expertRanks,
                local = s.localExperts();
  // first[rho][e]: where rank rho's tokens' rows to expert e begin.
  std::vector<std::vector<int64_t>> first(size_t(ranks + 1),
                                          std::vector<int64_t>(size_t(E)));
  for (int64_t e = 0; e < E; ++e) {
    int64_t rho = 0;
    first[0][size_t(e)] = off[size_t(e)];
    for (int64_t r = off[size_t(e)]; r < off[size_t(e) + 1]; ++r) {
      const int64_t from = rowMap[size_t(r)] / s.topk / perRank;
      if (from < rho)
        throw RuntimeError("error: the routed rows of expert " +
                           std::to_string(e) +
                           " are not in token order\nhelp: this is a bug in "
                           "hypipe; please report it");
      for (; rho < from; ++rho)
        first[size_t(rho) + 1][size_t(e)] = r;
    }
    for (; rho < ranks; ++rho)
      first[size_t(rho) + 1][size_t(e)] = off[size_t(e) + 1];
  }
  auto segment = [&](int64_t rho, int64_t e) {
    const int64_t a = first[size_t(rho)][size_t(e)];
    return RowSegment{a, first[size_t(rho) + 1][size_t(e)] - a};
  };
  RowExchange x;
  x.send.resize(size_t(ranks));
  x.recv.resize(size_t(ranks));
  for (int64_t p = 0; p < ranks; ++p)
    for (int64_t j = 0; j < local; ++j) {
      x.send[size_t(p)].push_back(segment(me, p / etp * local + j));
      x.recv[size_t(p)].push_back(segment(p, me / etp * local + j));
    }
  return x;
}

/// Moves routed rows of `width` floats in place in `rows` as `send` and
/// `recv` say (RowExchange), through the call's all-to-all: packed into
/// `sendBuf`, received into `recvBuf` (`room` rows each:
/// MoeShape::exchangedRows), put in their places. With `sumOver` > 1 the
/// rows from the tp ranks p, p+1, ... of one group of `sumOver` land on the
/// same rows and are summed, in rank order.
template <class P>
void exchangeRows(const P &k, TensorParallelCalls &tp,
                  const std::vector<std::vector<RowSegment>> &send,
                  const std::vector<std::vector<RowSegment>> &recv,
                  int64_t width, float *rows, float *sendBuf, float *recvBuf,
                  int64_t room, int64_t sumOver) {
  // Each peer's rows, out and in (every rank knows every count).
  auto totals = [](const std::vector<std::vector<RowSegment>> &blocks) {
    std::vector<int64_t> n;
    for (const std::vector<RowSegment> &segments : blocks) {
      n.push_back(0);
      for (const RowSegment &g : segments)
        n.back() += g.rows;
    }
    return n;
  };
  const std::vector<int64_t> out = totals(send), in = totals(recv);
  const int64_t sent = std::accumulate(out.begin(), out.end(), int64_t(0)),
                received = std::accumulate(in.begin(), in.end(), int64_t(0));
  if (sent > room || received > room)
    throw RuntimeError(
        "error: the alltoall dispatcher sends " + std::to_string(sent) +
        " and receives " + std::to_string(received) +
        " routed rows, more than the " + std::to_string(room) +
        " its buffers hold (MoeShape::exchangedRows)\nhelp: this is a bug in "
        "hypipe; please report it");
  int64_t at = 0;
  for (const std::vector<RowSegment> &segments : send)
    for (const RowSegment &g : segments) {
      k.copy(sendBuf + at * width, rows + g.row * width, g.rows * width);
      at += g.rows;
    }
  tp.allToAll(sendBuf, out, recvBuf, in, width);
  at = 0;
  for (size_t p = 0; p < recv.size(); ++p)
    for (const RowSegment &g : recv[p]) {
      float *into = rows + g.row * width;
      if (int64_t(p) % sumOver == 0)
        k.copy(into, recvBuf + at * width, g.rows * width);
      else
        k.addInto(into, recvBuf + at * width, g.rows * width);
      at += g.rows;
    }
}

/// The backward's scratch in the workspace of a T-token call: the logits'
/// gradient [T, E], the routing weights' [T, k] (in a [T, E] region), the
/// normed input's [T, Hd], the held routed rows' [L, Hd] (L = m.rowRoom,
/// MoeSaved: as the saved rows, row r at r - m.rowFrom), the activations'
/// [L, ffn] and each slot's row [T, k].
struct BackwardScratch {
  float *dlogits, *dTopW, *dxn, *dxr, *dact;
  int32_t *slotRow;
};
inline BackwardScratch backwardScratch(const MoeShape &s, int64_t T,
                                       const MoeSaved &m, float *ws) {
  const int64_t L = m.rowRoom;
  BackwardScratch b;
  b.dlogits = ws;
  b.dTopW = b.dlogits + T * s.experts;
  b.dxn = b.dTopW + T * s.experts;
  b.dxr = b.dxn + T * s.hidden;
  b.dact = b.dxr + L * s.hidden;
  b.slotRow = reinterpret_cast<int32_t *>(b.dact + L * s.ffn);
  return b;
}

/// Every local expert's forward over the rows routed to it: fc1, the
/// activation and fc2 from the gathered rows m.xr into m.h1, m.act and
/// m.yr, each rounded to the call's precision once complete. `k` is the
/// target's primitive set (recipes/Primitives.h) with activationForward.
/// Every held row (MoeSaved) is local's, so after this they are all
/// written.
template <class P>
void moeExpertsForward(const P &k, const MoeShape &s, const MoeSaved &m,
                       const MoeParams<const float> &p,
                       const std::vector<int64_t> &off, LocalExperts mine) {
  const int64_t Hd = s.hidden;
  for (int64_t e = mine.first; e < mine.first + mine.count; ++e) {
    int64_t r0 = off[e] - m.rowFrom, n = off[e + 1] - off[e];
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
/// input gradient into `dact` [held rows, ffn], the activation's into
/// m.dh1, and fc1's into `dxr` [held rows, hidden] (a part of the norm
/// output's gradient: rounded once that is complete, by the caller). `k`
/// as above, with activationBackward.
template <class P>
void moeExpertsBackwardInput(const P &k, const MoeShape &s, const MoeSaved &m,
                             const MoeParams<const float> &p,
                             const std::vector<int64_t> &off, LocalExperts mine,
                             float *dact, float *dxr) {
  const int64_t Hd = s.hidden;
  for (int64_t e = mine.first; e < mine.first + mine.count; ++e) {
    int64_t r0 = off[e] - m.rowFrom, n = off[e + 1] - off[e];
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
    int64_t r0 = off[e] - m.rowFrom, n = off[e + 1] - off[e];
    if (n == 0)
      continue;
    k.linearBackwardWeight(n, Hd, s.fc1Width(), m.dh1 + r0 * s.fc1Width(),
                           m.xr + r0 * Hd, gp.w1(s, e - mine.first));
    k.linearBackwardWeight(n, s.ffn, Hd, m.dyr + r0 * Hd, m.act + r0 * s.ffn,
                           gp.w2(s, e - mine.first));
  }
}

/// Over data-parallel replicas (MoeShape::groupReplicas m > 1) `tp` is the
/// layer's tp-ep group's calls (LayerGroup) and the layer runs as below on
/// the m replicas' microbatches as one of m times the tokens, each rank
/// holding its rows; each replica's tokens keep their own capacity and
/// load-balancing loss (the routing kernels'), the reported loss their mean.
///
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
/// (Trainer::sumTensorParallelPartialGrads) as Megatron-LM does.
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
    // The group's tokens (MoeShape::groupReplicas replicas' microbatches).
    const int64_t T = t.tokens() * s.groupReplicas, E = s.experts,
                  Hd = s.hidden;
    if (T == 0 && !tp)
      return 0.0f;
    if (allToAll(s))
      return forwardAllToAll(s, t, params, x, y, saved, ws, check);
    MoeParams<const float> p = moeParams(s, params);
    MoeSaved m = savedOf(s, t, saved);
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
    const float aux = k.moeRoute(s, s.group(k.shape(t)), logits, m, slotRow,
                                 off, check, scratch);
    // On an expert grid this rank holds its experts' rows alone; the
    // combine takes the others' as zero (their outputs are in the group's
    // sum).
    moeExpertsForward(k, s, m, p, off, localExperts(s, tp));
    if (!tp) {
      // Whole: the residual added in the same pass as the weighted sum.
      k.moeCombine(s, T, m, slotRow, x, y);
      return aux;
    }
    // Over data-parallel replicas the group's tokens' sums outnumber the
    // output's rows: they are summed in the workspace.
    float *sums =
        s.groupReplicas > 1 ? ws + s.routingWorkspaceFloats(k.shape(t)) : y;
    k.moeCombine(s, T, m, slotRow, nullptr, sums);
    residualOutput(k, tp, q, Hd, x, sums);
    if (sums != y)
      k.copy(y, sums, q.local * Hd);
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
    const int64_t T = t.tokens() * s.groupReplicas;
    MoeSaved m = savedOf(s, t, saved);
    const SequenceShard q = sequenceShard(tp, T);
    if (saved.drops(RecomputeModule::Moe)) {
      k.copy(x, m.x, q.local * s.hidden);
      (void)forward(s, t, params, x, y, saved, ws, check);
      return;
    }
    if (saved.drops(RecomputeModule::LayerNorm) && allToAll(s))
      preNorm(k, q.local, s.hidden, m.x, moeParams(s, params).norm,
              m.xn + q.first * s.hidden, m.rstd); // its rows only
    else if (saved.drops(RecomputeModule::LayerNorm))
      normedInput(k, tp, q, s.hidden, m.x, moeParams(s, params).norm, m.xn,
                  m.rstd);
    if (saved.drops(RecomputeModule::MoeAct)) {
      thread_local std::vector<int64_t> off;
      k.moeOffsets(s, m, off); // the held rows
      k.activationForward(s.act, m.heldRows(), s.ffn, m.h1, m.act);
      k.round(m.act, m.heldRows() * s.ffn);
    }
  }

  /// `lossScale` is d(objective)/d(aux loss).
  template <class Tokens>
  void backwardInput(const MoeShape &s, const Tokens &t, const float *params,
                     float *grads, const SavedBases &saved, const float *dy,
                     float *dx, float *ws, float lossScale) const {
    const int64_t T = t.tokens() * s.groupReplicas, E = s.experts,
                  Hd = s.hidden;
    if (T == 0 && !tp)
      return;
    if (allToAll(s)) {
      backwardInputAllToAll(s, t, params, grads, saved, dy, dx, ws, lossScale);
      return;
    }
    MoeParams<const float> p = moeParams(s, params);
    MoeParams<float> gp = moeParams(s, grads);
    MoeSaved m = savedOf(s, t, saved);
    const BackwardScratch b = backwardScratch(s, T, m, ws);
    float *dlogits = b.dlogits, *dTopW = b.dTopW, *dxn = b.dxn, *dxr = b.dxr,
          *dact = b.dact;
    int32_t *slotRow = b.slotRow;
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
    k.round(m.dyr, m.heldRows() * Hd);
    tensorParallel(tp, CollectiveKind::AllReduce, dTopW, s.topk);

    // dxr is a part of xn's gradient: rounded once xn's is complete. On an
    // expert grid the other ranks' experts' rows (not held) add nothing.
    moeExpertsBackwardInput(k, s, m, p, off, localExperts(s, tp), dact, dxr);
    k.moeGatherRowGradients(s, T, m, dxr, dxn, slotRow);
    k.moeRouterBackward(s, T, m, dTopW, lossScale, dlogits);
    k.round(dlogits, T * E);
    // The experts' part summed over the group; the router's, the same on
    // every rank, added for this rank's rows only.
    routerAndNormBackward(s, q, p, gp, m, dlogits,
                          sumInputGradient(tp, q, Hd, dxn), dy, dx);
  }

  template <class Tokens>
  void backwardWeight(const MoeShape &s, const Tokens &t,
                      const SavedBases &saved, float *grads) const {
    if (t.tokens() == 0)
      return;
    MoeSaved m = savedOf(s, t, saved);
    thread_local std::vector<int64_t> off;
    k.moeOffsets(s, m, off);
    moeExpertWeightGradients(k, s, m, off, localExperts(s, tp), grads);
  }

private:
  /// The alltoall dispatcher runs this layer (MoeShape::allToAll, over
  /// tensor-parallel ranks with sequence parallelism).
  bool allToAll(const MoeShape &s) const {
    return tp && s.allToAll && tp->sequenceParallel();
  }

  /// The layer's saved tensors, whose routed rows are this rank's experts'
  /// (every expert's where the alltoall dispatcher runs: its own tokens'
  /// rows go out from them). The room is the shape's (MoeShape::heldRows
  /// of heldExperts), which is at least these experts'.
  template <class Tokens>
  MoeSaved savedOf(const MoeShape &s, const Tokens &t,
                   const SavedBases &saved) const {
    if (allToAll(s))
      return moeSaved(s, k.shape(t), saved, 0, s.experts);
    const LocalExperts mine = localExperts(s, tp);
    if (mine.count > s.heldExperts())
      throw RuntimeError("error: a MoE layer of " +
                         std::to_string(s.expertRanks) +
                         " expert-parallel ranks runs without its group\n"
                         "help: this is a bug in hypipe; please report it");
    return moeSaved(s, k.shape(t), saved, mine.first, mine.count);
  }

  /// The segments of this rank's exchanges, from the routing in `m` (which
  /// holds every expert's rows, so group row r at r).
  RowExchange exchangeOf(const MoeShape &s, const MoeSaved &m,
                         const std::vector<int64_t> &off, int64_t T) const {
    thread_local std::vector<int32_t> rowMap;
    k.moeRowMap(m, off[size_t(s.experts)], rowMap);
    return rowExchange(s, rowMap, off, T, tp->size(), tp->rank());
  }

  /// The layer's input gradient from `mine` (the normed input's gradient
  /// of this rank's rows, from the experts, complete), the router's part
  /// added for the same rows from `dlogits`, through the pre-norm with the
  /// residual into dx; the router's and the norm's weight gradients.
  void routerAndNormBackward(const MoeShape &s, const SequenceShard &q,
                             const MoeParams<const float> &p,
                             MoeParams<float> &gp, const MoeSaved &m,
                             const float *dlogits, float *mine, const float *dy,
                             float *dx) const {
    const int64_t E = s.experts, Hd = s.hidden;
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

  /// The alltoall dispatcher's forward. Each rank norms its own rows and
  /// computes their router logits; the logits are gathered, so every rank
  /// routes every token (moeRoute: the same choices, capacity and
  /// load-balancing loss as the allgather dispatcher's). The routed rows
  /// of this rank's tokens go to the ranks of their experts and the
  /// experts' outputs come back (RowExchange); this rank combines its own
  /// tokens' rows with the residual. Only this rank's rows of m.xn are
  /// written (the others are zero): only they reach an expert.
  template <class Tokens>
  float forwardAllToAll(const MoeShape &s, const Tokens &t, const float *params,
                        const float *x, float *y, const SavedBases &saved,
                        float *ws, RouterCheck *check) const {
    const int64_t T = t.tokens() * s.groupReplicas, E = s.experts,
                  Hd = s.hidden;
    MoeParams<const float> p = moeParams(s, params);
    MoeSaved m = savedOf(s, t, saved);
    float *logits = ws;                                             // [T, E]
    int32_t *slotRow = reinterpret_cast<int32_t *>(logits + T * E); // [T, k]
    float *scratch = logits + T * (E + s.topk);
    // [X, Hd] each: X = MoeShape::exchangedRows.
    const int64_t X = s.exchangedRows(s.group(k.shape(t)));
    float *sendBuf = ws + s.routingWorkspaceFloats(k.shape(t));
    float *recvBuf = sendBuf + X * Hd;
    thread_local std::vector<int64_t> off;
    const SequenceShard q = sequenceShard(tp, T);

    k.copy(m.x, x, q.local * Hd);
    k.zero(m.xn, T * Hd);
    preNorm(k, q.local, Hd, x, p.norm, m.xn + q.first * Hd, m.rstd);
    k.linearForward(q.local, Hd, E, m.xn + q.first * Hd, p.router,
                    logits + q.first * E);
    k.round(logits + q.first * E, q.local * E);
    tp->run(CollectiveKind::AllGather, logits, E);
    const float aux = k.moeRoute(s, s.group(k.shape(t)), logits, m, slotRow,
                                 off, check, scratch);
    const RowExchange ex = exchangeOf(s, m, off, T);
    exchangeRows(k, *tp, ex.send, ex.recv, Hd, m.xr, sendBuf, recvBuf, X, 1);
    const LocalExperts mine = localExperts(s, tp);
    if (mine.count < s.experts)
      k.zero(m.yr, m.heldRows() * Hd);
    moeExpertsForward(k, s, m, p, off, mine);
    exchangeRows(k, *tp, ex.recv, ex.send, Hd, m.yr, sendBuf, recvBuf, X,
                 tp->size() / s.expertRanks);
    MoeSaved own = m; // this rank's tokens' weights
    own.topW += q.first * s.topk;
    k.moeCombine(s, q.local, own, slotRow + q.first * s.topk, x, y);
    return aux;
  }

  /// The alltoall dispatcher's input gradient: this rank's tokens' routed
  /// rows' output gradients (and their routing weights' gradients,
  /// complete: the rows' outputs came back whole) to the ranks of their
  /// experts, the experts' input gradients back (each etp rank's part
  /// summed by the row's rank), then the router and the pre-norm over this
  /// rank's rows.
  template <class Tokens>
  void backwardInputAllToAll(const MoeShape &s, const Tokens &t,
                             const float *params, float *grads,
                             const SavedBases &saved, const float *dy,
                             float *dx, float *ws, float lossScale) const {
    const int64_t T = t.tokens() * s.groupReplicas, E = s.experts,
                  Hd = s.hidden;
    MoeParams<const float> p = moeParams(s, params);
    MoeParams<float> gp = moeParams(s, grads);
    MoeSaved m = savedOf(s, t, saved);
    const BackwardScratch b = backwardScratch(s, T, m, ws);
    // [X, Hd] each: X = MoeShape::exchangedRows.
    const int64_t X = s.exchangedRows(s.group(k.shape(t)));
    float *sendBuf = ws + s.routingWorkspaceFloats(k.shape(t));
    float *recvBuf = sendBuf + X * Hd;
    thread_local std::vector<int64_t> off;
    k.moeOffsets(s, m, off);
    const RowExchange ex = exchangeOf(s, m, off, T);
    const SequenceShard q = sequenceShard(tp, T);

    // The output's gradient of this rank's rows in their place (the other
    // rows zero): its tokens' rows' and routing weights' gradients.
    k.zero(b.dxn, T * Hd);
    k.copy(b.dxn + q.first * Hd, dy, q.local * Hd);
    k.moeCombineBackward(s, T, m, b.dxn, b.dTopW);
    k.round(m.dyr, m.heldRows() * Hd);
    exchangeRows(k, *tp, ex.send, ex.recv, Hd, m.dyr, sendBuf, recvBuf, X, 1);
    k.zero(b.dxr, m.heldRows() * Hd);
    moeExpertsBackwardInput(k, s, m, p, off, localExperts(s, tp), b.dact,
                            b.dxr);
    exchangeRows(k, *tp, ex.recv, ex.send, Hd, b.dxr, sendBuf, recvBuf, X,
                 tp->size() / s.expertRanks);
    k.moeGatherRowGradients(s, T, m, b.dxr, b.dxn, b.slotRow);
    k.moeRouterBackward(s, T, m, b.dTopW, lossScale, b.dlogits);
    k.round(b.dlogits, T * E);
    routerAndNormBackward(s, q, p, gp, m, b.dlogits, b.dxn + q.first * Hd, dy,
                          dx);
  }
};

} // namespace hypipe::rt::recipes

#endif
