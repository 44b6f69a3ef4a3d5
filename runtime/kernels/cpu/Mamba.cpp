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

#include <cmath>
#include <cstring>
#include <vector>

namespace hypipe::rt::cpu {
namespace {

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

  const std::vector<int64_t> first = sequenceStartOfRows(t);
  {
    ProfileScope conv(KernelClass::Conv);
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < T; ++row) {
      for (int64_t c = 0; c < Cc; ++c)
        m.xbc[row * Cc + c] =
            silu(convAt(s, m.zxbcdt, p.convW, p.convB, row, first[row], c));
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
    // Column sums, each over the rows in order (the same bits at any thread
    // count).
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < I; ++i) {
      float acc = 0;
      for (int64_t row = 0; row < T; ++row)
        acc += dnormed[row * I + i] * m.gated[row * I + i] *
               m.grstd[row * G + i / gs];
      gp.gnorm[i] += acc;
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
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < Cc; ++c)
      for (int64_t row = 0; row < T; ++row) {
        float dpre = dxbc[row * Cc + c];
        gp.convB[c] += dpre;
        for (int64_t k = 0; k < K; ++k) {
          int64_t src = row - (K - 1) + k;
          if (src >= first[row])
            gp.convW[c * K + k] += dpre * m.zxbcdt[src * W + I + c];
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
