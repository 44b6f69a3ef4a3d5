//===- Moe.cpp - dropless mixture of experts on the CPU -------------------===//
//
// Router: logits = xn Wr^T, p = softmax(logits), the top-k experts of each
// token (ties to the lower index) with weights p / sum(top-k p). Every
// routed (token, slot) pair within its expert's capacity (all of them,
// dropless: core/model/MoeCapacity.h) becomes one row; rows are grouped by
// expert in token order, so each expert runs two GEMMs over its rows; a
// dropped pair has no row, and its weight counts as 0. Load-balancing loss
// (Switch/Megatron): coeff * E * sum_e f_e P_e with f_e the fraction of the
// T*k assignments that went to e (before any was dropped) and P_e the mean
// router probability.
//
//===----------------------------------------------------------------------===//

#include "runtime/kernels/recipes/Moe.h"
#include "core/model/BufferLayouts.h"
#include "core/model/MoeCapacity.h"
#include "core/numeric/Bf16.h"
#include "runtime/kernels/cpu/Kernels.h"
#include "runtime/kernels/cpu/Primitives.h"
#include "runtime/kernels/cpu/Profile.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace hypipe::rt::cpu {
namespace {

/// The first token (in token order, so at any thread count) whose router
/// logits hold a NaN or an infinity, and that logit.
struct NonFiniteLogit {
  int64_t token;
  float logit = 0;
  void keepFirst(const NonFiniteLogit &o) {
    if (o.token < token)
      *this = o;
  }
};

} // namespace

namespace {
/// The load-balancing loss of replica `r`'s routing (its `real` tokens
/// from row r T on, the rest of its T rows padding; its counts m.routed +
/// r E): the experts' summed probabilities against their counts
/// (Megatron's switch loss, over the real tokens as its router's padding
/// mask takes them).
double loadBalancingLoss(const MoeShape &s, int64_t T, int64_t real,
                         const MoeSaved &m, int64_t r) {
  const int64_t E = s.experts, k = s.topk;
  if (real == 0)
    return 0;
  const float *probs = m.probs + r * T * E;
  const int32_t *routed = m.routed + r * E;
  double aux = 0;
  for (int64_t e = 0; e < E; ++e) {
    double pe = 0;
    for (int64_t tok = 0; tok < real; ++tok)
      pe += probs[tok * E + e];
    aux += pe * routed[e];
  }
  return aux * (s.auxLossCoeff * double(E) /
                (double(real) * double(real) * double(k)));
}
} // namespace

float Kernels::moeRoute(const MoeShape &s, const TokenShape &t,
                        const float *logits, MoeSaved &m, int32_t *slotRow,
                        std::vector<int64_t> &off, RouterCheck *check,
                        float *) const {
  const int64_t T = t.tokens();
  const int64_t E = s.experts, k = s.topk, Hd = s.hidden;
  ProfileScope routing(KernelClass::MoeRouting);
  NonFiniteLogit first{T};
  // Tokens over the threads: each its softmax and top-k.
#pragma omp parallel
  {
    thread_local std::vector<int64_t> orderOfThread;
    orderOfThread.resize(size_t(E));
    int64_t *order = orderOfThread.data();
    NonFiniteLogit firstOfThread{T};
#pragma omp for schedule(static)
    for (int64_t tok = 0; tok < T; ++tok) {
      const float *l = logits + tok * E;
      float *pr = m.probs + tok * E;
      float mx = l[0];
      for (int64_t e = 0; e < E; ++e) {
        if (!std::isfinite(l[e]) && tok < firstOfThread.token)
          firstOfThread = {tok, l[e]};
        mx = std::max(mx, l[e]);
      }
      double sum = 0;
      for (int64_t e = 0; e < E; ++e)
        sum += std::exp(double(l[e] - mx));
      for (int64_t e = 0; e < E; ++e)
        pr[e] = float(std::exp(double(l[e] - mx)) / sum);
      // Top-k by probability, ties to the lower expert index: a stable
      // insertion sort (E is small; nothing allocated).
      for (int64_t e = 0; e < E; ++e) {
        int64_t at = e;
        for (; at > 0 && pr[order[at - 1]] < pr[e]; --at)
          order[at] = order[at - 1];
        order[at] = e;
      }
      double z = 0;
      for (int64_t j = 0; j < k; ++j)
        z += pr[order[j]];
      for (int64_t j = 0; j < k; ++j) {
        m.topIdx[tok * k + j] = int32_t(order[j]);
        m.topW[tok * k + j] = float(pr[order[j]] / z);
      }
    }
#pragma omp critical(hypipe_moe_router_check)
    first.keepFirst(firstOfThread);
  }
  if (first.token < T && !check->nonFinite)
    *check = {1, first.logit};
  // Each replica's counts and load-balancing loss (one replica but on an
  // expert grid over data-parallel ones: MoeShape::groupReplicas); the
  // layer's loss is their mean, so the replicas' ranks add up to their sum.
  // Padding rows (past a replica's real tokens) count nowhere: the router
  // backward finds each replica's real tokens from its counts.
  const int64_t replicas = s.groupReplicas, perReplica = T / replicas;
  std::fill(m.routed, m.routed + replicas * E, 0);
  double aux = 0;
  for (int64_t r = 0; r < replicas; ++r) {
    const int64_t real = s.realTokens(t, r);
    for (int64_t slot = r * perReplica * k; slot < (r * perReplica + real) * k;
         ++slot)
      ++m.routed[r * E + m.topIdx[slot]];
    const double mine = loadBalancingLoss(s, perReplica, real, m, r);
    m.aux[r] = float(mine);
    aux += mine;
  }
  aux /= double(replicas);

  // The choices within capacity, counted; a row for each, grouped by
  // expert in token order. A dropped choice's slot (a padding row's every
  // one) has no row (-1).
  thread_local std::vector<uint8_t> kept;
  keepWithinCapacity(s, t, m.topIdx, m.topW, kept);
  std::fill(m.counts, m.counts + E, 0);
  for (int64_t slot = 0; slot < T * k; ++slot)
    m.counts[m.topIdx[slot]] += kept[size_t(slot)];
  expertOffsets(s, m.counts, off);
  recipes::holdRowsOf(m, off);
  thread_local std::vector<int64_t> fill;
  fill = off;
  for (int64_t tok = 0; tok < T; ++tok)
    for (int64_t j = 0; j < k; ++j) {
      if (!kept[size_t(tok * k + j)]) {
        slotRow[tok * k + j] = -1;
        continue;
      }
      int64_t r = fill[m.topIdx[tok * k + j]]++;
      m.rowMap[r] = int32_t(tok * k + j);
      slotRow[tok * k + j] = int32_t(r);
      if (m.holds(r)) // the held experts' rows alone
        std::memcpy(m.xr + (r - m.rowFrom) * Hd, m.xn + tok * Hd,
                    sizeof(float) * Hd);
    }
  return float(aux);
}

