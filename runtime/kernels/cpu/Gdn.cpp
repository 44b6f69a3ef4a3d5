//===- Gdn.cpp - the Gated DeltaNet mixer on the CPU ----------------------===//
//
// in_proj -> [q k v | z | beta alpha]; causal depthwise conv1d (no bias) +
// SiLU over [q k v]; q, k L2-normalised per key head; g = -exp(A_log)
// softplus(alpha + dt_bias), beta = sigmoid(beta); per value head j (key
// head j / (nv / nk)) the gated delta rule from a zero state
//   S_t = e^{g_t} (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,
//   o_t = S_t^T q_t / sqrt(dk),
// in its chunked (WY) form; RMSNorm over dv times SiLU(z); out_proj. The
// conv and the rule start from zero at every sequence start, so packed
// samples (TokenShape::cuSeqlens) never see one another.
//
// The chunked rule. A chunk is a run of at most kChunk rows of one sequence
// that ends at the sequence's end or at a multiple of kChunk microbatch
// rows. Inside one, with S0 its entering state, Gc_t = g_0 + ... + g_t and
// Gamma_t = e^{Gc_t}, the rows' updates u_t = beta_t (v_t - (e^{g_t}
// S_{t-1})^T k_t) solve the unit-lower-triangular system
//   (I + A) U = beta V - diag(beta Gamma) K S0,
//   A_ts = beta_t e^{Gc_t - Gc_s} k_t.k_s  (s < t),
// (forward substitution: OpenBLAS's strsm), and then
//   O = diag(Gamma) Q S0 + (Q K^T o D) U,  D_ts = e^{Gc_t - Gc_s} (s <= t),
//   S_out = Gamma_last S0 + (diag(e^{Gc_last - Gc}) K)^T U,
// GEMMs of kChunk x kChunk, kChunk x dk and dk x dv blocks (the form of
// flash-linear-attention's chunk_gated_delta_rule and transformers'
// torch_chunk_gated_delta_rule). The state entering every chunk that
// starts on a multiple of kChunk rows is saved.
//
// Backward: chunks in reverse, each from its saved entering state: the
// chunk's states are recomputed row by row (the forward recurrence, kept in
// the value head's scratch), then the recurrence's adjoint runs back over
// its rows, carrying the state's gradient into the chunk before. So
// nothing beyond the chunk-start states is stored, at the price of dk x dv
// vector work per row instead of GEMMs (docs/gdn.md).
//
//===----------------------------------------------------------------------===//

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/cpu/Kernels.h"
#include "runtime/kernels/cpu/Primitives.h"
#include "runtime/kernels/cpu/Profile.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace hypipe::rt::cpu {
namespace {

constexpr int64_t L = GdnShape::kChunk;
/// The L2 norm's epsilon (Megatron's l2norm, fla's).
constexpr double kL2Eps = 1e-6;

/// Each row's sequence start and end, of the calling thread, kept across
/// calls.
struct RowSequences {
  std::vector<int64_t> first, end;
  void build(const TokenShape &t) {
    sequenceStartOfRows(t, first);
    end.assign(first.size(), 0);
    for (int64_t q = 0; q < t.sequences(); ++q)
      for (int64_t r = t.start(q); r < t.start(q) + t.length(q); ++r)
        end[size_t(r)] = t.start(q) + t.length(q);
  }
};
RowSequences &rowSequences(const TokenShape &t) {
  thread_local RowSequences rows;
  rows.build(t);
  return rows;
}

/// The chunks of rows [0, T), in row order, by `body(a, b)`: runs of one
/// sequence that end at its end or at a multiple of L.
template <class Body>
void forEachChunk(const RowSequences &rows, int64_t T, Body body) {
  for (int64_t a = 0; a < T;) {
    const int64_t b = std::min(rows.end[size_t(a)], (a / L + 1) * L);
    body(a, b);
    a = b;
  }
}

/// Where value head j's rows live: q̂ and k (its key head's), v, g, beta.
struct HeadRows {
  const float *q, *k, *v, *g, *beta;
  int64_t qkStride, vStride, gStride;
  HeadRows(const GdnShape &s, const GdnSaved &m, int64_t j) {
    const int64_t kh = j / s.headsPerKey();
    q = m.qk + kh * s.keyHeadDim;
    k = m.qk + s.keyWidth() + kh * s.keyHeadDim;
    v = m.conv + 2 * s.keyWidth() + j * s.valueHeadDim;
    g = m.g + j;
    beta = m.beta + j;
    qkStride = 2 * s.keyWidth();
    vStride = s.convChannels();
    gStride = s.valueHeads;
  }
};

/// The saved state entering chunk c of value head j.
float *chunkState(const GdnShape &s, float *states, int64_t c, int64_t j) {
  return states + (c * s.valueHeads + j) * s.stateFloats();
}

/// One chunk [a, b) of value head j: O's rows (into m.o) and the state S
/// updated in place (S0 in, S_out out). `w`: the head's scratch.
void ruleChunkForward(const GdnShape &s, const HeadRows &h, int64_t a,
                      int64_t b, float *o, int64_t oStride, float *S,
                      bool zeroState, float *w) {
  const int64_t n = b - a, dk = s.keyHeadDim, dv = s.valueHeadDim;
  const float scale = float(1.0 / std::sqrt(double(dk)));
  float *Q = w, *K = Q + L * dk, *Kd = K + L * dk, *R = Kd + L * dk;
  float *A = R + L * (dv + dk), *P = A + L * L, *Gc = P + L * L, *bt = Gc + L;
  const int64_t rw = dv + dk; // R's rows: [beta v | beta Gamma k], then U
  double acc = 0;
  for (int64_t t = 0; t < n; ++t) {
    const int64_t r = a + t;
    acc += h.g[r * h.gStride];
    Gc[t] = float(acc);
    bt[t] = h.beta[r * h.gStride];
    const float gamma = std::exp(Gc[t]);
    for (int64_t d = 0; d < dk; ++d) {
      Q[t * dk + d] = h.q[r * h.qkStride + d] * scale;
      K[t * dk + d] = h.k[r * h.qkStride + d];
      R[t * rw + dv + d] = bt[t] * gamma * K[t * dk + d];
    }
    for (int64_t e = 0; e < dv; ++e)
      R[t * rw + e] = bt[t] * h.v[r * h.vStride + e];
  }
  // A: beta_t e^{Gc_t - Gc_s} k_t.k_s below the diagonal (strsm reads no
  // more of it); P: the decayed q_t.k_s on and below it.
  gemm(false, true, n, n, dk, 1.0f, K, dk, K, dk, 0.0f, A, n);
  gemm(false, true, n, n, dk, 1.0f, Q, dk, K, dk, 0.0f, P, n);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t u = 0; u < n; ++u) {
      const float decay = u <= t ? std::exp(Gc[t] - Gc[u]) : 0.0f;
      A[t * n + u] *= bt[t] * decay;
      P[t * n + u] *= decay;
    }
  cblas_strsm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasUnit,
              int(n), int(rw), 1.0f, A, int(n), R, int(rw));
  // U = (I + A)^-1 beta V - (I + A)^-1 diag(beta Gamma) K S0, in R's first
  // dv columns.
  if (!zeroState)
    gemm(false, false, n, dv, dk, -1.0f, R + dv, rw, S, dv, 1.0f, R, rw);
  // O = diag(Gamma) Q S0 + P U.
  if (!zeroState) {
    for (int64_t t = 0; t < n; ++t) {
      const float gamma = std::exp(Gc[t]);
      for (int64_t d = 0; d < dk; ++d)
        Kd[t * dk + d] = Q[t * dk + d] * gamma;
    }
    gemm(false, false, n, dv, dk, 1.0f, Kd, dk, S, dv, 0.0f, o, oStride);
  }
  gemm(false, false, n, dv, n, 1.0f, P, n, R, rw, zeroState ? 0.0f : 1.0f, o,
       oStride);
  // S_out = Gamma_last S0 + (diag(e^{Gc_last - Gc}) K)^T U.
  const float last = Gc[n - 1];
  for (int64_t t = 0; t < n; ++t) {
    const float decay = std::exp(last - Gc[t]);
    for (int64_t d = 0; d < dk; ++d)
      Kd[t * dk + d] = K[t * dk + d] * decay;
  }
  if (zeroState)
    std::fill(S, S + dk * dv, 0.0f);
  else
    cblas_sscal(int(dk * dv), std::exp(last), S, 1);
  gemm(true, false, dk, dv, n, 1.0f, Kd, dk, R, rw, 1.0f, S, dv);
}

