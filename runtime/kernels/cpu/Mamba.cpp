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
#include "runtime/kernels/cpu/Kernels.h"
#include "runtime/kernels/cpu/Primitives.h"
#include "runtime/kernels/cpu/Profile.h"
#include "runtime/kernels/cpu/Scan.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

namespace hypipe::rt::cpu {
namespace {

/// Channels per block in the conv and norm-gradient loops: one AVX-512
/// register of floats, so a block's accumulators stay in registers (across
/// the taps, or the rows) and each output is stored once. (A pass per tap
/// loaded and stored every output K times; the column sums' width was known
/// only at run time, so they did not vectorise.)
constexpr int64_t kChannelBlock = 16;

/// `body(width, c)` over channels [begin, end): whole blocks with width
/// std::integral_constant<kChannelBlock>, then single channels with width 1
/// (a compile-time width either way, so the block loops vectorise).
template <typename Body>
void forChannelBlocks(int64_t begin, int64_t end, Body body) {
  int64_t c = begin;
  for (; c + kChannelBlock <= end; c += kChannelBlock)
    body(std::integral_constant<int64_t, kChannelBlock>{}, c);
  for (; c < end; ++c)
    body(std::integral_constant<int64_t, 1>{}, c);
}

/// The first tap of `row` whose input row is in the row's own sequence
/// (`first` is that sequence's first row): tap k reads row - (K-1) + k.
inline int64_t firstTap(int64_t K, int64_t row, int64_t first) {
  return std::max<int64_t>(0, first - (row - (K - 1)));
}

/// out[j] = bias[j] + sum over taps k >= k0 of wT[k][j] * in_k[j] for `n`
/// channels, the taps added in order; in_k is `in` + (k - k0) rows of
/// `stride` floats (the input row of tap k0 first).
template <int64_t n>
inline void convTaps(const float *in, int64_t stride, const float *wT,
                     int64_t Cc, const float *bias, int64_t k0, int64_t K,
                     float *out) {
  float acc[n];
  for (int64_t j = 0; j < n; ++j)
    acc[j] = bias[j];
  for (int64_t k = k0; k < K; ++k) {
    const float *x = in + (k - k0) * stride, *w = wT + k * Cc;
    for (int64_t j = 0; j < n; ++j)
      acc[j] += w[j] * x[j];
  }
  for (int64_t j = 0; j < n; ++j)
    out[j] = acc[j];
}

/// Pre-activations of the causal depthwise conv for one row, every channel:
/// out[c] = bias[c] + sum_k w[c][k] in[row - (K-1) + k][c] over the taps
/// inside the row's sequence (`first` is its first row). `wT` is the
/// weight transposed to [K][channels].
void convRow(const MambaShape &s, const float *zxbcdt, const float *wT,
             const float *bias, int64_t row, int64_t first, float *out) {
  const int64_t K = s.convWidth, W = s.inProj(), Cc = s.convChannels();
  const int64_t k0 = firstTap(K, row, first);
  const float *in = zxbcdt + (row - (K - 1) + k0) * W + s.inner();
  forChannelBlocks(0, Cc, [&](auto n, int64_t c) {
    convTaps<n>(in + c, W, wT + c, Cc, bias + c, k0, K, out + c);
  });
}

/// The conv's input gradient for input row `src`, gathered: the row feeds
/// rows src + K-1-k of its own sequence through tap k, taps added in order.
/// `d` is the gradient of the pre-activations [T][Cc].
void convInputGradRow(const MambaShape &s, const float *d, const float *wT,
                      const int64_t *first, int64_t T, int64_t src,
                      float *out) {
  const int64_t K = s.convWidth, Cc = s.convChannels();
  // Rows past the sequence's (or the microbatch's) end read nothing: the
  // valid taps are k0 .. K-1, row src + K-1-k0 down to src.
  int64_t k0 = 0;
  while (k0 < K - 1 &&
         (src + K - 1 - k0 >= T || first[src + K - 1 - k0] != first[src]))
    ++k0;
  static const float zeros[kChannelBlock] = {};
  // Tap k reads row src + K-1-k: stepping k forward steps rows back.
  const float *in = d + (src + K - 1 - k0) * Cc;
  forChannelBlocks(0, Cc, [&](auto n, int64_t c) {
    convTaps<n>(in + c, -Cc, wT + c, Cc, zeros, k0, K, out + c);
  });
}

/// Taps whose weight-gradient accumulators one pass over the rows keeps.
constexpr int64_t kTapsPerPass = 8;

/// The conv's weight gradient for taps [kb, ke) (at most kTapsPerPass) and
/// `n` channels from c0, and with `withBias` the bias gradient: column sums
/// over the rows in order (the same bits at any thread count).
template <int64_t n>
void convWeightGradBlock(const MambaShape &s, const float *zxbcdt,
                         const float *d, const int64_t *first, int64_t T,
                         int64_t c0, int64_t kb, int64_t ke, bool withBias,
                         float *gw, float *gb) {
  const int64_t K = s.convWidth, W = s.inProj(), Cc = s.convChannels();
  float accB[n] = {}, accW[kTapsPerPass][n] = {};
  for (int64_t row = 0; row < T; ++row) {
    const float *dr = d + row * Cc + c0;
    if (withBias)
      for (int64_t j = 0; j < n; ++j)
        accB[j] += dr[j];
    const int64_t k0 = std::max(kb, firstTap(K, row, first[row]));
    const float *in = zxbcdt + (row - (K - 1) + k0) * W + s.inner() + c0;
    for (int64_t k = k0; k < ke; ++k, in += W)
      for (int64_t j = 0; j < n; ++j)
        accW[k - kb][j] += dr[j] * in[j];
  }
  for (int64_t j = 0; j < n; ++j) {
    if (withBias)
      gb[c0 + j] += accB[j];
    for (int64_t k = kb; k < ke; ++k)
      gw[(c0 + j) * K + k] += accW[k - kb][j];
  }
}

/// The conv weight [channels][K] as [K][channels] (transposedTaps).
const float *transposedConvWeight(const MambaShape &s, const float *w) {
  return transposedTaps(s.convChannels(), s.convWidth, w);
}

/// The gated norm's weight gradient for `n` columns from i0, all in group
/// g (one rstd per row): column sums over the rows in order (the same bits
/// at any thread count).
template <int64_t n>
void normWeightGradBlock(int64_t T, int64_t I, int64_t G, int64_t g, int64_t i0,
                         const float *dn, const float *gated, const float *rstd,
                         float *out) {
  float acc[n] = {};
  for (int64_t row = 0; row < T; ++row) {
    const float r = rstd[row * G + g];
    const float *a = dn + row * I + i0, *b = gated + row * I + i0;
    for (int64_t j = 0; j < n; ++j)
      acc[j] += a[j] * b[j] * r;
  }
  for (int64_t j = 0; j < n; ++j)
    out[i0 + j] += acc[j];
}

/// in_proj's output to the conv's SiLU'd output m.xbc and dt's softplus
/// m.dt (recipes/Mamba.h's convForward).
void convForward(const MambaShape &s, const TokenShape &t,
                 const MambaParams<const float> &p, MambaSaved &m) {
  const int64_t T = t.tokens(), H = s.heads, N = s.state, G = s.groups,
                I = s.inner(), Cc = s.convChannels(), W = s.inProj();
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
}

/// The gate and the group RMSNorm (norm_before_gate = False).
void gatedNormForward(const MambaShape &s, const TokenShape &t,
                      const MambaParams<const float> &p, MambaSaved &m) {
  const int64_t T = t.tokens(), G = s.groups, I = s.inner(), W = s.inProj();
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
}

/// The gated norm's backward: dyScan and z's gradient (in m.dzxbcdt), and
/// the norm's weight gradient.
void gatedNormBackward(const MambaShape &s, const TokenShape &t,
                       const MambaParams<const float> &p,
                       MambaParams<float> &gp, MambaSaved &m,
                       const float *dnormed, float *dyScan) {
  const int64_t T = t.tokens(), G = s.groups, I = s.inner(), W = s.inProj();
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
    // Its weight gradient: blocks of columns inside one group each.
    const int64_t perGroup = (gs + kChannelBlock - 1) / kChannelBlock;
#pragma omp parallel for schedule(static)
    for (int64_t item = 0; item < G * perGroup; ++item) {
      const int64_t g = item / perGroup,
                    i0 = g * gs + (item % perGroup) * kChannelBlock;
      forChannelBlocks(i0, std::min(i0 + kChannelBlock, (g + 1) * gs),
                       [&](auto n, int64_t i) {
                         normWeightGradBlock<n>(T, I, G, g, i, dnormed, m.gated,
                                                m.grstd, gp.gnorm);
                       });
    }
  }
}

/// The scan's backward: dxbc whole, dtGrad, and A's and D's gradients.
void scanBackwardStep(const MambaShape &s, const TokenShape &t,
                      const MambaParams<const float> &p, MambaParams<float> &gp,
                      MambaSaved &m, const float *dyScan, float *dxbc,
                      float *dtGrad, float *scratch) {
  std::memset(dxbc, 0, sizeof(float) * t.tokens() * s.convChannels());
  scanBackward(s, t, m.xbc, m.dt, p.aLog, p.d, m.states, dyScan, dxbc, dtGrad,
               gp.aLog, gp.d, scratch);
}

/// dt's, the SiLU's and the conv's input gradients into m.dzxbcdt, and the
/// conv's and dt_bias's weight gradients.
void convBackward(const MambaShape &s, const TokenShape &t,
                  const MambaParams<const float> &p, MambaParams<float> &gp,
                  MambaSaved &m, float *dxbc, const float *dtGrad) {
  const int64_t T = t.tokens(), H = s.heads, N = s.state, G = s.groups,
                I = s.inner(), Cc = s.convChannels(), W = s.inProj(),
                K = s.convWidth;
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
#pragma omp parallel for schedule(static)
    for (int64_t src = 0; src < T; ++src)
      convInputGradRow(s, dxbc, wT, first, T, src, m.dzxbcdt + src * W + I);
    // Weight and bias gradients: column sums over the rows, a block of
    // channels and taps a work item.
    const int64_t blocks = (Cc + kChannelBlock - 1) / kChannelBlock;
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t c0 = b * kChannelBlock;
      for (int64_t kb = 0; kb < K; kb += kTapsPerPass) {
        const int64_t ke = std::min(K, kb + kTapsPerPass);
        forChannelBlocks(
            c0, std::min(c0 + kChannelBlock, Cc), [&](auto n, int64_t c) {
              convWeightGradBlock<n>(s, m.zxbcdt, dxbc, first, T, c, kb, ke,
                                     kb == 0, gp.convW, gp.convB);
            });
      }
    }
  }
}

} // namespace

