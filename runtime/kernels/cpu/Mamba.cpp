//===- Mamba.cpp - the Mamba-2 mixer on the CPU ---------------------------===//
//
// in_proj -> [z | x B C | dt]; depthwise causal conv1d + SiLU over xBC;
// dt = softplus(dt + dt_bias); A = -exp(A_log); the SSD recurrence
//   h_t = exp(dt_t A) h_{t-1} + dt_t x_t B_t^T,  y_t = h_t C_t + D x_t
// run as a sequential scan per (sequence, head); gated RMSNorm
// rmsnorm(y * silu(z)) per group; out_proj. The scan keeps its state at
// every kScanChunk-th row of the microbatch and recomputes the states inside
// a chunk when going backward, so saved memory grows with tokens /
// kScanChunk. The conv and the scan start from zero at every sequence start,
// so packed samples (TokenShape::cuSeqlens) never see one another.
//
//===----------------------------------------------------------------------===//

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/cpu/Layers.h"
#include "runtime/kernels/cpu/Primitives.h"

#include <cmath>
#include <cstring>
#include <vector>

namespace hypipe::rt::cpu {
namespace {

/// The layer's parameters (or, with T = float, their gradients), in the
/// order of MambaShape::params().
/// Pre-activation of the causal depthwise conv at (token row, channel);
/// `first` is the first row of the row's sequence.
inline float convAt(const MambaShape &s, const float *zxbcdt, const float *w,
                    const float *bias, int64_t row, int64_t first, int64_t c) {
  const int64_t K = s.convWidth, W = s.inProj(), off = s.inner();
  float acc = bias[c];
  for (int64_t k = 0; k < K; ++k) {
    int64_t src = row - (K - 1) + k;
    if (src >= first)
      acc += w[c * K + k] * zxbcdt[src * W + off + c];
  }
  return acc;
}

/// The scan's state at row r (before it), saved when r % kScanChunk == 0:
/// [chunk][head][headDim * state].
inline float *savedState(const MambaShape &s, float *states, int64_t row,
                         int64_t h) {
  return states +
         ((row / MambaShape::kScanChunk) * s.heads + h) * s.headDim * s.state;
}

} // namespace

void mambaForward(const MambaShape &s, const TokenShape &t, const float *params,
                  const float *x, float *y, float *saved, float *ws) {
  (void)ws;
  const int64_t T = t.tokens(), H = s.heads, P = s.headDim, N = s.state,
                G = s.groups, I = s.inner(), Cc = s.convChannels(),
                W = s.inProj(), L = MambaShape::kScanChunk;
  MambaParams<const float> p = mambaParams(s, params);
  MambaSaved m = mambaSaved(s, t, saved);

  std::memcpy(m.x, x, sizeof(float) * T * s.hidden);
  rmsnormForward(T, s.hidden, x, p.norm, m.xn, m.rstd);
  linearForward(T, s.hidden, W, m.xn, p.inProj, m.zxbcdt);

  const std::vector<int64_t> first = sequenceStartOfRows(t);
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < T; ++row) {
    for (int64_t c = 0; c < Cc; ++c)
      m.xbc[row * Cc + c] =
          silu(convAt(s, m.zxbcdt, p.convW, p.convB, row, first[row], c));
    for (int64_t h = 0; h < H; ++h)
      m.dt[row * H + h] =
          softplus(m.zxbcdt[row * W + 2 * I + 2 * G * N + h] + p.dtBias[h]);
  }

  const int64_t headsPerGroup = H / G;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t q = 0; q < t.sequences(); ++q)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / headsPerGroup;
      const float A = -std::exp(p.aLog[h]), D = p.d[h];
      std::vector<float> st(P * N, 0.0f);
      for (int64_t row = t.start(q); row < t.start(q) + t.length(q); ++row) {
        if (row % L == 0)
          std::memcpy(savedState(s, m.states, row, h), st.data(),
                      sizeof(float) * P * N);
        const float *xr = m.xbc + row * Cc + h * P;
        const float *Br = m.xbc + row * Cc + I + g * N;
        const float *Cr = m.xbc + row * Cc + I + G * N + g * N;
        float dt = m.dt[row * H + h], a = std::exp(dt * A);
        float *yr = m.y + row * I + h * P;
        for (int64_t i = 0; i < P; ++i) {
          float *si = st.data() + i * N;
          float dx = dt * xr[i], acc = 0;
          for (int64_t n = 0; n < N; ++n) {
            si[n] = a * si[n] + dx * Br[n];
            acc += si[n] * Cr[n];
          }
          yr[i] = acc + D * xr[i];
        }
      }
    }

  // Gate, then group RMSNorm (norm_before_gate = False).
  const int64_t gs = I / G;
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < T; ++row) {
    const float *z = m.zxbcdt + row * W;
    float *gr = m.gated + row * I;
    for (int64_t i = 0; i < I; ++i)
      gr[i] = m.y[row * I + i] * silu(z[i]);
    for (int64_t g = 0; g < G; ++g) {
      double ss = 0;
      for (int64_t i = g * gs; i < (g + 1) * gs; ++i)
        ss += double(gr[i]) * gr[i];
      float r = float(1.0 / std::sqrt(ss / double(gs) + kNormEps));
      m.grstd[row * G + g] = r;
      for (int64_t i = g * gs; i < (g + 1) * gs; ++i)
        m.normed[row * I + i] = gr[i] * r * p.gnorm[i];
    }
  }

  linearForward(T, I, s.hidden, m.normed, p.outProj, y);
  for (int64_t i = 0; i < T * s.hidden; ++i)
    y[i] += x[i];
}