/// u = e^{g} S_{t-1}^T k: what the decayed state predicts for v.
void decayedReadout(const GdnShape &s, const float *Sp, const float *k,
                    float eg, float *u) {
  const int64_t dk = s.keyHeadDim, dv = s.valueHeadDim;
  cblas_sgemv(CblasRowMajor, CblasTrans, int(dk), int(dv), eg, Sp, int(dv), k,
              1, 0.0f, u, 1);
}

/// S_t from S_{t-1} (row r): S_t = e^{g} S_{t-1} + k delta^T with delta =
/// beta (v - e^{g} S_{t-1}^T k); `u` gets e^{g} S_{t-1}^T k, `delta` the
/// update.
void ruleStep(const GdnShape &s, const HeadRows &h, int64_t r, const float *Sp,
              float *St, float *u, float *delta) {
  const int64_t dk = s.keyHeadDim, dv = s.valueHeadDim;
  const float eg = std::exp(h.g[r * h.gStride]), beta = h.beta[r * h.gStride];
  const float *k = h.k + r * h.qkStride, *v = h.v + r * h.vStride;
  decayedReadout(s, Sp, k, eg, u);
  for (int64_t e = 0; e < dv; ++e)
    delta[e] = beta * (v[e] - u[e]);
  for (int64_t i = 0; i < dk * dv; ++i)
    St[i] = eg * Sp[i];
  cblas_sger(CblasRowMajor, int(dk), int(dv), 1.0f, k, 1, delta, 1, St,
             int(dv));
}