void Kernels::convForward(const MambaShape &s, const TokenShape &t,
                          const MambaParams<const float> &p, MambaSaved &m) {
  cpu::convForward(s, t, p, m);
}

void Kernels::scanForward(const MambaShape &s, const TokenShape &t,
                          const MambaParams<const float> &p, MambaSaved &m,
                          float *ws) {
  cpu::scanForward(s, t, m.xbc, m.dt, p.aLog, p.d, m.y, m.states, ws);
}

void Kernels::gatedNormForward(const MambaShape &s, const TokenShape &t,
                               const MambaParams<const float> &p,
                               MambaSaved &m) {
  cpu::gatedNormForward(s, t, p, m);
}

void Kernels::gatedNormBackward(const MambaShape &s, const TokenShape &t,
                                const MambaParams<const float> &p,
                                MambaParams<float> &gp, MambaSaved &m,
                                const float *dnormed, float *dyScan) {
  cpu::gatedNormBackward(s, t, p, gp, m, dnormed, dyScan);
}

void Kernels::scanBackward(const MambaShape &s, const TokenShape &t,
                           const MambaParams<const float> &p,
                           MambaParams<float> &gp, MambaSaved &m,
                           const float *dyScan, float *dxbc, float *dtGrad,
                           float *scratch) {
  scanBackwardStep(s, t, p, gp, m, dyScan, dxbc, dtGrad, scratch);
}

void Kernels::convBackward(const MambaShape &s, const TokenShape &t,
                           const MambaParams<const float> &p,
                           MambaParams<float> &gp, MambaSaved &m, float *dxbc,
                           const float *dtGrad) {
  cpu::convBackward(s, t, p, gp, m, dxbc, dtGrad);
}

} // namespace hypipe::rt::cpu
