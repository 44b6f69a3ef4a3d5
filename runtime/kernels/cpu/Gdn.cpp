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
// chunk's U, A and P are recomputed as forward, then the adjoint of the
// three equations runs as GEMMs of the same blocks (dU from dO and the
// leaving state's gradient, the transposed triangular solve for the
// system's, dA and dP to dq, dk, dbeta and dGc, the entering state's
// gradient from all three terms, carried into the chunk before), dg the
// reverse cumulative sum of dGc: flash-linear-attention's
// chunk_gated_delta_rule_bwd derived from these equations. Nothing beyond
// the chunk-start states is stored (docs/gdn.md).
//
//===----------------------------------------------------------------------===//

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/cpu/Kernels.h"
#include "runtime/kernels/cpu/Primitives.h"
#include "runtime/kernels/cpu/Profile.h"

#include <cblas.h>

#include <algorithm>
#include <array>
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

/// A chunk's buffers in the head's scratch `w`. Forward: the scaled q, k,
/// a decayed copy of one of them [L, dk]; the right-hand sides [L, dv + dk]
/// (then U and (I + A)^-1 diag(beta Gamma) K); A and P [L, L]; beta [L];
/// Gc [L] in double (the caller's: a chunk's Gc reaches hundreds, where a
/// float's step would put 1e-4 into every decay e^{Gc_t - Gc_s}). Backward adds
/// dP [L, L], dU [L, dv] (then dW), dQ, dK and a product X [L, dk] and dS0 [dk,
/// dv].
struct ChunkBuffers {
  float *Q, *K, *Kd, *R, *A, *P, *bt;
  double *Gc;
  float *dP, *dU, *dQ, *dK, *X, *dS0;
  ChunkBuffers(const GdnShape &s, float *w, double *gc) : Gc(gc) {
    const int64_t dk = s.keyHeadDim, dv = s.valueHeadDim;
    Q = w, K = Q + L * dk, Kd = K + L * dk, R = Kd + L * dk;
    A = R + L * (dv + dk), P = A + L * L, bt = P + L * L;
    dP = w + s.chunkForwardFloats(), dU = dP + L * L, dQ = dU + L * dv;
    dK = dQ + L * dk, X = dK + L * dk, dS0 = X + L * dk;
  }
};

/// What forward and backward share of chunk [a, b) with entering state S
/// (null: zero): Q, K, Gc, beta, A, P and, in R's first dv columns (row
/// stride dv + dk), U.
void chunkUpdates(const GdnShape &s, const HeadRows &h, int64_t a, int64_t b,
                  const float *S, const ChunkBuffers &c) {
  const int64_t n = b - a, dk = s.keyHeadDim, dv = s.valueHeadDim;
  const float scale = float(1.0 / std::sqrt(double(dk)));
  const int64_t rw = dv + dk; // R's rows: [beta v | beta Gamma k], then U
  double acc = 0;
  for (int64_t t = 0; t < n; ++t) {
    const int64_t r = a + t;
    acc += h.g[r * h.gStride];
    c.Gc[t] = acc;
    c.bt[t] = h.beta[r * h.gStride];
    const float gamma = float(std::exp(c.Gc[t]));
    for (int64_t d = 0; d < dk; ++d) {
      c.Q[t * dk + d] = h.q[r * h.qkStride + d] * scale;
      c.K[t * dk + d] = h.k[r * h.qkStride + d];
      c.R[t * rw + dv + d] = c.bt[t] * gamma * c.K[t * dk + d];
    }
    for (int64_t e = 0; e < dv; ++e)
      c.R[t * rw + e] = c.bt[t] * h.v[r * h.vStride + e];
  }
  // A: beta_t e^{Gc_t - Gc_s} k_t.k_s below the diagonal (strsm reads no
  // more of it); P: the decayed q_t.k_s on and below it.
  gemm(false, true, n, n, dk, 1.0f, c.K, dk, c.K, dk, 0.0f, c.A, n);
  gemm(false, true, n, n, dk, 1.0f, c.Q, dk, c.K, dk, 0.0f, c.P, n);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t u = 0; u < n; ++u) {
      const float decay = u <= t ? float(std::exp(c.Gc[t] - c.Gc[u])) : 0.0f;
      c.A[t * n + u] *= c.bt[t] * decay;
      c.P[t * n + u] *= decay;
    }
  cblas_strsm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasUnit,
              int(n), int(rw), 1.0f, c.A, int(n), c.R, int(rw));
  // U = (I + A)^-1 beta V - (I + A)^-1 diag(beta Gamma) K S0, in R's first
  // dv columns.
  if (S)
    gemm(false, false, n, dv, dk, -1.0f, c.R + dv, rw, S, dv, 1.0f, c.R, rw);
}

