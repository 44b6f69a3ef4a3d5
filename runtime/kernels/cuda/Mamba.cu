//===- Mamba.cu - the Mamba-2 mixer on the GPU, with the chunked SSD scan -===//
//
// The CPU kernel's mixer (runtime/kernels/cpu/Mamba.cpp) with the scan in
// its chunked (SSD) form over chunks of kScanChunk = 64 microbatch rows:
//   1. per (chunk, head): the chunk's own final state from its rows,
//   2. per head: states passed from chunk to chunk (the only serial loop,
//      over chunks, not tokens); the state entering every chunk is what
//      the CPU kernel saves, in the same layout,
//   3. per (chunk, head): outputs = intra-chunk part (the masked, decayed
//      C B^T matrix times x) + the entering state read out by C.
// Backward mirrors it: state gradients passed backwards over chunks, then
// every chunk's x, B, C, dt gradients from the chunk's L x L products.
// A sample boundary inside a chunk splits it into segments that never mix,
// and a chunk that starts a sample takes no state from the one before.
//
//===----------------------------------------------------------------------===//

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/cuda/Primitives.cuh"

namespace hypipe::rt::cuda {
namespace {

constexpr int L = int(MambaShape::kScanChunk);

/// Static sizes every kernel needs.
struct Dims {
  int T, H, P, N, G, I, Cc, W, K;
  float *states;
};

Dims dimsOf(const MambaShape &s, const Tokens &t) {
  return {
      int(t.tokens()),  int(s.heads),   int(s.headDim),        int(s.state),
      int(s.groups),    int(s.inner()), int(s.convChannels()), int(s.inProj()),
      int(s.convWidth), nullptr};
}

__device__ float convPre(const Dims &d, const float *zxbcdt, const float *w,
                         const float *bias, int row, int first, int c) {
  float acc = bias[c];
  for (int k = 0; k < d.K; ++k) {
    int src = row - (d.K - 1) + k;
    if (src >= first)
      acc += w[c * d.K + k] * zxbcdt[int64_t(src) * d.W + d.I + c];
  }
  return acc;
}

/// xbc = SiLU(conv(xBC)), dt = softplus(raw + dt_bias).
__global__ void convForwardKernel(Dims d, Seqs seqs, const float *zxbcdt,
                                  const float *w, const float *bias,
                                  const float *dtBias, float *xbc, float *dt) {
  int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int per = d.Cc + d.H;
  if (idx >= int64_t(d.T) * per)
    return;
  const int row = int(idx / per), c = int(idx % per);
  if (c < d.Cc) {
    xbc[int64_t(row) * d.Cc + c] =
        siluf(convPre(d, zxbcdt, w, bias, row, seqs.firstRow(row), c));
  } else {
    const int h = c - d.Cc;
    dt[int64_t(row) * d.H + h] = softplusf(
        zxbcdt[int64_t(row) * d.W + 2 * d.I + 2 * d.G * d.N + h] + dtBias[h]);
  }
}

/// The chunk's rows: count, and per row its dt, dt*A cumulated within its
/// segment (inclusive) and the segment's first row (chunk-local).
struct Chunk {
  int r0, n;
  float dt[L], cum[L];
  int seg[L];
};

__device__ void loadChunk(const Dims &d, const Seqs &seqs, const float *dtAll,
                          float A, int c, int h, Chunk &ch) {
  ch.r0 = c * L;
  ch.n = min(L, d.T - ch.r0);
  for (int i = threadIdx.x; i < ch.n; i += blockDim.x) {
    int row = ch.r0 + i;
    ch.dt[i] = dtAll[int64_t(row) * d.H + h];
    ch.seg[i] = max(seqs.firstRow(row) - ch.r0, 0);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float run = 0;
    for (int i = 0; i < ch.n; ++i) {
      float a = ch.dt[i] * A;
      run = ch.seg[i] == i ? a : run + a;
      ch.cum[i] = run;
    }
  }
  __syncthreads();
}

__device__ inline const float *xOf(const Dims &d, const float *xbc, int row,
                                   int h) {
  return xbc + int64_t(row) * d.Cc + h * d.P;
}
__device__ inline const float *bOf(const Dims &d, const float *xbc, int row,
                                   int g) {
  return xbc + int64_t(row) * d.Cc + d.I + g * d.N;
}
__device__ inline const float *cOf(const Dims &d, const float *xbc, int row,
                                   int g) {
  return xbc + int64_t(row) * d.Cc + d.I + d.G * d.N + g * d.N;
}

/// Step 1: the chunk's own final state (its last segment's rows) and how
/// much of the entering state survives the chunk.
__global__ void chunkStateKernel(Dims d, Seqs seqs, const float *xbc,
                                 const float *dtAll, const float *aLog,
                                 float *local, float *decay) {
  __shared__ Chunk ch;
  const int c = blockIdx.x, h = blockIdx.y, g = h / (d.H / d.G);
  loadChunk(d, seqs, dtAll, -expf(aLog[h]), c, h, ch);
  const int last = ch.n - 1, first = ch.seg[last];
  float *S = local + (int64_t(c) * d.H + h) * d.P * d.N;
  for (int e = threadIdx.x; e < d.P * d.N; e += blockDim.x) {
    const int p = e / d.N, nn = e % d.N;
    float acc = 0;
    for (int j = first; j <= last; ++j) {
      const int row = ch.r0 + j;
      acc += expf(ch.cum[last] - ch.cum[j]) * ch.dt[j] *
             xOf(d, xbc, row, h)[p] * bOf(d, xbc, row, g)[nn];
    }
    S[e] = acc;
  }
  if (threadIdx.x == 0)
    decay[c * d.H + h] = first == 0 ? expf(ch.cum[last]) : 0.0f;
}

/// Step 2: the state entering every chunk (saved), serial over chunks.
__global__ void statePassKernel(Dims d, Seqs seqs, int chunks,
                                const float *local, const float *decay,
                                float *states) {
  const int h = blockIdx.y;
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t PN = int64_t(d.P) * d.N;
  if (e >= PN)
    return;
  float s = 0;
  for (int c = 0; c < chunks; ++c) {
    const int64_t at = (int64_t(c) * d.H + h) * PN + e;
    states[at] = s;
    const int next = (c + 1) * L;
    s = decay[c * d.H + h] * s + local[at];
    if (next < d.T && seqs.firstRow(next) == next)
      s = 0;
  }
}

/// Step 3: outputs of the chunk's rows.
__global__ void chunkOutputKernel(Dims d, Seqs seqs, const float *xbc,
                                  const float *dtAll, const float *aLog,
                                  const float *Dp, float *y) {
  __shared__ Chunk ch;
  __shared__ float M[L][L + 1];
  const int c = blockIdx.x, h = blockIdx.y, g = h / (d.H / d.G);
  loadChunk(d, seqs, dtAll, -expf(aLog[h]), c, h, ch);
  const float *S = d.states + (int64_t(c) * d.H + h) * d.P * d.N;
  for (int e = threadIdx.x; e < ch.n * ch.n; e += blockDim.x) {
    const int i = e / ch.n, j = e % ch.n;
    float v = 0;
    if (j <= i && ch.seg[i] == ch.seg[j]) {
      const float *Ci = cOf(d, xbc, ch.r0 + i, g),
                  *Bj = bOf(d, xbc, ch.r0 + j, g);
      float dot = 0;
      for (int nn = 0; nn < d.N; ++nn)
        dot += Ci[nn] * Bj[nn];
      v = expf(ch.cum[i] - ch.cum[j]) * ch.dt[j] * dot;
    }
    M[i][j] = v;
  }
  __syncthreads();
  const float D = Dp[h];
  for (int e = threadIdx.x; e < ch.n * d.P; e += blockDim.x) {
    const int i = e / d.P, p = e % d.P, row = ch.r0 + i;
    float acc = 0;
    for (int j = ch.seg[i]; j <= i; ++j)
      acc += M[i][j] * xOf(d, xbc, ch.r0 + j, h)[p];
    if (ch.seg[i] == 0) {
      const float *Ci = cOf(d, xbc, row, g), *Sp = S + int64_t(p) * d.N;
      float inter = 0;
      for (int nn = 0; nn < d.N; ++nn)
        inter += Sp[nn] * Ci[nn];
      acc += expf(ch.cum[i]) * inter;
    }
    y[int64_t(row) * d.I + h * d.P + p] = acc + D * xOf(d, xbc, row, h)[p];
  }
}

/// Gate, then RMSNorm per group: one block per (row, group).
__global__ void gatedNormForwardKernel(Dims d, const float *y,
                                       const float *zxbcdt, const float *w,
                                       float *gated, float *grstd,
                                       float *normed) {
  const int row = blockIdx.x, g = blockIdx.y, gs = d.I / d.G;
  const int64_t base = int64_t(row) * d.I + g * gs;
  const float *z = zxbcdt + int64_t(row) * d.W + g * gs;
  float ss = 0;
  for (int i = threadIdx.x; i < gs; i += blockDim.x) {
    float v = y[base + i] * siluf(z[i]);
    gated[base + i] = v;
    ss += v * v;
  }
  ss = blockSum(ss);
  const float r = rsqrtf(ss / float(gs) + kNormEps);
  if (threadIdx.x == 0)
    grstd[int64_t(row) * d.G + g] = r;
  for (int i = threadIdx.x; i < gs; i += blockDim.x)
    normed[base + i] = gated[base + i] * r * w[g * gs + i];
}

__global__ void gatedNormBackwardKernel(Dims d, const float *dn,
                                        const float *gated, const float *grstd,
                                        const float *y, const float *w,
                                        const float *zxbcdt, float *dyScan,
                                        float *dzxbcdt) {
  const int row = blockIdx.x, g = blockIdx.y, gs = d.I / d.G;
  const int64_t base = int64_t(row) * d.I + g * gs;
  const float *z = zxbcdt + int64_t(row) * d.W + g * gs;
  const float r = grstd[int64_t(row) * d.G + g];
  float dot = 0;
  for (int i = threadIdx.x; i < gs; i += blockDim.x)
    dot += w[g * gs + i] * dn[base + i] * gated[base + i];
  dot = blockSum(dot);
  const float cc = dot / float(gs) * r * r;
  for (int i = threadIdx.x; i < gs; i += blockDim.x) {
    float dg = r * (w[g * gs + i] * dn[base + i] - gated[base + i] * cc);
    dyScan[base + i] = dg * siluf(z[i]);
    dzxbcdt[int64_t(row) * d.W + g * gs + i] =
        dg * y[base + i] * siluGradf(z[i]);
  }
}

/// Backward step 1: the gradient of each chunk's entering state from the
/// chunk's own outputs, and the chunk's decay.
__global__ void chunkStateGradKernel(Dims d, Seqs seqs, const float *xbc,
                                     const float *dtAll, const float *aLog,
                                     const float *dy, float *dS, float *decay) {
  __shared__ Chunk ch;
  const int c = blockIdx.x, h = blockIdx.y, g = h / (d.H / d.G);
  loadChunk(d, seqs, dtAll, -expf(aLog[h]), c, h, ch);
  float *out = dS + (int64_t(c) * d.H + h) * d.P * d.N;
  for (int e = threadIdx.x; e < d.P * d.N; e += blockDim.x) {
    const int p = e / d.N, nn = e % d.N;
    float acc = 0;
    for (int i = 0; i < ch.n && ch.seg[i] == 0; ++i) {
      const int row = ch.r0 + i;
      acc += expf(ch.cum[i]) * dy[int64_t(row) * d.I + h * d.P + p] *
             cOf(d, xbc, row, g)[nn];
    }
    out[e] = acc;
  }
  if (threadIdx.x == 0) {
    const int last = ch.n - 1;
    decay[c * d.H + h] = ch.seg[last] == 0 ? expf(ch.cum[last]) : 0.0f;
  }
}

/// Backward step 2: turns dS (own-output gradients) into the gradient of
/// each chunk's leaving state, serial over chunks from the last.
__global__ void statePassBackwardKernel(Dims d, Seqs seqs, int chunks,
                                        const float *decay, float *dS) {
  const int h = blockIdx.y;
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t PN = int64_t(d.P) * d.N;
  if (e >= PN)
    return;
  float gOut = 0;
  for (int c = chunks - 1; c >= 0; --c) {
    const int64_t at = (int64_t(c) * d.H + h) * PN + e;
    const float own = dS[at];
    dS[at] = gOut;
    const float gIn = own + decay[c * d.H + h] * gOut;
    gOut = seqs.firstRow(c * L) == c * L ? 0.0f : gIn;
  }
}

/// What step 3's block keeps in shared memory for its (chunk, head): the
/// pair products, then their masked forms, and the per-row terms of the
/// decays' gradient.
struct ChunkGrads {
  float CB[L][L + 1], XD[L][L + 1];
  float rowT[L], colE[L], U[L], Vraw[L], dcum[L], diag[L];
  float Wsum;
};

/// The (chunk, head) a step-3 block works on, and where its rows are.
struct ChunkHead {
  Dims d;
  const Chunk &ch;
  const float *xbc, *dy;
  const float *Sin, *dS; ///< the entering state; the leaving one's gradient
  int c, h, g;
  __device__ const float *dyOf(int row) const {
    return dy + int64_t(row) * d.I + h * d.P;
  }
};

/// CB = C B^T and XD = dY X^T over the chunk's row pairs.
__device__ __forceinline__ void pairProducts(const ChunkHead &k,
                                             ChunkGrads &s) {
  const Dims &d = k.d;
  const int n = k.ch.n;
  for (int e = threadIdx.x; e < n * n; e += blockDim.x) {
    const int i = e / n, j = e % n;
    const int ri = k.ch.r0 + i, rj = k.ch.r0 + j;
    const float *Ci = cOf(d, k.xbc, ri, k.g), *Bj = bOf(d, k.xbc, rj, k.g);
    const float *dyi = k.dyOf(ri), *xj = xOf(d, k.xbc, rj, k.h);
    float cb = 0, xd = 0;
    for (int nn = 0; nn < d.N; ++nn)
      cb += Ci[nn] * Bj[nn];
    for (int p = 0; p < d.P; ++p)
      xd += dyi[p] * xj[p];
    s.CB[i][j] = cb;
    s.XD[i][j] = xd;
  }
}

/// Row and column sums of the pair terms E dt CB XD, the direct dt term.
__device__ __forceinline__ void pairSums(const Chunk &ch, ChunkGrads &s) {
  const int n = ch.n;
  for (int k = threadIdx.x; k < n; k += blockDim.x) {
    float r = 0, col = 0;
    for (int j = ch.seg[k]; j <= k; ++j)
      r += expf(ch.cum[k] - ch.cum[j]) * ch.dt[j] * s.CB[k][j] * s.XD[k][j];
    for (int i = k; i < n && ch.seg[i] == ch.seg[k]; ++i)
      col += expf(ch.cum[i] - ch.cum[k]) * s.CB[i][k] * s.XD[i][k];
    s.rowT[k] = r;
    s.colE[k] = col;
    s.diag[k] = s.XD[k][k];
  }
}

/// Entering-state readout (U) and leaving-state (V) terms, a warp per row,
/// and the leaving state's dependence on the entering one (Wsum). Every
/// thread of the block calls it (blockSum).
__device__ __forceinline__ void stateTerms(const ChunkHead &k, ChunkGrads &s) {
  const Dims &d = k.d;
  const Chunk &ch = k.ch;
  const int n = ch.n, last = n - 1;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32,
            warps = blockDim.x / 32;
  for (int r = warp; r < n; r += warps) {
    const int row = ch.r0 + r;
    const float *Cr = cOf(d, k.xbc, row, k.g), *Br = bOf(d, k.xbc, row, k.g);
    const float *dyr = k.dyOf(row), *xr = xOf(d, k.xbc, row, k.h);
    float u = 0, v = 0;
    for (int p = lane; p < d.P; p += 32) {
      float sc = 0, sb = 0;
      for (int nn = 0; nn < d.N; ++nn) {
        sc += k.Sin[int64_t(p) * d.N + nn] * Cr[nn];
        sb += k.dS[int64_t(p) * d.N + nn] * Br[nn];
      }
      u += dyr[p] * sc;
      v += xr[p] * sb;
    }
    for (int o = 16; o > 0; o >>= 1) {
      u += __shfl_xor_sync(0xffffffffu, u, o);
      v += __shfl_xor_sync(0xffffffffu, v, o);
    }
    if (lane == 0) {
      s.U[r] = ch.seg[r] == 0 ? expf(ch.cum[r]) * u : 0.0f;
      s.Vraw[r] =
          ch.seg[r] == ch.seg[last] ? expf(ch.cum[last] - ch.cum[r]) * v : 0.0f;
    }
  }
  const int64_t PN = int64_t(d.P) * d.N;
  float w = 0;
  if (ch.seg[last] == 0)
    for (int64_t e = threadIdx.x; e < PN; e += blockDim.x)
      w += k.dS[e] * k.Sin[e];
  w = blockSum(w);
  if (threadIdx.x == 0)
    s.Wsum = ch.seg[last] == 0 ? expf(ch.cum[last]) * w : 0.0f;
}

/// One thread: the gradient of the cumulative decays, then dt's gradient
/// and the (chunk, head)'s A and D partials.
__device__ __forceinline__ void decayGradients(const ChunkHead &k, float A,
                                               ChunkGrads &s, float *dtGrad,
                                               float *partials) {
  const Dims &d = k.d;
  const Chunk &ch = k.ch;
  const int n = ch.n, last = n - 1;
  float vTotal = 0;
  for (int r = 0; r < n; ++r)
    vTotal += ch.dt[r] * s.Vraw[r];
  for (int r = 0; r < n; ++r)
    s.dcum[r] = s.rowT[r] - ch.dt[r] * s.colE[r] + s.U[r] -
                ch.dt[r] * s.Vraw[r] + (r == last ? vTotal + s.Wsum : 0.0f);
  // d(dt*A)_r = the dcum of every later row of its segment.
  float run = 0, dA = 0, dD = 0;
  for (int r = last; r >= 0; --r) {
    run =
        (r == last || ch.seg[r + 1] != ch.seg[r]) ? s.dcum[r] : run + s.dcum[r];
    const int row = ch.r0 + r;
    dtGrad[int64_t(row) * d.H + k.h] = s.colE[r] + s.Vraw[r] + run * A;
    dA += run * ch.dt[r];
    dD += s.diag[r];
  }
  partials[2 * (k.c * d.H + k.h)] = dA;
  partials[2 * (k.c * d.H + k.h) + 1] = dD;
}

/// CB -> R = mask E dt CB, XD -> Q = mask E dt XD.
__device__ __forceinline__ void maskPairs(const Chunk &ch, ChunkGrads &s) {
  const int n = ch.n;
  for (int e = threadIdx.x; e < n * n; e += blockDim.x) {
    const int i = e / n, j = e % n;
    const float f = (j <= i && ch.seg[i] == ch.seg[j])
                        ? expf(ch.cum[i] - ch.cum[j]) * ch.dt[j]
                        : 0.0f;
    s.CB[i][j] *= f;
    s.XD[i][j] *= f;
  }
}

/// x's gradient: D dY, R^T dY, and the leaving state's share.
__device__ __forceinline__ void xGradients(const ChunkHead &k, float D,
                                           const ChunkGrads &s, float *dxbc) {
  const Dims &d = k.d;
  const Chunk &ch = k.ch;
  const int n = ch.n, last = n - 1;
  for (int e = threadIdx.x; e < n * d.P; e += blockDim.x) {
    const int j = e / d.P, p = e % d.P, row = ch.r0 + j;
    float acc = D * k.dyOf(row)[p];
    for (int i = j; i < n; ++i)
      acc += s.CB[i][j] * k.dyOf(ch.r0 + i)[p];
    if (ch.seg[j] == ch.seg[last]) {
      const float *Bj = bOf(d, k.xbc, row, k.g);
      float sb = 0;
      for (int nn = 0; nn < d.N; ++nn)
        sb += k.dS[int64_t(p) * d.N + nn] * Bj[nn];
      acc += expf(ch.cum[last] - ch.cum[j]) * ch.dt[j] * sb;
    }
    dxbc[int64_t(row) * d.Cc + k.h * d.P + p] = acc;
  }
}

/// B's and C's gradients: Q's products, and the entering-state readout's and
/// leaving state's shares, added to the group's columns (its heads share
/// them).
__device__ __forceinline__ void bcGradients(const ChunkHead &k,
                                            const ChunkGrads &s, float *dxbc) {
  const Dims &d = k.d;
  const Chunk &ch = k.ch;
  const int n = ch.n, last = n - 1;
  for (int e = threadIdx.x; e < n * d.N; e += blockDim.x) {
    const int r = e / d.N, nn = e % d.N, row = ch.r0 + r;
    float dC = 0, dB = 0;
    for (int j = ch.seg[r]; j <= r; ++j)
      dC += s.XD[r][j] * bOf(d, k.xbc, ch.r0 + j, k.g)[nn];
    for (int i = r; i < n; ++i)
      dB += s.XD[i][r] * cOf(d, k.xbc, ch.r0 + i, k.g)[nn];
    if (ch.seg[r] == 0) {
      const float *dyr = k.dyOf(row);
      float sum = 0;
      for (int p = 0; p < d.P; ++p)
        sum += dyr[p] * k.Sin[int64_t(p) * d.N + nn];
      dC += expf(ch.cum[r]) * sum;
    }
    if (ch.seg[r] == ch.seg[last]) {
      const float *xr = xOf(d, k.xbc, row, k.h);
      float sum = 0;
      for (int p = 0; p < d.P; ++p)
        sum += xr[p] * k.dS[int64_t(p) * d.N + nn];
      dB += expf(ch.cum[last] - ch.cum[r]) * ch.dt[r] * sum;
    }
    atomicAdd(dxbc + int64_t(row) * d.Cc + d.I + k.g * d.N + nn, dB);
    atomicAdd(dxbc + int64_t(row) * d.Cc + d.I + d.G * d.N + k.g * d.N + nn,
              dC);
  }
}

/// Backward step 3: x, B, C and dt gradients of one (chunk, head), and its
/// share of the A and D gradients.
__global__ void chunkBackwardKernel(Dims d, Seqs seqs, const float *xbc,
                                    const float *dtAll, const float *aLog,
                                    const float *Dp, const float *dy,
                                    const float *dSout, float *dxbc,
                                    float *dtGrad, float *partials) {
  __shared__ Chunk ch;
  __shared__ ChunkGrads s;
  const int c = blockIdx.x, h = blockIdx.y, g = h / (d.H / d.G);
  const float A = -expf(aLog[h]);
  loadChunk(d, seqs, dtAll, A, c, h, ch);
  const int64_t at = (int64_t(c) * d.H + h) * d.P * d.N;
  const ChunkHead k{d, ch, xbc, dy, d.states + at, dSout + at, c, h, g};

  pairProducts(k, s);
  __syncthreads();
  pairSums(ch, s);
  stateTerms(k, s);
  __syncthreads();
  if (threadIdx.x == 0)
    decayGradients(k, A, s, dtGrad, partials);
  __syncthreads();
  maskPairs(ch, s);
  __syncthreads();
  xGradients(k, Dp[h], s, dxbc);
  bcGradients(k, s, dxbc);
}

/// A_log and D gradients: the chunks' partials summed in order.
__global__ void scanParamGradKernel(Dims d, int chunks, const float *partials,
                                    const float *aLog, float *gALog,
                                    float *gD) {
  const int h = blockIdx.x * blockDim.x + threadIdx.x;
  if (h >= d.H)
    return;
  float dA = 0, dD = 0;
  for (int c = 0; c < chunks; ++c) {
    dA += partials[2 * (c * d.H + h)];
    dD += partials[2 * (c * d.H + h) + 1];
  }
  gALog[h] += dA * -expf(aLog[h]);
  gD[h] += dD;
}

/// dt = softplus(raw + bias) backward into dzxbcdt's dt columns.
__global__ void dtBackwardKernel(Dims d, const float *zxbcdt,
                                 const float *dtBias, const float *dtGrad,
                                 float *dzxbcdt) {
  int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= int64_t(d.T) * d.H)
    return;
  const int64_t row = idx / d.H;
  const int h = int(idx % d.H);
  const int64_t at = row * d.W + 2 * d.I + 2 * d.G * d.N + h;
  dzxbcdt[at] = dtGrad[idx] * sigmoidf(zxbcdt[at] + dtBias[h]);
}

/// dxbc (post-SiLU) -> pre-activation gradient, in place.
__global__ void siluBackwardKernel(Dims d, Seqs seqs, const float *zxbcdt,
                                   const float *w, const float *bias,
                                   float *dxbc) {
  int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= int64_t(d.T) * d.Cc)
    return;
  const int row = int(idx / d.Cc), c = int(idx % d.Cc);
  dxbc[idx] *=
      siluGradf(convPre(d, zxbcdt, w, bias, row, seqs.firstRow(row), c));
}

