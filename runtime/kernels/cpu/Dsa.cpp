//===- Dsa.cpp - DeepSeek sparse attention's own kernels on the CPU -------===//
//
// What recipes/Dsa.h adds to MLA: the indexer's LayerNorm, its scores, the
// top-k keys, the KL loss and its gradient, and attention's core over the
// kept keys. Per sample and head the [len, len] products are one OpenBLAS
// GEMM each (the indexer's q . k, the core's q . k and P V, and their
// gradients); the masks, softmaxes and the selection are loops over a row.
// Every sample's blocks lie one after another (DsaShape::pairFloats); the
// work items are samples (or samples and heads where no two write the same
// rows), so the sums are in a fixed order whatever the threads.
//
//===----------------------------------------------------------------------===//

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/LayerNormRows.h"
#include "runtime/kernels/cpu/Kernels.h"
#include "runtime/kernels/cpu/Primitives.h"
#include "runtime/kernels/cpu/Profile.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

namespace hypipe::rt::cpu {
namespace {

constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();
/// Megatron's compute_dsa_indexer_loss adds it inside both logarithms.
constexpr double kLogGuard = 1e-10;

/// Where each sample's [len, len] block starts.
std::vector<int64_t> pairOffsets(const TokenShape &t) {
  std::vector<int64_t> offsets(size_t(t.sequences()) + 1, 0);
  for (int64_t b = 0; b < t.sequences(); ++b)
    offsets[size_t(b) + 1] = offsets[size_t(b)] + t.length(b) * t.length(b);
  return offsets;
}

/// A thread's [len, len] scratch.
float *blockScratch(int64_t len, int copy = 0) {
  thread_local std::vector<float> buf[2];
  buf[copy].resize(size_t(len * len));
  return buf[copy].data();
}

/// The factor on each head's weight: n^-1/2 d^-1/2 (Megatron's
/// index_n_heads**-0.5 * softmax_scale).
float headWeightScale(const DsaShape &s) {
  return float(1.0 / std::sqrt(double(s.indexerHeads)) /
               std::sqrt(double(s.indexerHeadDim)));
}

} // namespace

void Kernels::dsaKeyNormForward(int64_t T, int64_t n, const float *x,
                                const float *weight, const float *bias,
                                float *y, float *mean, float *rstd) {
  ProfileScope scope(KernelClass::Attention);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < T; ++r)
    layerNormRowForward(r, n, x, weight, bias, kNormEps, y, mean, rstd);
}

void Kernels::dsaKeyNormBackward(int64_t T, int64_t n, const float *x,
                                 const float *weight, const float *mean,
                                 const float *rstd, const float *dy, float *dx,
                                 float *dWeight, float *dBias) {
  ProfileScope scope(KernelClass::Attention);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < T; ++r)
    layerNormRowInputGrad(r, n, x, weight, mean, rstd, dy, dx);
    // The weight's and bias's gradients column by column, rows in order.
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < n; ++j)
    layerNormColumnParamGrad(j, T, n, x, mean, rstd, dy, dWeight, dBias);
}

void Kernels::dsaIndexScores(const DsaShape &s, const TokenShape &t,
                             const float *q, const float *k, const float *w,
                             float *scores) {
  ProfileScope scope(KernelClass::Attention);
  const int64_t n = s.indexerHeads, d = s.indexerHeadDim, qw = n * d;
  const float c = headWeightScale(s);
  const std::vector<int64_t> at = pairOffsets(t);
#pragma omp parallel for schedule(dynamic)
  for (int64_t b = 0; b < t.sequences(); ++b) {
    const int64_t L = t.length(b), row0 = t.start(b);
    float *I = scores + at[size_t(b)], *G = blockScratch(L);
    std::fill(I, I + L * L, 0.0f);
    for (int64_t h = 0; h < n; ++h) {
      gemm(false, true, L, L, d, 1.0f, q + row0 * qw + h * d, qw, k + row0 * d,
           d, 0.0f, G, L);
      for (int64_t i = 0; i < L; ++i) {
        const float wi = c * w[(row0 + i) * n + h];
        for (int64_t j = 0; j <= i; ++j)
          I[i * L + j] += wi * std::max(G[i * L + j], 0.0f);
      }
    }
    for (int64_t i = 0; i < L; ++i)
      std::fill(I + i * L + i + 1, I + (i + 1) * L, kMinusInfinity);
  }
}