void mambaBackwardInput(const MambaShape &s, const TokenShape &t,
                        const float *params, float *grads, float *saved,
                        const float *dy, float *dx, float *ws) {
  const int64_t T = t.tokens(), H = s.heads, P = s.headDim, N = s.state,
                G = s.groups, I = s.inner(), Cc = s.convChannels(),
                W = s.inProj(), K = s.convWidth, L = MambaShape::kScanChunk;
  MambaParams<const float> p = mambaParams(s, params);
  MambaParams<float> gp = mambaParams(s, grads);
  MambaSaved m = mambaSaved(s, t, saved);

  float *dnormed = ws;             // [T, I]
  float *dyScan = dnormed + T * I; // [T, I]
  float *dxbc = dyScan + T * I;    // [T, Cc] post-SiLU gradient
  float *dtGrad = dxbc + T * Cc;   // [T, H]
  float *dxn = dtGrad + T * H;     // [T, hidden]

  std::memcpy(m.dout, dy, sizeof(float) * T * s.hidden);
  linearBackwardInput(T, I, s.hidden, dy, p.outProj, dnormed);

  // Group RMSNorm and gate backward.
  const int64_t gs = I / G;
  float *dz = m.dzxbcdt; // z occupies the first I columns of dzxbcdt rows
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < T; ++row) {
    const float *gr = m.gated + row * I, *dn = dnormed + row * I;
    const float *z = m.zxbcdt + row * W;
    for (int64_t g = 0; g < G; ++g) {
      float r = m.grstd[row * G + g];
      double dot = 0;
      for (int64_t i = g * gs; i < (g + 1) * gs; ++i)
        dot += double(p.gnorm[i]) * dn[i] * gr[i];
      float c = float(dot / double(gs)) * r * r;
      for (int64_t i = g * gs; i < (g + 1) * gs; ++i) {
        float dg = r * (p.gnorm[i] * dn[i] - gr[i] * c);
        dyScan[row * I + i] = dg * silu(z[i]);
        dz[row * W + i] = dg * m.y[row * I + i] * siluGrad(z[i]);
      }
    }
  }
  for (int64_t row = 0; row < T; ++row)
    for (int64_t i = 0; i < I; ++i)
      gp.gnorm[i] += dnormed[row * I + i] * m.gated[row * I + i] *
                     m.grstd[row * G + i / gs];

  // Scan backward, per (sequence, head), one chunk of rows at a time from
  // the last: the chunk's states are recomputed from the saved one (or from
  // zero at the sequence start). B and C gradients are shared by the heads
  // of a group, so heads run in order inside one sequence.
  std::memset(dxbc, 0, sizeof(float) * T * Cc);
  const int64_t headsPerGroup = H / G, numSeqs = t.sequences();
  std::vector<double> partialA(numSeqs * H), partialD(numSeqs * H);