/// Conv input gradient into dzxbcdt's xBC columns (a gather over the rows
/// each input feeds, inside its sample).
__global__ void convInputGradKernel(Dims d, Seqs seqs, const float *w,
                                    const float *dpre, float *dzxbcdt) {
  int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= int64_t(d.T) * d.Cc)
    return;
  const int src = int(idx / d.Cc), c = int(idx % d.Cc);
  float acc = 0;
  for (int k = 0; k < d.K; ++k) {
    const int row = src + (d.K - 1) - k;
    if (row < d.T && seqs.firstRow(row) <= src)
      acc += w[c * d.K + k] * dpre[int64_t(row) * d.Cc + c];
  }
  dzxbcdt[int64_t(src) * d.W + d.I + c] = acc;
}

/// Conv weight (k < K) and bias (k == K) gradients: 32 channels per block,
/// 8 row lanes reduced in a fixed order.
__global__ void convWeightGradKernel(Dims d, Seqs seqs, const float *zxbcdt,
                                     const float *dpre, float *gW, float *gB) {
  __shared__ float part[8][33];
  const int c = blockIdx.x * 32 + threadIdx.x, k = blockIdx.y;
  float acc = 0;
  if (c < d.Cc)
    for (int row = threadIdx.y; row < d.T; row += 8) {
      const float g = dpre[int64_t(row) * d.Cc + c];
      if (k == d.K) {
        acc += g;
      } else {
        const int src = row - (d.K - 1) + k;
        if (src >= seqs.firstRow(row))
          acc += g * zxbcdt[int64_t(src) * d.W + d.I + c];
      }
    }
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < d.Cc) {
    float s = 0;
    for (int r = 0; r < 8; ++r)
      s += part[r][threadIdx.x];
    if (k == d.K)
      gB[c] += s;
    else
      gW[c * d.K + k] += s;
  }
}