void Kernels::dsaTopk(const DsaShape &s, const TokenShape &t,
                      const float *scores, float *keep) {
  ProfileScope scope(KernelClass::Attention);
  const std::vector<int64_t> at = pairOffsets(t);
#pragma omp parallel for schedule(dynamic)
  for (int64_t b = 0; b < t.sequences(); ++b) {
    const int64_t L = t.length(b);
    thread_local std::vector<int64_t> order;
    for (int64_t i = 0; i < L; ++i) {
      const float *I = scores + at[size_t(b)] + i * L;
      float *kept = keep + at[size_t(b)] + i * L;
      std::fill(kept, kept + L, 0.0f);
      // The min(topk, i + 1) highest of the causal keys 0..i, equal scores
      // to the lower index (a strict order: the selection is one set).
      const int64_t count = std::min<int64_t>(s.topk, i + 1);
      order.resize(size_t(i + 1));
      std::iota(order.begin(), order.end(), int64_t(0));
      std::nth_element(order.begin(), order.begin() + (count - 1), order.end(),
                       [&](int64_t a, int64_t c) {
                         return I[a] > I[c] || (I[a] == I[c] && a < c);
                       });
      for (int64_t j = 0; j < count; ++j)
        kept[order[size_t(j)]] = 1.0f;
    }
  }
}

namespace {

/// A row's causal softmax over its keys `in` (j <= i, and kept with the
/// sparse loss) in double, 0 for the others: the index softmax Q of the
/// scores, or a head's of its q . k.
template <class In>
void indexSoftmax(int64_t i, const float *r, In in, double *q) {
  double mx = -std::numeric_limits<double>::infinity(), z = 0;
  for (int64_t j = 0; j <= i; ++j)
    if (in(j))
      mx = std::max(mx, double(r[j]));
  for (int64_t j = 0; j <= i; ++j)
    if (in(j))
      z += std::exp(double(r[j]) - mx);
  for (int64_t j = 0; j <= i; ++j)
    q[j] = in(j) ? std::exp(double(r[j]) - mx) / z : 0.0;
}

} // namespace

void Kernels::dsaTargetDifference(const DsaShape &s, const TokenShape &t,
                                  const AttnSaved &a, const float *scores,
                                  const float *keep, float *dScores) {
  ProfileScope scope(KernelClass::Attention);
  const AttentionShape core = s.mla().core();
  const int64_t n = core.heads, D = core.headDim, Wd = core.qkvWidth();
  const float scale = core.scoreScale();
  const std::vector<int64_t> at = pairOffsets(t);
#pragma omp parallel for schedule(dynamic)
  for (int64_t b = 0; b < t.sequences(); ++b) {
    const int64_t L = t.length(b), row0 = t.start(b);
    const float *I = scores + at[size_t(b)], *kept = keep + at[size_t(b)];
    // The heads' softmaxes less the index softmax, summed in double; the
    // difference, 0.2% of the target at initialisation, is what is stored.
    // (Double carries n Q - sum_h P_h without loss.)
    thread_local std::vector<double> diff, head;
    diff.assign(size_t(L * L), 0.0);
    head.resize(size_t(L));
    for (int64_t i = 0; i < L; ++i) {
      const float *kr = kept + i * L;
      double *d = diff.data() + i * L;
      indexSoftmax(
          i, I + i * L, [&](int64_t j) { return !s.sparseLoss || kr[j] != 0; },
          d);
      for (int64_t j = 0; j <= i; ++j)
        d[j] *= -double(n);
    }
    float *G = blockScratch(L, 1);
    for (int64_t h = 0; h < n; ++h) {
      const float *base = a.qkv + row0 * Wd + 3 * h * D;
      gemm(false, true, L, L, D, scale, base, Wd, base + D, Wd, 0.0f, G, L);
      for (int64_t i = 0; i < L; ++i) {
        const float *kr = kept + i * L;
        indexSoftmax(
            i, G + i * L,
            [&](int64_t j) { return !s.sparseLoss || kr[j] != 0; },
            head.data());
        for (int64_t j = 0; j <= i; ++j)
          diff[size_t(i * L + j)] += head[size_t(j)];
      }
    }
    float *out = dScores + at[size_t(b)];
    for (int64_t e = 0; e < L * L; ++e)
      out[e] = float(diff[size_t(e)]);
  }
}