/// Gradients into the rule's outputs (recipes/Gdn.h's gdnRuleBackward).
struct RuleGrads {
  const float *dO;
  float *dqk, *dconv, *dg, *dbeta;
};

/// The adjoint of chunk [a, b) of value head j: from dS (the gradient of
/// the state it leaves, in place: the one it enters with, out), its rows'
/// gradients. `w`: the head's scratch.
void ruleChunkBackward(const GdnShape &s, const HeadRows &h, int64_t j,
                       int64_t a, int64_t b, const float *S0,
                       const RuleGrads &out, float *dS, float *w) {
  const int64_t n = b - a, dk = s.keyHeadDim, dv = s.valueHeadDim,
                nv = s.valueHeads, V = s.valueWidth(), Cc = s.convChannels();
  const float scale = float(1.0 / std::sqrt(double(dk)));
  const int64_t SF = s.stateFloats();
  float *states = w; // [n + 1][dk][dv]: S_{a-1} .. S_{b-1}
  float *u = states + (L + 1) * SF, *dd = u + dv, *du = dd + dv;
  if (S0)
    std::copy(S0, S0 + SF, states);
  else
    std::fill(states, states + SF, 0.0f);
  for (int64_t t = 0; t < n; ++t)
    ruleStep(s, h, a + t, states + t * SF, states + (t + 1) * SF, u, du);
  // The row's products are OpenBLAS level-2 calls on the [dk, dv] state
  // and its gradient (vectorised; the scalar sums in double).
  const auto gemv = [&](bool trans, float alpha, const float *M, const float *x,
                        float beta, float *y) {
    cblas_sgemv(CblasRowMajor, trans ? CblasTrans : CblasNoTrans, int(dk),
                int(dv), alpha, M, int(dv), x, 1, beta, y, 1);
  };
  for (int64_t t = n - 1; t >= 0; --t) {
    const int64_t r = a + t;
    const float *Sp = states + t * SF, *St = states + (t + 1) * SF;
    const float eg = std::exp(h.g[r * h.gStride]), beta = h.beta[r * h.gStride];
    const float *q = h.q + r * h.qkStride, *k = h.k + r * h.qkStride,
                *v = h.v + r * h.vStride, *dO = out.dO + r * V + j * dv;
    float *dq = out.dqk + (r * 2 * nv + j) * dk,
          *dk_ = out.dqk + ((r * 2 + 1) * nv + j) * dk;
    decayedReadout(s, Sp, k, eg, u);
    // o = S_t^T q scale: dq = S_t dO scale, dS += q scale dO^T.
    gemv(false, scale, St, dO, 0.0f, dq);
    cblas_sger(CblasRowMajor, int(dk), int(dv), scale, q, 1, dO, 1, dS,
               int(dv));
    // S_t = S~ + k delta^T, delta = beta (v - u), u = S~^T k:
    // dk = dS delta, d(delta) = dS^T k.
    for (int64_t e = 0; e < dv; ++e)
      du[e] = beta * (v[e] - u[e]); // delta, for now
    gemv(false, 1.0f, dS, du, 0.0f, dk_);
    gemv(true, 1.0f, dS, k, 0.0f, dd);
    double dbeta = 0;
    float *dvOut = out.dconv + r * Cc + 2 * s.keyWidth() + j * dv;
    for (int64_t e = 0; e < dv; ++e) {
      dbeta += double(dd[e]) * (v[e] - u[e]);
      dvOut[e] = beta * dd[e];
      du[e] = -beta * dd[e];
    }
    out.dbeta[r * nv + j] = float(dbeta);
    // dS~ = dS + k du^T; dk += S~ du; dg = <dS~, S~>; dS = e^{g} dS~.
    gemv(false, eg, Sp, du, 1.0f, dk_);
    cblas_sger(CblasRowMajor, int(dk), int(dv), 1.0f, k, 1, du, 1, dS, int(dv));
    out.dg[r * nv + j] = float(cblas_dsdot(int(SF), dS, 1, Sp, 1) * eg);
    cblas_sscal(int(SF), eg, dS, 1);
  }
}