int64_t chunksOf(const Tokens &t) { return (t.tokens() + L - 1) / L; }

/// The scan's device-side view of the call: its dims with the saved
/// states, its sequences, its chunks.
struct ScanCall {
  Dims d;
  Seqs seqs;
  int chunks;
  ScanCall(const MambaShape &s, const Tokens &t, MambaSaved &m)
      : d(dimsOf(s, t)), seqs(seqsOf(t)), chunks(int(chunksOf(t))) {
    d.states = m.states;
  }
};

/// in_proj's output to the conv's SiLU'd output m.xbc and dt's softplus
/// m.dt (recipes/Mamba.h's convForward).
void convForward(const MambaShape &s, const Tokens &t,
                 const MambaParams<const float> &p, MambaSaved &m) {
  const ScanCall c(s, t, m);
  convForwardKernel<<<blocksFor(t.tokens() * (c.d.Cc + c.d.H)), 256, 0,
                      stream()>>>(c.d, c.seqs, m.zxbcdt, p.convW, p.convB,
                                  p.dtBias, m.xbc, m.dt);
  launched("mamba conv");
}

/// The SSD scan: chunk states, the states passed between chunks, the
/// chunks' outputs.
void scanForward(const MambaShape &s, const Tokens &t,
                 const MambaParams<const float> &p, MambaSaved &m, float *ws) {
  const ScanCall c(s, t, m);
  const int64_t PN = s.headDim * s.state;
  float *local = ws, *decay = ws + c.chunks * s.heads * PN;
  const dim3 perChunk{unsigned(c.chunks), unsigned(s.heads)};
  chunkStateKernel<<<perChunk, 256, 0, stream()>>>(c.d, c.seqs, m.xbc, m.dt,
                                                   p.aLog, local, decay);
  launched("mamba chunk states");
  statePassKernel<<<dim3(blocksFor(PN), unsigned(s.heads)), 256, 0, stream()>>>(
      c.d, c.seqs, c.chunks, local, decay, m.states);
  launched("mamba state passing");
  chunkOutputKernel<<<perChunk, 256, 0, stream()>>>(c.d, c.seqs, m.xbc, m.dt,
                                                    p.aLog, p.d, m.y);
  launched("mamba chunk outputs");
}