float Kernels::dsaIndexerLoss(const DsaShape &s, const TokenShape &t,
                              int64_t heads, const float *scores,
                              const float *keep, float *dScores) {
  ProfileScope scope(KernelClass::Attention);
  // The mean over the microbatch's rows; sequence parallelism's padding
  // adds no loss.
  const int64_t rows = t.lossRows();
  const double coeff = s.lossCoeff / double(std::max<int64_t>(rows, 1));
  const std::vector<int64_t> at = pairOffsets(t);
  double loss = 0;
#pragma omp parallel for schedule(dynamic) reduction(+ : loss)
  for (int64_t b = 0; b < t.sequences(); ++b) {
    const int64_t L = t.length(b);
    if (t.start(b) >= rows) {
      std::fill(dScores + at[size_t(b)], dScores + at[size_t(b)] + L * L, 0.0f);
      continue;
    }
    thread_local std::vector<double> q, target;
    q.resize(size_t(L));
    target.resize(size_t(L));
    for (int64_t i = 0; i < L; ++i) {
      const float *r = scores + at[size_t(b)] + i * L,
                  *kr = keep + at[size_t(b)] + i * L;
      float *dr = dScores + at[size_t(b)] + i * L;
      auto in = [&](int64_t j) { return j <= i && (!s.sparseLoss || kr[j]); };
      indexSoftmax(i, r, in, q.data());
      // The target T = Q + D / heads (the heads' mean softmax),
      // L1-normalised.
      double total = 0;
      for (int64_t j = 0; j <= i; ++j)
        if (in(j)) {
          target[size_t(j)] = q[j] + double(dr[j]) / double(heads);
          total += target[size_t(j)];
        }
      // KL(T || softmax(I)) and its gradient: with Q the index softmax,
      // d/dI_m of -sum_j T_j log(Q_j + e) is -T_m Q_m / (Q_m + e) +
      // Q_m sum_j T_j Q_j / (Q_j + e).
      double kl = 0, inner = 0;
      for (int64_t j = 0; j <= i; ++j)
        if (in(j)) {
          const double tj = target[size_t(j)] / total, qj = q[j];
          kl += tj * (std::log(tj + kLogGuard) - std::log(qj + kLogGuard));
          inner += tj * qj / (qj + kLogGuard);
        }
      for (int64_t j = 0; j < L; ++j)
        dr[j] = in(j) ? float(coeff * (-target[size_t(j)] / total * q[j] /
                                           (q[j] + kLogGuard) +
                                       q[j] * inner))
                      : 0.0f;
      loss += kl;
    }
  }
  return float(coeff * loss);
}

void Kernels::dsaCoreForward(const AttentionShape &s, const TokenShape &t,
                             AttnSaved &a, const float *keep) {
  ProfileScope scope(KernelClass::Attention);
  const int64_t n = s.heads, D = s.headDim, Wd = s.qkvWidth(),
                Cw = s.contextWidth();
  const float scale = s.scoreScale();
  const std::vector<int64_t> at = pairOffsets(t);
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t b = 0; b < t.sequences(); ++b)
    for (int64_t h = 0; h < n; ++h) {
      const int64_t L = t.length(b), row0 = t.start(b);
      const float *base = a.qkv + row0 * Wd + 3 * h * D,
                  *kept = keep + at[size_t(b)];
      float *P = blockScratch(L);
      gemm(false, true, L, L, D, scale, base, Wd, base + D, Wd, 0.0f, P, L);
      for (int64_t i = 0; i < L; ++i) {
        float *p = P + i * L;
        const float *kr = kept + i * L;
        float mx = kMinusInfinity, sum = 0;
        for (int64_t j = 0; j < L; ++j)
          if (kr[j] != 0)
            mx = std::max(mx, p[j]);
        for (int64_t j = 0; j < L; ++j) {
          p[j] = kr[j] != 0 ? fastExp(p[j] - mx) : 0.0f;
          sum += p[j];
        }
        for (int64_t j = 0; j < L; ++j)
          p[j] /= sum;
        a.softmax[(row0 + i) * n + h] = mx + std::log(sum);
      }
      gemm(false, false, L, D, L, 1.0f, P, L, base + 2 * D, Wd, 0.0f,
           a.ctx + row0 * Cw + h * D, Cw);
    }
}