/// The conv weight [channels][K] as [K][channels] (transposedTaps).
const float *transposedConvWeight(const GdnShape &s, const float *w) {
  return transposedTaps(s.convChannels(), s.convWidth, w);
}

/// The causal conv's pre-activations of row `row`, every channel: the taps
/// inside the row's sequence (`first` its first row), in tap order; `wT`
/// the weight [K][channels].
void convPreRow(const GdnShape &s, const float *proj, const float *wT,
                int64_t row, int64_t first, float *out) {
  const int64_t K = s.convWidth, W = s.inProj(), Cc = s.convChannels();
  std::fill(out, out + Cc, 0.0f);
  for (int64_t k = std::max<int64_t>(0, first - (row - (K - 1))); k < K; ++k) {
    const float *in = proj + (row - (K - 1) + k) * W, *w = wT + k * Cc;
    for (int64_t c = 0; c < Cc; ++c)
      out[c] += w[c] * in[c];
  }
}

/// Channels a work item of the conv's weight gradient sums.
constexpr int64_t kConvBlock = 16;

/// body(at, rh, o, z, zAt) for every (row, value head), over the threads:
/// `at` the head's offset in [T, value width] rows (o, its norm's output),
/// `rh` in [T, value heads], `zAt` z's in in_proj's rows.
template <class Body>
void forEachRowHead(const GdnShape &s, const TokenShape &t, const GdnSaved &m,
                    Body body) {
  const int64_t T = t.tokens(), nv = s.valueHeads, dv = s.valueHeadDim,
                V = s.valueWidth(), W = s.inProj(), Cc = s.convChannels();
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < T; ++row)
    for (int64_t j = 0; j < nv; ++j) {
      const int64_t at = row * V + j * dv, zAt = row * W + Cc + j * dv;
      body(at, row * nv + j, m.o + at, m.proj + zAt, zAt);
    }
}

} // namespace

