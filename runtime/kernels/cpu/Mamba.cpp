//===- Mamba.cpp - the Mamba-2 mixer on the CPU ---------------------------===//
//
// in_proj -> [z | x B C | dt]; depthwise causal conv1d + SiLU over xBC;
// dt = softplus(dt + dt_bias); A = -exp(A_log); the SSD recurrence
//   h_t = exp(dt_t A) h_{t-1} + dt_t x_t B_t^T,  y_t = h_t C_t + D x_t
// in its chunked form (Scan.cpp: GEMMs per chunk of kScanChunk rows, states
// passed between chunks only, the state entering every chunk saved); gated
// RMSNorm rmsnorm(y * silu(z)) per group; out_proj. The conv and the scan
// start from zero at every sequence start, so packed samples
// (TokenShape::cuSeqlens) never see one another.
//
//===----------------------------------------------------------------------===//

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/cpu/Layers.h"
#include "runtime/kernels/cpu/Primitives.h"
#include "runtime/kernels/cpu/Profile.h"
#include "runtime/kernels/cpu/Scan.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace hypipe::rt::cpu {
namespace {

/// Pre-activations of the causal depthwise conv for one row, every channel:
/// out[c] = bias[c] + sum_k w[c][k] in[row - (K-1) + k][c] over the taps
/// inside the row's sequence (`first` is its first row). `wT` is the
/// weight transposed to [K][channels], so every tap is one vector pass.
void convRow(const MambaShape &s, const float *zxbcdt, const float *wT,
             const float *bias, int64_t row, int64_t first, float *out) {
  const int64_t K = s.convWidth, W = s.inProj(), Cc = s.convChannels();
  std::memcpy(out, bias, sizeof(float) * Cc);
  for (int64_t k = 0; k < K; ++k) {
    const int64_t src = row - (K - 1) + k;
    if (src < first)
      continue;
    const float *in = zxbcdt + src * W + s.inner(), *wk = wT + k * Cc;
    for (int64_t c = 0; c < Cc; ++c)
      out[c] += wk[c] * in[c];
  }
}

/// The conv weight [channels][K] as [K][channels], in a buffer of the
/// calling thread that lives across calls.
const float *transposedConvWeight(const MambaShape &s, const float *w) {
  thread_local std::vector<float> wT;
  const int64_t K = s.convWidth, Cc = s.convChannels();
  wT.resize(size_t(K * Cc));
  for (int64_t c = 0; c < Cc; ++c)
    for (int64_t k = 0; k < K; ++k)
      wT[size_t(k * Cc + c)] = w[c * K + k];
  return wT.data();
}

/// Columns per block when a column sum runs over threads: a cache line of
/// each row at a time, every column summed over the rows in order (the
/// same bits at any thread count).
constexpr int64_t kColumnBlock = 16;

} // namespace