void Kernels::dsaCoreBackward(const AttentionShape &s, const TokenShape &t,
                              AttnSaved &a, const float *keep,
                              const float *dctx, float *rows) {
  ProfileScope scope(KernelClass::Attention);
  const int64_t T = t.tokens(), n = s.heads, D = s.headDim, Wd = s.qkvWidth(),
                Cw = s.contextWidth();
  const float scale = s.scoreScale();
  const std::vector<int64_t> at = pairOffsets(t);
  std::memset(a.dqkv, 0, sizeof(float) * T * Wd);
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < T; ++row)
    for (int64_t h = 0; h < n; ++h) {
      float dot = 0;
      for (int64_t d = 0; d < D; ++d)
        dot += a.ctx[row * Cw + h * D + d] * dctx[row * Cw + h * D + d];
      rows[row * n + h] = dot;
    }
    // One query group a head: a (sample, head) writes its own columns.
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t b = 0; b < t.sequences(); ++b)
    for (int64_t h = 0; h < n; ++h) {
      const int64_t L = t.length(b), row0 = t.start(b);
      const float *base = a.qkv + row0 * Wd + 3 * h * D,
                  *kept = keep + at[size_t(b)], *dO = dctx + row0 * Cw + h * D;
      float *dbase = a.dqkv + row0 * Wd + 3 * h * D;
      float *P = blockScratch(L), *dP = blockScratch(L, 1);
      gemm(false, true, L, L, D, scale, base, Wd, base + D, Wd, 0.0f, P, L);
      gemm(false, true, L, L, D, 1.0f, dO, Cw, base + 2 * D, Wd, 0.0f, dP, L);
      for (int64_t i = 0; i < L; ++i) {
        const float lse = a.softmax[(row0 + i) * n + h],
                    rd = rows[(row0 + i) * n + h];
        const float *kr = kept + i * L;
        for (int64_t j = 0; j < L; ++j) {
          const float p = kr[j] != 0 ? fastExp(P[i * L + j] - lse) : 0.0f;
          P[i * L + j] = p;
          dP[i * L + j] = p * (dP[i * L + j] - rd) * scale;
        }
      }
      gemm(true, false, L, D, L, 1.0f, P, L, dO, Cw, 1.0f, dbase + 2 * D, Wd);
      gemm(false, false, L, D, L, 1.0f, dP, L, base + D, Wd, 1.0f, dbase, Wd);
      gemm(true, false, L, D, L, 1.0f, dP, L, base, Wd, 1.0f, dbase + D, Wd);
    }
}

void Kernels::dsaIndexScoresBackward(const DsaShape &s, const TokenShape &t,
                                     int64_t first, int64_t rows,
                                     const float *q, const float *k,
                                     const float *w, const float *dScores,
                                     float lossScale, float *, float *dq,
                                     float *dk, float *dw) {
  ProfileScope scope(KernelClass::Attention);
  const int64_t n = s.indexerHeads, d = s.indexerHeadDim, qw = n * d;
  const float c = headWeightScale(s);
  const std::vector<int64_t> at = pairOffsets(t);
  std::memset(dq, 0, sizeof(float) * t.tokens() * qw);
  std::memset(dk, 0, sizeof(float) * t.tokens() * d);
  std::memset(dw, 0, sizeof(float) * t.tokens() * n);
  // A sample's rows are its own; its heads add into its k's gradient in
  // order.
#pragma omp parallel for schedule(dynamic)
  for (int64_t b = 0; b < t.sequences(); ++b) {
    const int64_t L = t.length(b), row0 = t.start(b);
    const float *dI = dScores + at[size_t(b)];
    float *A = blockScratch(L), *M = blockScratch(L, 1);
    for (int64_t h = 0; h < n; ++h) {
      const float *qh = q + row0 * qw + h * d;
      gemm(false, true, L, L, d, 1.0f, qh, qw, k + row0 * d, d, 0.0f, A, L);
      for (int64_t i = 0; i < L; ++i) {
        const float wi = c * w[(row0 + i) * n + h];
        const bool mine = row0 + i >= first && row0 + i < first + rows;
        double dwi = 0;
        for (int64_t j = 0; j < L; ++j) {
          const float g = mine && j <= i ? lossScale * dI[i * L + j] : 0.0f;
          const float s2 = A[i * L + j];
          dwi += double(g) * std::max(s2, 0.0f);
          M[i * L + j] = s2 > 0 ? g * wi : 0.0f;
        }
        dw[(row0 + i) * n + h] = float(c * dwi);
      }
      gemm(false, false, L, d, L, 1.0f, M, L, k + row0 * d, d, 0.0f,
           dq + row0 * qw + h * d, qw);
      gemm(true, false, L, d, L, 1.0f, M, L, qh, qw, 1.0f, dk + row0 * d, d);
    }
  }
}

} // namespace hypipe::rt::cpu