void Kernels::gdnConvForward(const GdnShape &s, const TokenShape &t,
                             const GdnParams<const float> &p, GdnSaved &m) {
  ProfileScope conv(KernelClass::Conv);
  const int64_t T = t.tokens(), Cc = s.convChannels();
  const RowSequences &rows = rowSequences(t);
  const float *wT = transposedConvWeight(s, p.convW);
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < T; ++row) {
    float *out = m.conv + row * Cc;
    convPreRow(s, m.proj, wT, row, rows.first[size_t(row)], out);
    for (int64_t c = 0; c < Cc; ++c)
      out[c] = silu(out[c]);
  }
}

void Kernels::gdnGatesForward(const GdnShape &s, const TokenShape &t,
                              const GdnParams<const float> &p, GdnSaved &m) {
  ProfileScope norm(KernelClass::Norm);
  const int64_t T = t.tokens(), nk = s.keyHeads, nv = s.valueHeads,
                dk = s.keyHeadDim, Cc = s.convChannels(), W = s.inProj(),
                Kw = s.keyWidth(), V = s.valueWidth();
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < T; ++row) {
    for (int64_t part = 0; part < 2; ++part)
      for (int64_t h = 0; h < nk; ++h) {
        const float *x = m.conv + row * Cc + part * Kw + h * dk;
        double ss = 0;
        for (int64_t d = 0; d < dk; ++d)
          ss += double(x[d]) * x[d];
        const float inv = float(1.0 / std::sqrt(ss + kL2Eps));
        m.qkInv[row * 2 * nk + part * nk + h] = inv;
        float *y = m.qk + row * 2 * Kw + part * Kw + h * dk;
        for (int64_t d = 0; d < dk; ++d)
          y[d] = x[d] * inv;
      }
    const float *beta = m.proj + row * W + Cc + V, *alpha = beta + nv;
    for (int64_t j = 0; j < nv; ++j) {
      m.beta[row * nv + j] = sigmoid(beta[j]);
      m.g[row * nv + j] =
          -std::exp(p.aLog[j]) * softplus(alpha[j] + p.dtBias[j]);
    }
  }
}

void Kernels::gdnRuleForward(const GdnShape &s, const TokenShape &t,
                             GdnSaved &m, float *ws) {
  ProfileScope scan(KernelClass::Scan);
  const int64_t T = t.tokens(), dv = s.valueHeadDim, V = s.valueWidth();
  const RowSequences &rows = rowSequences(t);
#pragma omp parallel for schedule(dynamic)
  for (int64_t j = 0; j < s.valueHeads; ++j) {
    const HeadRows h(s, m, j);
    float *w = ws + j * s.ruleScratchFloats();
    float *S = w + (s.ruleScratchFloats() - s.stateFloats());
    forEachChunk(rows, T, [&](int64_t a, int64_t b) {
      const bool zero = rows.first[size_t(a)] == a;
      if (zero)
        std::fill(S, S + s.stateFloats(), 0.0f);
      if (a % L == 0)
        std::copy(S, S + s.stateFloats(), chunkState(s, m.states, a / L, j));
      ruleChunkForward(s, h, a, b, m.o + a * V + j * dv, V, S, zero, w);
    });
  }
}

void Kernels::gdnNormForward(const GdnShape &s, const TokenShape &t,
                             const GdnParams<const float> &p, GdnSaved &m) {
  ProfileScope norm(KernelClass::Norm);
  forEachRowHead(
      s, t, m,
      [&](int64_t at, int64_t rh, const float *o, const float *z, int64_t) {
        const int64_t dv = s.valueHeadDim;
        double ss = 0;
        for (int64_t e = 0; e < dv; ++e)
          ss += double(o[e]) * o[e];
        const float r = float(1.0 / std::sqrt(ss / double(dv) + kNormEps));
        m.orstd[rh] = r;
        for (int64_t e = 0; e < dv; ++e)
          m.normed[at + e] = o[e] * r * p.outNorm[e] * silu(z[e]);
      });
}