void mambaForward(const MambaShape &s, const TokenShape &t, const float *params,
                  const float *x, float *y, float *saved, float *ws) {
  const int64_t T = t.tokens(), H = s.heads, N = s.state, G = s.groups,
                I = s.inner(), Cc = s.convChannels(), W = s.inProj();
  MambaParams<const float> p = mambaParams(s, params);
  MambaSaved m = mambaSaved(s, t, saved);

  std::memcpy(m.x, x, sizeof(float) * T * s.hidden);
  rmsnormForward(T, s.hidden, x, p.norm, m.xn, m.rstd);
  linearForward(T, s.hidden, W, m.xn, p.inProj, m.zxbcdt);

  thread_local std::vector<int64_t> firstOfThread;
  sequenceStartOfRows(t, firstOfThread);
  const int64_t *first = firstOfThread.data();
  {
    ProfileScope conv(KernelClass::Conv);
    const float *wT = transposedConvWeight(s, p.convW);
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < T; ++row) {
      float *out = m.xbc + row * Cc;
      convRow(s, m.zxbcdt, wT, p.convB, row, first[row], out);
      for (int64_t c = 0; c < Cc; ++c)
        out[c] = silu(out[c]);
      for (int64_t h = 0; h < H; ++h)
        m.dt[row * H + h] =
            softplus(m.zxbcdt[row * W + 2 * I + 2 * G * N + h] + p.dtBias[h]);
    }
  }

  scanForward(s, t, m.xbc, m.dt, p.aLog, p.d, m.y, m.states, ws);

  // Gate, then group RMSNorm (norm_before_gate = False).
  const int64_t gs = I / G;
  {
    ProfileScope norm(KernelClass::Norm);
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < T; ++row) {
      const float *z = m.zxbcdt + row * W;
      float *gr = m.gated + row * I;
      for (int64_t i = 0; i < I; ++i)
        gr[i] = m.y[row * I + i] * silu(z[i]);
      for (int64_t g = 0; g < G; ++g) {
        double ss = 0;
#pragma omp simd reduction(+ : ss)
        for (int64_t i = g * gs; i < (g + 1) * gs; ++i)
          ss += double(gr[i]) * gr[i];
        float r = float(1.0 / std::sqrt(ss / double(gs) + kNormEps));
        m.grstd[row * G + g] = r;
        for (int64_t i = g * gs; i < (g + 1) * gs; ++i)
          m.normed[row * I + i] = gr[i] * r * p.gnorm[i];
      }
    }
  }

  linearForward(T, I, s.hidden, m.normed, p.outProj, y);
  addResidual(T * s.hidden, x, y);
}

void mambaBackwardInput(const MambaShape &s, const TokenShape &t,
                        const float *params, float *grads, float *saved,
                        const float *dy, float *dx, float *ws) {
  const int64_t T = t.tokens(), H = s.heads, N = s.state, G = s.groups,
                I = s.inner(), Cc = s.convChannels(), W = s.inProj(),
                K = s.convWidth, numSeqs = t.sequences();
  MambaParams<const float> p = mambaParams(s, params);
  MambaParams<float> gp = mambaParams(s, grads);
  MambaSaved m = mambaSaved(s, t, saved);

  float *dnormed = ws;             // [T, I]
  float *dyScan = dnormed + T * I; // [T, I]
  float *dxbc = dyScan + T * I;    // [T, Cc] post-SiLU gradient
  float *dtGrad = dxbc + T * Cc;   // [T, H]
  float *dxn = dtGrad + T * H;     // [T, hidden], then the scan's

  std::memcpy(m.dout, dy, sizeof(float) * T * s.hidden);
  linearBackwardInput(T, I, s.hidden, dy, p.outProj, dnormed);

  // Group RMSNorm and gate backward.
  const int64_t gs = I / G;
  float *dz = m.dzxbcdt; // z occupies the first I columns of dzxbcdt rows
  {
    ProfileScope norm(KernelClass::Norm);
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < T; ++row) {
      const float *gr = m.gated + row * I, *dn = dnormed + row * I;
      const float *z = m.zxbcdt + row * W;
      for (int64_t g = 0; g < G; ++g) {
        float r = m.grstd[row * G + g];
        double dot = 0;
#pragma omp simd reduction(+ : dot)
        for (int64_t i = g * gs; i < (g + 1) * gs; ++i)
          dot += double(p.gnorm[i]) * dn[i] * gr[i];
        float c = float(dot / double(gs)) * r * r;
#pragma omp simd
        for (int64_t i = g * gs; i < (g + 1) * gs; ++i) {
          float dg = r * (p.gnorm[i] * dn[i] - gr[i] * c);
          dyScan[row * I + i] = dg * silu(z[i]);
          dz[row * W + i] = dg * m.y[row * I + i] * siluGrad(z[i]);
        }
      }
    }
#pragma omp parallel for schedule(static)
    for (int64_t i0 = 0; i0 < I; i0 += kColumnBlock) {
      const int64_t n = std::min(kColumnBlock, I - i0);
      float acc[kColumnBlock] = {};
      for (int64_t row = 0; row < T; ++row)
        for (int64_t j = 0; j < n; ++j) {
          const int64_t i = i0 + j;
          acc[j] += dnormed[row * I + i] * m.gated[row * I + i] *
                    m.grstd[row * G + i / gs];
        }
      for (int64_t j = 0; j < n; ++j)
        gp.gnorm[i0 + j] += acc[j];
    }
  }

  std::memset(dxbc, 0, sizeof(float) * T * Cc);
  scanBackward(s, t, m.xbc, m.dt, p.aLog, p.d, m.states, dyScan, dxbc, dtGrad,
               gp.aLog, gp.d, dxn + T * s.hidden);

  // dt = softplus(raw + dt_bias); conv + SiLU backward into dzxbcdt.
  {
    ProfileScope conv(KernelClass::Conv);
#pragma omp parallel for schedule(static)
    for (int64_t h = 0; h < H; ++h) {
      float acc = 0;
      for (int64_t row = 0; row < T; ++row) {
        float raw = m.zxbcdt[row * W + 2 * I + 2 * G * N + h] + p.dtBias[h];
        float d = dtGrad[row * H + h] * sigmoid(raw);
        m.dzxbcdt[row * W + 2 * I + 2 * G * N + h] = d;
        acc += d;
      }
      gp.dtBias[h] += acc;
    }
    // The SiLU's gradient at the recomputed pre-activation, in place.
    const float *wT = transposedConvWeight(s, p.convW);
    thread_local std::vector<int64_t> firstOfThread;
    sequenceStartOfRows(t, firstOfThread);
    const int64_t *first = firstOfThread.data();
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < T; ++row) {
      thread_local std::vector<float> pre;
      pre.resize(size_t(Cc));
      convRow(s, m.zxbcdt, wT, p.convB, row, first[row], pre.data());
      float *d = dxbc + row * Cc;
      for (int64_t c = 0; c < Cc; ++c)
        d[c] *= siluGrad(pre[size_t(c)]);
    }
    // Input gradient, gathered: input row `src` feeds rows src + K-1-k of
    // its own sequence through tap k.