void Kernels::moeCombine(const MoeShape &s, int64_t T, const MoeSaved &m,
                         const int32_t *slotRow, const float *x,
                         float *y) const {
  const int64_t k = s.topk, Hd = s.hidden;
  const bool bf16 = x && activations == DType::BF16;
  ProfileScope routing(KernelClass::MoeRouting);
#pragma omp parallel for schedule(static)
  for (int64_t tok = 0; tok < T; ++tok) {
    float *yt = y + tok * Hd;
    const float *xt = x ? x + tok * Hd : nullptr;
    if (xt && !bf16)
      std::memcpy(yt, xt, sizeof(float) * Hd);
    else
      std::fill(yt, yt + Hd, 0.0f);
    for (int64_t j = 0; j < k; ++j) {
      // Dropped (no row): its weight is 0; not held: another rank's
      // expert's, whose output is in the group's sum.
      if (!m.holds(slotRow[tok * k + j]))
        continue;
      const float *yr = m.yr + (slotRow[tok * k + j] - m.rowFrom) * Hd;
      float w = m.topW[tok * k + j];
      for (int64_t i = 0; i < Hd; ++i)
        yt[i] += w * yr[i];
    }
    // bf16: the weighted sum is the layer's output before the residual,
    // rounded, then the sum with the residual is.
    if (bf16)
      for (int64_t i = 0; i < Hd; ++i)
        yt[i] = bf16::round(xt[i] + bf16::round(yt[i]));
  }
}

void Kernels::moeOffsets(const MoeShape &s, MoeSaved &m,
                         std::vector<int64_t> &off) const {
  expertOffsets(s, m.counts, off);
  recipes::holdRowsOf(m, off);
}

void Kernels::moeRowMap(const MoeSaved &m, int64_t rows,
                        std::vector<int32_t> &rowMap) const {
  rowMap.assign(m.rowMap, m.rowMap + rows);
}

void Kernels::moeCombineBackward(const MoeShape &s, int64_t T,
                                 const MoeSaved &m, const float *dy,
                                 float *dTopW) const {
  const int64_t k = s.topk, Hd = s.hidden;
  ProfileScope routing(KernelClass::MoeRouting);
  // Output = x + sum_j w_j y_j: rows get w * dy, weights get <dy, y_j>;
  // a dropped choice's weight (0 whatever the router says) gets 0, and so
  // does one of another rank's expert (its output is not this rank's).
  const int64_t held = m.heldRows();
  if (held < T * k)
    std::fill(dTopW, dTopW + T * k, 0.0f);
#pragma omp parallel for schedule(static)
  for (int64_t h = 0; h < held; ++h) {
    int64_t slot = m.rowMap[m.rowFrom + h], tok = slot / k;
    float w = m.topW[slot];
    const float *dyt = dy + tok * Hd, *yr = m.yr + h * Hd;
    float *dyr = m.dyr + h * Hd;
    double dot = 0;
    for (int64_t i = 0; i < Hd; ++i) {
      dyr[i] = w * dyt[i];
      dot += double(dyt[i]) * yr[i];
    }
    dTopW[slot] = float(dot);
  }
}