void Kernels::gdnNormBackward(const GdnShape &s, const TokenShape &t,
                              const GdnParams<const float> &p,
                              GdnParams<float> &gp, GdnSaved &m,
                              const float *dnormed, float *dO) {
  ProfileScope norm(KernelClass::Norm);
  const int64_t T = t.tokens(), nv = s.valueHeads, dv = s.valueHeadDim,
                V = s.valueWidth(), W = s.inProj(), Cc = s.convChannels();
  forEachRowHead(
      s, t, m,
      [&](int64_t at, int64_t rh, const float *o, const float *z, int64_t zAt) {
        const float *dy = dnormed + at;
        float *dz = m.dproj + zAt, *dx = dO + at;
        const float r = m.orstd[rh];
        double dot = 0;
        for (int64_t e = 0; e < dv; ++e) {
          const float dn = dy[e] * silu(z[e]);
          dot += double(p.outNorm[e]) * dn * o[e];
          dz[e] = dy[e] * o[e] * r * p.outNorm[e] * siluGrad(z[e]);
        }
        const float c = float(dot / double(dv)) * r * r;
        for (int64_t e = 0; e < dv; ++e)
          dx[e] = r * (p.outNorm[e] * dy[e] * silu(z[e]) - o[e] * c);
      });
  // The weight's gradient: column sums over rows and heads, in order.
  for (int64_t e = 0; e < dv; ++e) {
    double acc = 0;
    for (int64_t row = 0; row < T; ++row)
      for (int64_t j = 0; j < nv; ++j) {
        const int64_t i = row * V + j * dv + e;
        acc += double(dnormed[i]) * silu(m.proj[row * W + Cc + j * dv + e]) *
               m.o[i] * m.orstd[row * nv + j];
      }
    gp.outNorm[e] += float(acc);
  }
}

void Kernels::gdnRuleBackward(const GdnShape &s, const TokenShape &t,
                              const GdnSaved &m, const float *dO, float *dqk,
                              float *dconv, float *dg, float *dbeta,
                              float *ws) {
  ProfileScope scan(KernelClass::Scan);
  const int64_t T = t.tokens(), SF = s.stateFloats();
  const RowSequences &rows = rowSequences(t);
  std::vector<std::pair<int64_t, int64_t>> chunks;
  forEachChunk(rows, T,
               [&](int64_t a, int64_t b) { chunks.emplace_back(a, b); });
  const RuleGrads out{dO, dqk, dconv, dg, dbeta};
#pragma omp parallel for schedule(dynamic)
  for (int64_t j = 0; j < s.valueHeads; ++j) {
    const HeadRows h(s, m, j);
    float *w = ws + j * s.ruleScratchFloats();
    float *dS = w + (s.ruleScratchFloats() - SF);
    for (size_t i = chunks.size(); i-- > 0;) {
      const auto [a, b] = chunks[i];
      if (rows.end[size_t(b - 1)] == b) // the sequence's last chunk
        std::fill(dS, dS + SF, 0.0f);
      const bool zero = rows.first[size_t(a)] == a;
      ruleChunkBackward(s, h, j, a, b,
                        zero ? nullptr : chunkState(s, m.states, a / L, j), out,
                        dS, w);
    }
  }
}

void Kernels::gdnGatesBackward(const GdnShape &s, const TokenShape &t,
                               const GdnParams<const float> &p,
                               GdnParams<float> &gp, GdnSaved &m,
                               const float *dqk, const float *dg,
                               const float *dbeta, float *dconv) {
  ProfileScope norm(KernelClass::Norm);
  const int64_t T = t.tokens(), nk = s.keyHeads, nv = s.valueHeads,
                dk = s.keyHeadDim, Cc = s.convChannels(), W = s.inProj(),
                Kw = s.keyWidth(), V = s.valueWidth(), per = s.headsPerKey();
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < T; ++row) {
    thread_local std::vector<float> dyOfThread;
    dyOfThread.resize(size_t(dk));
    float *dy = dyOfThread.data();
    for (int64_t part = 0; part < 2; ++part)
      for (int64_t h = 0; h < nk; ++h) {
        // The key head's gradient: the sum over the value heads it serves.
        const float *y = m.qk + row * 2 * Kw + part * Kw + h * dk;
        double dot = 0;
        for (int64_t d = 0; d < dk; ++d) {
          float acc = 0;
          for (int64_t j = h * per; j < (h + 1) * per; ++j)
            acc += dqk[((row * 2 + part) * nv + j) * dk + d];
          dy[d] = acc;
          dot += double(acc) * y[d];
        }
        const float inv = m.qkInv[row * 2 * nk + part * nk + h];
        float *dx = dconv + row * Cc + part * Kw + h * dk;
        for (int64_t d = 0; d < dk; ++d)
          dx[d] = inv * (dy[d] - y[d] * float(dot));
      }
    const float *alpha = m.proj + row * W + Cc + V + nv;
    float *dBetaRaw = m.dproj + row * W + Cc + V, *dAlpha = dBetaRaw + nv;
    for (int64_t j = 0; j < nv; ++j) {
      const float b = m.beta[row * nv + j];
      dBetaRaw[j] = dbeta[row * nv + j] * b * (1.0f - b);
      dAlpha[j] = dg[row * nv + j] * -std::exp(p.aLog[j]) *
                  sigmoid(alpha[j] + p.dtBias[j]);
    }
  }
  for (int64_t j = 0; j < nv; ++j) {
    double dBias = 0, dA = 0;
    for (int64_t row = 0; row < T; ++row) {
      dBias += m.dproj[row * W + Cc + V + nv + j];
      dA += double(dg[row * nv + j]) * m.g[row * nv + j];
    }
    gp.dtBias[j] += float(dBias);
    gp.aLog[j] += float(dA);
  }
}