/// Kd = diag(e^{Gc_last - Gc}) K: the rows' weights in the state the chunk
/// leaves.
void decayToChunkEnd(const GdnShape &s, int64_t n, const ChunkBuffers &c) {
  const int64_t dk = s.keyHeadDim;
  const double last = c.Gc[n - 1];
  for (int64_t t = 0; t < n; ++t) {
    const float decay = float(std::exp(last - c.Gc[t]));
    for (int64_t d = 0; d < dk; ++d)
      c.Kd[t * dk + d] = c.K[t * dk + d] * decay;
  }
}

/// One chunk [a, b) of value head j: O's rows (into m.o) and the state S
/// updated in place (S0 in, S_out out). `w`: the head's scratch.
void ruleChunkForward(const GdnShape &s, const HeadRows &h, int64_t a,
                      int64_t b, float *o, int64_t oStride, float *S,
                      bool zeroState, float *w) {
  const int64_t n = b - a, dk = s.keyHeadDim, dv = s.valueHeadDim;
  const int64_t rw = dv + dk;
  std::array<double, L> Gc;
  const ChunkBuffers c(s, w, Gc.data());
  chunkUpdates(s, h, a, b, zeroState ? nullptr : S, c);
  // O = diag(Gamma) Q S0 + P U.
  if (!zeroState) {
    for (int64_t t = 0; t < n; ++t) {
      const float gamma = float(std::exp(c.Gc[t]));
      for (int64_t d = 0; d < dk; ++d)
        c.Kd[t * dk + d] = c.Q[t * dk + d] * gamma;
    }
    gemm(false, false, n, dv, dk, 1.0f, c.Kd, dk, S, dv, 0.0f, o, oStride);
  }
  gemm(false, false, n, dv, n, 1.0f, c.P, n, c.R, rw, zeroState ? 0.0f : 1.0f,
       o, oStride);
  // S_out = Gamma_last S0 + (diag(e^{Gc_last - Gc}) K)^T U.
  decayToChunkEnd(s, n, c);
  if (zeroState)
    std::fill(S, S + dk * dv, 0.0f);
  else
    cblas_sscal(int(dk * dv), float(std::exp(c.Gc[n - 1])), S, 1);
  gemm(true, false, dk, dv, n, 1.0f, c.Kd, dk, c.R, rw, 1.0f, S, dv);
}

/// Gradients into the rule's outputs (recipes/Gdn.h's gdnRuleBackward).
struct RuleGrads {
  const float *dO;
  float *dqk, *dconv, *dg, *dbeta;
};

/// The dot product of two float vectors, summed in double.
double rowDot(const float *x, const float *y, int64_t width) {
  return cblas_dsdot(int(width), x, 1, y, 1);
}