#pragma omp parallel for schedule(static)
    for (int64_t src = 0; src < T; ++src) {
      float *out = m.dzxbcdt + src * W + I;
      std::fill(out, out + Cc, 0.0f);
      for (int64_t k = 0; k < K; ++k) {
        const int64_t row = src + (K - 1) - k;
        if (row >= T || first[row] != first[src])
          continue;
        const float *d = dxbc + row * Cc, *wk = wT + k * Cc;
        for (int64_t c = 0; c < Cc; ++c)
          out[c] += wk[c] * d[c];
      }
    }
    // Weight and bias gradients: column sums over the rows.
#pragma omp parallel for schedule(static)
    for (int64_t c0 = 0; c0 < Cc; c0 += kColumnBlock) {
      const int64_t n = std::min(kColumnBlock, Cc - c0);
      thread_local std::vector<float> accWs;
      accWs.assign(size_t(kColumnBlock * K), 0.0f);
      float accB[kColumnBlock] = {}, *accW = accWs.data();
      const int64_t taps = K;
      for (int64_t row = 0; row < T; ++row) {
        const float *d = dxbc + row * Cc + c0;
        for (int64_t j = 0; j < n; ++j)
          accB[j] += d[j];
        for (int64_t k = 0; k < taps; ++k) {
          const int64_t src = row - (K - 1) + k;
          if (src < first[row])
            continue;
          const float *in = m.zxbcdt + src * W + I + c0;
          for (int64_t j = 0; j < n; ++j)
            accW[k * kColumnBlock + j] += d[j] * in[j];
        }
      }
      for (int64_t j = 0; j < n; ++j) {
        gp.convB[c0 + j] += accB[j];
        for (int64_t k = 0; k < taps; ++k)
          gp.convW[(c0 + j) * K + k] += accW[k * kColumnBlock + j];
      }
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