#pragma omp parallel for schedule(static)
  for (int64_t q = 0; q < numSeqs; ++q) {
    thread_local std::vector<float> scratch;
    scratch.resize((L + 2) * P * N);
    float *hs = scratch.data();       // [L + 1][P * N] chunk states
    float *dh = hs + (L + 1) * P * N; // [P * N]
    const int64_t begin = t.start(q), end = begin + t.length(q);
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / headsPerGroup;
      const float A = -std::exp(p.aLog[h]), D = p.d[h];
      std::memset(dh, 0, sizeof(float) * P * N);
      double dA = 0, dD = 0;
      for (int64_t t1 = end; t1 > begin;) {
        const int64_t t0 = std::max(begin, (t1 - 1) / L * L);
        if (t0 == begin)
          std::memset(hs, 0, sizeof(float) * P * N);
        else
          std::memcpy(hs, savedState(s, m.states, t0, h),
                      sizeof(float) * P * N);
        for (int64_t row = t0; row < t1; ++row) {
          const float *xr = m.xbc + row * Cc + h * P;
          const float *Br = m.xbc + row * Cc + I + g * N;
          float dt = m.dt[row * H + h], a = std::exp(dt * A);
          const float *prev = hs + (row - t0) * P * N;
          float *cur = hs + (row - t0 + 1) * P * N;
          for (int64_t i = 0; i < P; ++i)
            for (int64_t n = 0; n < N; ++n)
              cur[i * N + n] = a * prev[i * N + n] + dt * xr[i] * Br[n];
        }
        for (int64_t row = t1 - 1; row >= t0; --row) {
          const float *xr = m.xbc + row * Cc + h * P;
          const float *Br = m.xbc + row * Cc + I + g * N;
          const float *Cr = m.xbc + row * Cc + I + G * N + g * N;
          float *dxr = dxbc + row * Cc + h * P;
          float *dBr = dxbc + row * Cc + I + g * N;
          float *dCr = dxbc + row * Cc + I + G * N + g * N;
          const float *dyr = dyScan + row * I + h * P;
          float dt = m.dt[row * H + h], a = std::exp(dt * A);
          const float *hcur = hs + (row - t0 + 1) * P * N;
          const float *hprev = hs + (row - t0) * P * N;
          double dDt = 0, da = 0;
          for (int64_t i = 0; i < P; ++i) {
            float *dhi = dh + i * N;
            const float *hci = hcur + i * N, *hpi = hprev + i * N;
            float dyi = dyr[i], xi = xr[i], dhB = 0;
            for (int64_t n = 0; n < N; ++n) {
              dhi[n] += dyi * Cr[n];
              dCr[n] += dyi * hci[n];
              dhB += dhi[n] * Br[n];
              dBr[n] += dt * dhi[n] * xi;
              da += double(dhi[n]) * hpi[n];
              dhi[n] *= a;
            }
            dD += double(dyi) * xi;
            dxr[i] += D * dyi + dt * dhB;
            dDt += double(dhB) * xi;
          }
          dDt += da * a * A;
          dA += da * a * dt;
          dtGrad[row * H + h] = float(dDt);
        }
        t1 = t0;
      }
      partialA[q * H + h] = dA;
      partialD[q * H + h] = dD;
    }
  }
  for (int64_t q = 0; q < numSeqs; ++q)
    for (int64_t h = 0; h < H; ++h) {
      gp.aLog[h] += float(partialA[q * H + h]) * -std::exp(p.aLog[h]);
      gp.d[h] += float(partialD[q * H + h]);
    }

  // dt = softplus(raw + dt_bias); conv + SiLU backward into dzxbcdt.
  for (int64_t row = 0; row < T; ++row)
    for (int64_t h = 0; h < H; ++h) {
      float raw = m.zxbcdt[row * W + 2 * I + 2 * G * N + h] + p.dtBias[h];
      float d = dtGrad[row * H + h] * sigmoid(raw);
      m.dzxbcdt[row * W + 2 * I + 2 * G * N + h] = d;
      gp.dtBias[h] += d;
    }
#pragma omp parallel for schedule(static)
  for (int64_t q = 0; q < numSeqs; ++q) {
    const int64_t begin = t.start(q), end = begin + t.length(q);
    for (int64_t row = begin; row < end; ++row)
      for (int64_t c = 0; c < Cc; ++c)
        m.dzxbcdt[row * W + I + c] = 0.0f;
    for (int64_t row = begin; row < end; ++row) {
      for (int64_t c = 0; c < Cc; ++c) {
        float pre = convAt(s, m.zxbcdt, p.convW, p.convB, row, begin, c);
        float dpre = dxbc[row * Cc + c] * siluGrad(pre);
        dxbc[row * Cc + c] = dpre; // reused below for the conv weights
        for (int64_t k = 0; k < K; ++k) {
          int64_t src = row - (K - 1) + k;
          if (src >= begin)
            m.dzxbcdt[src * W + I + c] += p.convW[c * K + k] * dpre;
        }
      }
    }
  }
  const std::vector<int64_t> first = sequenceStartOfRows(t);
  for (int64_t row = 0; row < T; ++row)
    for (int64_t c = 0; c < Cc; ++c) {
      float dpre = dxbc[row * Cc + c];
      gp.convB[c] += dpre;
      for (int64_t k = 0; k < K; ++k) {
        int64_t src = row - (K - 1) + k;
        if (src >= first[row])
          gp.convW[c * K + k] += dpre * m.zxbcdt[src * W + I + c];
      }
    }

  // in_proj input gradient, then the pre-norm with the residual fused in.
  linearBackwardInput(T, s.hidden, W, m.dzxbcdt, p.inProj, dxn);
  std::memcpy(dx, dy, sizeof(float) * T * s.hidden);
  rmsnormBackward(T, s.hidden, m.x, p.norm, m.rstd, dxn, dx, gp.norm, true);
}

void mambaBackwardWeight(const MambaShape &s, const TokenShape &t,
                         const float *saved, float *grads) {
  const int64_t T = t.tokens();
  MambaSaved m = mambaSaved(s, t, const_cast<float *>(saved));
  MambaParams<float> gp = mambaParams(s, grads);
  linearBackwardWeight(T, s.hidden, s.inProj(), m.dzxbcdt, m.xn, gp.inProj);
  linearBackwardWeight(T, s.inner(), s.hidden, m.dout, m.normed, gp.outProj);
}

} // namespace hypipe::rt::cpu