void Kernels::gdnConvBackward(const GdnShape &s, const TokenShape &t,
                              const GdnParams<const float> &p,
                              GdnParams<float> &gp, GdnSaved &m, float *dconv) {
  ProfileScope conv(KernelClass::Conv);
  const int64_t T = t.tokens(), Cc = s.convChannels(), W = s.inProj(),
                K = s.convWidth;
  const RowSequences &rows = rowSequences(t);
  const float *wT = transposedConvWeight(s, p.convW);
  // The SiLU's gradient at the recomputed pre-activation, in place.
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < T; ++row) {
    thread_local std::vector<float> pre;
    pre.resize(size_t(Cc));
    convPreRow(s, m.proj, wT, row, rows.first[size_t(row)], pre.data());
    float *d = dconv + row * Cc;
    for (int64_t c = 0; c < Cc; ++c)
      d[c] *= siluGrad(pre[size_t(c)]);
  }
  // Input row `src` feeds rows src + K-1-k of its sequence through tap k.
#pragma omp parallel for schedule(static)
  for (int64_t src = 0; src < T; ++src) {
    float *out = m.dproj + src * W;
    std::fill(out, out + Cc, 0.0f);
    for (int64_t k = 0; k < K; ++k) {
      const int64_t dst = src + K - 1 - k;
      if (dst >= rows.end[size_t(src)])
        continue;
      const float *w = wT + k * Cc, *d = dconv + dst * Cc;
      for (int64_t c = 0; c < Cc; ++c)
        out[c] += w[c] * d[c];
    }
  }
  // The weight's gradient: a block of channels a work item, each (channel,
  // tap) summed over the rows in order (the same bits at any thread count).
  const int64_t blocks = (Cc + kConvBlock - 1) / kConvBlock;
#pragma omp parallel for schedule(static)
  for (int64_t bl = 0; bl < blocks; ++bl) {
    const int64_t c0 = bl * kConvBlock, n = std::min(kConvBlock, Cc - c0);
    thread_local std::vector<double> accOfThread;
    accOfThread.assign(size_t(K * kConvBlock), 0.0);
    double *acc = accOfThread.data();
    for (int64_t row = 0; row < T; ++row) {
      const float *d = dconv + row * Cc + c0;
      for (int64_t k =
               std::max<int64_t>(0, rows.first[size_t(row)] - (row - (K - 1)));
           k < K; ++k) {
        const float *in = m.proj + (row - (K - 1) + k) * W + c0;
        for (int64_t j = 0; j < n; ++j)
          acc[k * kConvBlock + j] += double(d[j]) * in[j];
      }
    }
    for (int64_t j = 0; j < n; ++j)
      for (int64_t k = 0; k < K; ++k)
        gp.convW[(c0 + j) * K + k] += float(acc[k * kConvBlock + j]);
  }
}

} // namespace hypipe::rt::cpu