/// The gate and the group RMSNorm (norm_before_gate = False).
void gatedNormForward(const MambaShape &s, const Tokens &t,
                      const MambaParams<const float> &p, MambaSaved &m) {
  const ScanCall c(s, t, m);
  gatedNormForwardKernel<<<dim3(unsigned(t.tokens()), unsigned(s.groups)), 128,
                           0, stream()>>>(c.d, m.y, m.zxbcdt, p.gnorm, m.gated,
                                          m.grstd, m.normed);
  launched("mamba gated norm");
}

/// The gated norm's backward: dyScan and z's gradient (in m.dzxbcdt), and
/// the norm's weight gradient.
void gatedNormBackward(const MambaShape &s, const Tokens &t,
                       const MambaParams<const float> &p,
                       MambaParams<float> &gp, MambaSaved &m,
                       const float *dnormed, float *dyScan) {
  const ScanCall c(s, t, m);
  const int64_t T = t.tokens(), I = s.inner();
  gatedNormBackwardKernel<<<dim3(unsigned(T), unsigned(s.groups)), 128, 0,
                            stream()>>>(c.d, dnormed, m.gated, m.grstd, m.y,
                                        p.gnorm, m.zxbcdt, dyScan, m.dzxbcdt);
  launched("mamba gated norm backward");
  const int64_t gs = I / s.groups;
  for (int64_t g = 0; g < s.groups; ++g)
    columnDot(T, gs, dnormed + g * gs, I, m.gated + g * gs, I, m.grstd + g,
              s.groups, gp.gnorm + g * gs);
}