void Kernels::moeGatherRowGradients(const MoeShape &s, int64_t T,
                                    const MoeSaved &m, const float *dxr,
                                    float *dxn, int32_t *slotRow) const {
  const int64_t k = s.topk, Hd = s.hidden;
  ProfileScope routing(KernelClass::MoeRouting);
  // Each token gathers its k rows (fewer where a capacity dropped some),
  // in row order (the order a scatter over the rows adds them in), tokens
  // over the threads.
  // Only the held rows: the others' gradients are other ranks'.
  std::fill(slotRow, slotRow + T * k, -1);
  for (int64_t r = m.rowFrom; r < m.rowTo; ++r)
    slotRow[m.rowMap[r]] = int32_t(r - m.rowFrom);
#pragma omp parallel for schedule(static)
  for (int64_t tok = 0; tok < T; ++tok) {
    float *d = dxn + tok * Hd;
    std::fill(d, d + Hd, 0.0f);
    int64_t last = -1;
    for (int64_t j = 0; j < k; ++j) {
      int64_t next = T * k; // the smallest row of the token after `last`
      for (int64_t jj = 0; jj < k; ++jj) {
        const int64_t r = slotRow[tok * k + jj];
        if (r > last && r < next)
          next = r;
      }
      if (next == T * k)
        break; // the token's remaining choices were dropped
      for (int64_t i = 0; i < Hd; ++i)
        d[i] += dxr[next * Hd + i];
      last = next;
    }
  }
}

void Kernels::moeRouterBackward(const MoeShape &s, int64_t T, const MoeSaved &m,
                                const float *dTopW, float lossScale,
                                float *dlogits) const {
  const int64_t E = s.experts, k = s.topk;
  ProfileScope routing(KernelClass::MoeRouting);
  // Renormalisation w_j = p_j / Z over the chosen experts, then the
  // load-balancing loss, then softmax; each token's probabilities'
  // gradient in its row of dlogits first.
  // Each replica's tokens against its own counts (MoeShape::groupReplicas),
  // which sum to k times its real tokens; a padding row (past them) has no
  // gradient.
  // (This thread's vectors, which the loop's threads read through the
  // pointers: no allocation once warm.)
  const int64_t perReplica = T / s.groupReplicas;
  thread_local std::vector<int64_t> realOfThread;
  thread_local std::vector<double> scaleOfThread;
  realOfThread.assign(size_t(s.groupReplicas), 0);
  scaleOfThread.assign(size_t(s.groupReplicas), 0.0);
  int64_t *real = realOfThread.data();
  double *auxScale = scaleOfThread.data();
  for (int64_t r = 0; r < s.groupReplicas; ++r) {
    for (int64_t e = 0; e < E; ++e)
      real[r] += m.routed[r * E + e];
    real[r] /= k;
    if (real[r] > 0)
      auxScale[r] = double(lossScale) * s.auxLossCoeff * double(E) /
                    (double(real[r]) * double(real[r]) * double(k));
  }
#pragma omp parallel for schedule(static)
  for (int64_t tok = 0; tok < T; ++tok) {
    const int64_t r = tok / perReplica;
    const int32_t *routed = m.routed + r * E;
    const float *pr = m.probs + tok * E;
    float *dp = dlogits + tok * E;
    std::fill(dp, dp + E, 0.0f);
    if (tok - r * perReplica >= real[r])
      continue; // padding
    double z = 0, wdw = 0;
    for (int64_t j = 0; j < k; ++j) {
      z += pr[m.topIdx[tok * k + j]];
      wdw += double(m.topW[tok * k + j]) * dTopW[tok * k + j];
    }
    for (int64_t j = 0; j < k; ++j)
      dp[m.topIdx[tok * k + j]] += float((dTopW[tok * k + j] - wdw) / z);
    for (int64_t e = 0; e < E; ++e)
      dp[e] += float(auxScale[r] * routed[e]);
    double dot = 0;
    for (int64_t e = 0; e < E; ++e)
      dot += double(dp[e]) * pr[e];
    for (int64_t e = 0; e < E; ++e)
      dp[e] = pr[e] * (dp[e] - float(dot));
  }
}

} // namespace hypipe::rt::cpu