/// The adjoint of chunk [a, b) of value head j (entering state S0, null:
/// zero): from dS (the gradient of the state it leaves, in place: of the
/// one it enters, out) and its rows' dO, their gradients. The chunk's
/// equations (the header's) backwards, GEMMs over its blocks:
///   dU = P^T dO + Kd dS,  dW = (I + A)^-T dU  (strsm, transposed),
///   dP = dO U^T,  dA = -dW U^T  (below the diagonal),
///   dS0 = Gamma_last dS + (diag(Gamma) Q)^T dO - (diag(beta Gamma) K)^T dW,
/// then dQ, dK, dV, dbeta and dGc from the products, dg by the reverse
/// cumulative sum of dGc. `w`: the head's scratch.
void ruleChunkBackward(const GdnShape &s, const HeadRows &h, int64_t j,
                       int64_t a, int64_t b, const float *S0,
                       const RuleGrads &out, float *dS, float *w) {
  const int64_t n = b - a, dk = s.keyHeadDim, dv = s.valueHeadDim,
                nv = s.valueHeads, V = s.valueWidth(), Cc = s.convChannels();
  const int64_t rw = dv + dk, SF = s.stateFloats();
  const float scale = float(1.0 / std::sqrt(double(dk)));
  std::array<double, L> Gc;
  const ChunkBuffers c(s, w, Gc.data());
  chunkUpdates(s, h, a, b, S0, c);
  decayToChunkEnd(s, n, c);
  const float *dO = out.dO + a * V + j * dv, *U = c.R;
  // dU = P^T dO + Kd dS; dKd = U dS^T (into dK, decayed back below).
  gemm(true, false, n, dv, n, 1.0f, c.P, n, dO, V, 0.0f, c.dU, dv);
  gemm(false, false, n, dv, dk, 1.0f, c.Kd, dk, dS, dv, 1.0f, c.dU, dv);
  gemm(false, true, n, dk, dv, 1.0f, U, rw, dS, dv, 0.0f, c.dK, dk);
  // dGc (in double: dg is its reverse cumulative sum, whose terms cancel)
  // from S_out: Gamma_last <dS, S0> and the rows' decays in Kd.
  std::array<double, L> dGc{};
  const float gammaLast = float(std::exp(c.Gc[n - 1]));
  double toLast = S0 ? gammaLast * rowDot(dS, S0, SF) : 0.0;
  for (int64_t t = 0; t < n; ++t) {
    const double kdDot = rowDot(c.Kd + t * dk, c.dK + t * dk, dk);
    dGc[size_t(t)] -= kdDot;
    toLast += kdDot;
    const float decay = float(std::exp(c.Gc[n - 1] - c.Gc[t]));
    for (int64_t d = 0; d < dk; ++d)
      c.dK[t * dk + d] *= decay;
  }
  dGc[size_t(n - 1)] += toLast;
  // dS0 = Gamma_last dS + (diag(Gamma) Q)^T dO (the W term below).
  if (S0) {
    for (int64_t i = 0; i < SF; ++i)
      c.dS0[i] = gammaLast * dS[i];
    for (int64_t t = 0; t < n; ++t) {
      const float gamma = float(std::exp(c.Gc[t]));
      for (int64_t d = 0; d < dk; ++d)
        c.Kd[t * dk + d] = c.Q[t * dk + d] * gamma;
    }
    gemm(true, false, dk, dv, n, 1.0f, c.Kd, dk, dO, V, 1.0f, c.dS0, dv);
  }
  // O's first term: dQ = diag(Gamma) dO S0^T, dGc_t += Gamma_t q_t.(dO
  // S0^T)_t.
  if (S0) {
    gemm(false, true, n, dk, dv, 1.0f, dO, V, S0, dv, 0.0f, c.X, dk);
    for (int64_t t = 0; t < n; ++t) {
      const float gamma = float(std::exp(c.Gc[t]));
      dGc[size_t(t)] += gamma * rowDot(c.Q + t * dk, c.X + t * dk, dk);
      for (int64_t d = 0; d < dk; ++d)
        c.dQ[t * dk + d] = gamma * c.X[t * dk + d];
    }
  } else {
    std::fill(c.dQ, c.dQ + n * dk, 0.0f);
  }
  // P = (Q K^T) o D: dP = dO U^T on and below the diagonal; dQ += (dP o
  // D) K, dK += (dP o D)^T Q; dGc_t += sum_s dP_ts P_ts, dGc_s -= the
  // same.
  gemm(false, true, n, n, dv, 1.0f, dO, V, U, rw, 0.0f, c.dP, n);
  const auto decayedAdjoint = [&](const float *M, float *dM) {
    for (int64_t t = 0; t < n; ++t)
      for (int64_t u = 0; u < n; ++u) {
        if (u > t) {
          dM[t * n + u] = 0.0f;
          continue;
        }
        const double prod = double(dM[t * n + u]) * M[t * n + u];
        dGc[size_t(t)] += prod;
        dGc[size_t(u)] -= prod;
        dM[t * n + u] *= float(std::exp(c.Gc[t] - c.Gc[u]));
      }
  };
  decayedAdjoint(c.P, c.dP);
  gemm(false, false, n, dk, n, 1.0f, c.dP, n, c.K, dk, 1.0f, c.dQ, dk);
  gemm(true, false, n, dk, n, 1.0f, c.dP, n, c.Q, dk, 1.0f, c.dK, dk);
  // dW = (I + A)^-T dU, in place.
  cblas_strsm(CblasRowMajor, CblasLeft, CblasLower, CblasTrans, CblasUnit,
              int(n), int(dv), 1.0f, c.A, int(n), c.dU, int(dv));
  const float *dW = c.dU;
  // dA = -dW U^T strictly below the diagonal, A_ts = beta_t e^{Gc_t -
  // Gc_s} k_t.k_s: dGc as P's; dbeta_t = sum_s dA_ts A_ts / beta_t; dK +=
  // E K + E^T K with E = dA o beta D.
  gemm(false, true, n, n, dv, -1.0f, dW, dv, U, rw, 0.0f, c.dP, n);
  for (int64_t t = 0; t < n; ++t)
    c.dP[t * n + t] = 0.0f;
  float *dbeta = out.dbeta + a * nv + j; // row t's partial at t nv
  for (int64_t t = 0; t < n; ++t) {
    double acc = 0;
    for (int64_t u = 0; u < t; ++u)
      acc += double(c.dP[t * n + u]) * c.A[t * n + u];
    dbeta[t * nv] = float(acc / c.bt[t]);
  }
  decayedAdjoint(c.A, c.dP);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t u = 0; u < t; ++u)
      c.dP[t * n + u] *= c.bt[t];
  gemm(false, false, n, dk, n, 1.0f, c.dP, n, c.K, dk, 1.0f, c.dK, dk);
  gemm(true, false, n, dk, n, 1.0f, c.dP, n, c.K, dk, 1.0f, c.dK, dk);
  // W = beta V - diag(beta Gamma) K S0: dV = diag(beta) dW; with X = dW
  // S0^T, dbeta_t += v_t.dW_t - Gamma_t k_t.X_t, dK_t -= beta_t Gamma_t
  // X_t, dGc_t -= beta_t Gamma_t k_t.X_t, dS0 -= (diag(beta Gamma) K)^T dW.
  if (S0) {
    gemm(false, true, n, dk, dv, 1.0f, dW, dv, S0, dv, 0.0f, c.X, dk);
    for (int64_t t = 0; t < n; ++t) {
      const float betaGamma = c.bt[t] * float(std::exp(c.Gc[t]));
      for (int64_t d = 0; d < dk; ++d)
        c.Kd[t * dk + d] = betaGamma * c.K[t * dk + d];
    }
    gemm(true, false, dk, dv, n, -1.0f, c.Kd, dk, dW, dv, 1.0f, c.dS0, dv);
  }
  for (int64_t t = 0; t < n; ++t) {
    const int64_t r = a + t;
    const float *v = h.v + r * h.vStride;
    float *dvOut = out.dconv + r * Cc + 2 * s.keyWidth() + j * dv;
    double db = dbeta[t * nv] + rowDot(v, dW + t * dv, dv);
    for (int64_t e = 0; e < dv; ++e)
      dvOut[e] = c.bt[t] * dW[t * dv + e];
    if (S0) {
      const float gamma = float(std::exp(c.Gc[t]));
      const double kx = rowDot(c.K + t * dk, c.X + t * dk, dk);
      db -= gamma * kx;
      dGc[size_t(t)] -= c.bt[t] * gamma * kx;
      for (int64_t d = 0; d < dk; ++d)
        c.dK[t * dk + d] -= c.bt[t] * gamma * c.X[t * dk + d];
    }
    dbeta[t * nv] = float(db);
  }
  // The rows' q (scaled back) and k gradients; dg by the reverse sum.
  double dgAcc = 0;
  for (int64_t t = n - 1; t >= 0; --t) {
    const int64_t r = a + t;
    float *dq = out.dqk + (r * 2 * nv + j) * dk,
          *dk_ = out.dqk + ((r * 2 + 1) * nv + j) * dk;
    for (int64_t d = 0; d < dk; ++d) {
      dq[d] = scale * c.dQ[t * dk + d];
      dk_[d] = c.dK[t * dk + d];
    }
    dgAcc += dGc[size_t(t)];
    out.dg[r * nv + j] = float(dgAcc);
  }
  if (S0)
    std::copy(c.dS0, c.dS0 + SF, dS);
  else
    std::fill(dS, dS + SF, 0.0f);
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