/// The scan's backward: dxbc whole, dtGrad, and A's and D's gradients;
/// `scratch` holds the states' gradients, the chunks' decays and partial
/// sums.
void scanBackward(const MambaShape &s, const Tokens &t,
                  const MambaParams<const float> &p, MambaParams<float> &gp,
                  MambaSaved &m, const float *dyScan, float *dxbc,
                  float *dtGrad, float *scratch) {
  const ScanCall c(s, t, m);
  const int64_t H = s.heads, PN = s.headDim * s.state;
  float *dS = scratch;                    // [chunks, H, P*N]
  float *decay = dS + c.chunks * H * PN;  // [chunks, H]
  float *partials = decay + c.chunks * H; // [chunks, H, 2]
  const dim3 perChunk{unsigned(c.chunks), unsigned(H)};
  chunkStateGradKernel<<<perChunk, 256, 0, stream()>>>(
      c.d, c.seqs, m.xbc, m.dt, p.aLog, dyScan, dS, decay);
  launched("mamba state gradients");
  statePassBackwardKernel<<<dim3(blocksFor(PN), unsigned(H)), 256, 0,
                            stream()>>>(c.d, c.seqs, c.chunks, decay, dS);
  launched("mamba state passing backward");
  zero(dxbc, t.tokens() * s.convChannels());
  chunkBackwardKernel<<<perChunk, 256, 0, stream()>>>(c.d, c.seqs, m.xbc, m.dt,
                                                      p.aLog, p.d, dyScan, dS,
                                                      dxbc, dtGrad, partials);
  launched("mamba chunk backward");
  scanParamGradKernel<<<blocksFor(H, 64), 64, 0, stream()>>>(
      c.d, c.chunks, partials, p.aLog, gp.aLog, gp.d);
  launched("mamba A and D gradients");
}

/// dt's, the SiLU's and the conv's input gradients into m.dzxbcdt, and the
/// conv's and dt_bias's weight gradients.
void convBackward(const MambaShape &s, const Tokens &t,
                  const MambaParams<const float> &p, MambaParams<float> &gp,
                  MambaSaved &m, float *dxbc, const float *dtGrad) {
  const ScanCall c(s, t, m);
  const int64_t T = t.tokens(), I = s.inner(), Cc = s.convChannels(),
                H = s.heads;
  dtBackwardKernel<<<blocksFor(T * H), 256, 0, stream()>>>(
      c.d, m.zxbcdt, p.dtBias, dtGrad, m.dzxbcdt);
  launched("mamba dt backward");
  columnDot(T, H, m.dzxbcdt + 2 * I + 2 * s.groupState(), s.inProj(), nullptr,
            0, nullptr, 0, gp.dtBias);
  siluBackwardKernel<<<blocksFor(T * Cc), 256, 0, stream()>>>(
      c.d, c.seqs, m.zxbcdt, p.convW, p.convB, dxbc);
  launched("mamba conv activation backward");
  convInputGradKernel<<<blocksFor(T * Cc), 256, 0, stream()>>>(
      c.d, c.seqs, p.convW, dxbc, m.dzxbcdt);
  launched("mamba conv input gradient");
  convWeightGradKernel<<<dim3(blocksFor(Cc, 32), unsigned(s.convWidth + 1)),
                         dim3(32, 8), 0, stream()>>>(c.d, c.seqs, m.zxbcdt,
                                                     dxbc, gp.convW, gp.convB);
  launched("mamba conv weight gradient");
}

} // namespace

void Kernels::convForward(const MambaShape &s, const Tokens &t,
                          const MambaParams<const float> &p, MambaSaved &m) {
  cuda::convForward(s, t, p, m);
}

void Kernels::scanForward(const MambaShape &s, const Tokens &t,
                          const MambaParams<const float> &p, MambaSaved &m,
                          float *ws) {
  cuda::scanForward(s, t, p, m, ws);
}

void Kernels::gatedNormForward(const MambaShape &s, const Tokens &t,
                               const MambaParams<const float> &p,
                               MambaSaved &m) {
  cuda::gatedNormForward(s, t, p, m);
}

void Kernels::gatedNormBackward(const MambaShape &s, const Tokens &t,
                                const MambaParams<const float> &p,
                                MambaParams<float> &gp, MambaSaved &m,
                                const float *dnormed, float *dyScan) {
  cuda::gatedNormBackward(s, t, p, gp, m, dnormed, dyScan);
}

void Kernels::scanBackward(const MambaShape &s, const Tokens &t,
                           const MambaParams<const float> &p,
                           MambaParams<float> &gp, MambaSaved &m,
                           const float *dyScan, float *dxbc, float *dtGrad,
                           float *scratch) {
  cuda::scanBackward(s, t, p, gp, m, dyScan, dxbc, dtGrad, scratch);
}

void Kernels::convBackward(const MambaShape &s, const Tokens &t,
                           const MambaParams<const float> &p,
                           MambaParams<float> &gp, MambaSaved &m, float *dxbc,
                           const float *dtGrad) {
  cuda::convBackward(s, t, p, gp, m, dxbc, dtGrad);
}

} // namespace hypipe::rt::cuda
