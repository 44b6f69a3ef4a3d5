//===- Gdn.cu - the Gated DeltaNet mixer on the GPU -----------------------===//
//
// The CPU kernel's mixer (runtime/kernels/cpu/Gdn.cpp) in a simple form:
// the conv, gates and norms one thread per row and channel (or head); the
// gated delta rule one block per value head running the recurrence token
// by token, its state [dk, dv] in the head's scratch (global memory),
// zeroed at every sequence start, the state entering every kChunk-th row
// saved in the CPU kernel's layout. Backward: the chunks in reverse, each
// one's states recomputed from its saved entering state, then the
// recurrence's adjoint over its rows (not the CPU kernel's chunked GEMM
// form: docs/gdn.md). Correct, not fast:
// one block per head. It has never run on a GPU (docs/cuda.md).
//
//===----------------------------------------------------------------------===//

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/cuda/Primitives.cuh"

namespace hypipe::rt::cuda {
namespace {

constexpr int L = int(GdnShape::kChunk);
constexpr float kL2Eps = 1e-6f;

/// Static sizes every kernel needs.
struct Dims {
  int T, nk, nv, dk, dv, Cc, W, K, Kw, V, per;
  int64_t scratch; ///< floats of rule scratch per value head
};

Dims dimsOf(const GdnShape &s, const Tokens &t) {
  return {int(t.tokens()),      int(s.keyHeads),
          int(s.valueHeads),    int(s.keyHeadDim),
          int(s.valueHeadDim),  int(s.convChannels()),
          int(s.inProj()),      int(s.convWidth),
          int(s.keyWidth()),    int(s.valueWidth()),
          int(s.headsPerKey()), s.ruleScratchFloats(Target::Cuda)};
}

__device__ float convPre(const Dims &d, const float *proj, const float *w,
                         int row, int first, int c) {
  float acc = 0;
  for (int k = 0; k < d.K; ++k) {
    const int src = row - (d.K - 1) + k;
    if (src >= first)
      acc += w[c * d.K + k] * proj[int64_t(src) * d.W + c];
  }
  return acc;
}

__global__ void convForwardKernel(Dims d, Seqs seqs, const float *proj,
                                  const float *w, float *conv) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= int64_t(d.T) * d.Cc)
    return;
  const int row = int(idx / d.Cc), c = int(idx % d.Cc);
  conv[idx] = siluf(convPre(d, proj, w, row, seqs.firstRow(row), c));
}

/// The thread's (row, item) of the gate kernels: per row, items [0, 2 nk)
/// the L2 norms of the q and k heads (part 0 or 1, key head h), then the
/// nv gates; false past the last row.
__device__ bool gateItem(const Dims &d, int64_t &row, int &item, int &part,
                         int &h) {
  const int per = 2 * d.nk + d.nv;
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  row = idx / per;
  item = int(idx % per);
  part = item / d.nk;
  h = item % d.nk;
  return idx < int64_t(d.T) * per;
}

/// Per row: items [0, 2 nk) the L2 norms of q and k heads, then nv gates.
__global__ void gatesForwardKernel(Dims d, const float *proj, const float *conv,
                                   const float *aLog, const float *dtBias,
                                   float *qk, float *qkInv, float *g,
                                   float *beta) {
  int64_t row;
  int item, part, h;
  if (!gateItem(d, row, item, part, h))
    return;
  if (item < 2 * d.nk) {
    const float *x = conv + row * d.Cc + part * d.Kw + h * d.dk;
    float ss = 0;
    for (int i = 0; i < d.dk; ++i)
      ss += x[i] * x[i];
    const float inv = rsqrtf(ss + kL2Eps);
    qkInv[row * 2 * d.nk + item] = inv;
    float *y = qk + row * 2 * d.Kw + part * d.Kw + h * d.dk;
    for (int i = 0; i < d.dk; ++i)
      y[i] = x[i] * inv;
  } else {
    const int j = item - 2 * d.nk;
    const float *b = proj + row * d.W + d.Cc + d.V;
    beta[row * d.nv + j] = sigmoidf(b[j]);
    g[row * d.nv + j] = -expf(aLog[j]) * softplusf(b[d.nv + j] + dtBias[j]);
  }
}

/// Value head j's rows.
struct Head {
  const float *q, *k, *v, *g, *beta;
  __device__ Head(const Dims &d, const float *qk, const float *conv,
                  const float *gAll, const float *betaAll, int j) {
    const int kh = j / d.per;
    q = qk + kh * d.dk;
    k = qk + d.Kw + kh * d.dk;
    v = conv + 2 * d.Kw + j * d.dv;
    g = gAll + j;
    beta = betaAll + j;
  }
};

/// u = e^{g} S_{t-1}^T k (dv floats, the block's threads over them).
__device__ void decayedReadout(const Dims &d, const float *Sp, const float *k,
                               float eg, float *u) {
  for (int e = threadIdx.x; e < d.dv; e += blockDim.x) {
    float acc = 0;
    for (int i = 0; i < d.dk; ++i)
      acc += Sp[int64_t(i) * d.dv + e] * k[i];
    u[e] = eg * acc;
  }
}

/// S_t from S_{t-1} of row r (the block's threads over S): u (dv floats,
/// shared) gets e^{g} S_{t-1}^T k.
__device__ void ruleStep(const Dims &d, const Head &h, int64_t r,
                         const float *Sp, float *St, float *u) {
  const float eg = expf(h.g[r * d.nv]), beta = h.beta[r * d.nv];
  const float *k = h.k + r * 2 * d.Kw, *v = h.v + r * d.Cc;
  decayedReadout(d, Sp, k, eg, u);
  __syncthreads();
  for (int64_t x = threadIdx.x; x < int64_t(d.dk) * d.dv; x += blockDim.x) {
    const int i = int(x / d.dv), e = int(x % d.dv);
    St[x] = eg * Sp[x] + k[i] * beta * (v[e] - u[e]);
  }
  __syncthreads();
}

/// One block per value head: the recurrence over every row.
__global__ void ruleForwardKernel(Dims d, Seqs seqs, const float *qk,
                                  const float *conv, const float *g,
                                  const float *beta, float *o, float *states,
                                  float *ws) {
  const int j = blockIdx.x;
  const Head h(d, qk, conv, g, beta, j);
  const int64_t SF = int64_t(d.dk) * d.dv;
  // The head's scratch (global memory): two states and u [dv].
  float *S = ws + j * d.scratch, *S2 = S + SF, *u = S2 + SF;
  const float scale = rsqrtf(float(d.dk));
  for (int r = 0; r < d.T; ++r) {
    if (seqs.firstRow(r) == r)
      for (int64_t x = threadIdx.x; x < SF; x += blockDim.x)
        S[x] = 0;
    __syncthreads();
    if (r % L == 0)
      for (int64_t x = threadIdx.x; x < SF; x += blockDim.x)
        states[(int64_t(r / L) * d.nv + j) * SF + x] = S[x];
    ruleStep(d, h, r, S, S2, u);
    const float *q = h.q + int64_t(r) * 2 * d.Kw;
    for (int e = threadIdx.x; e < d.dv; e += blockDim.x) {
      float acc = 0;
      for (int i = 0; i < d.dk; ++i)
        acc += S2[int64_t(i) * d.dv + e] * q[i];
      o[int64_t(r) * d.V + j * d.dv + e] = acc * scale;
    }
    for (int64_t x = threadIdx.x; x < SF; x += blockDim.x)
      S[x] = S2[x];
    __syncthreads();
  }
}

/// One block per value head: the chunks in reverse, each recomputed from
/// its saved entering state, then the adjoint over its rows.
__global__ void ruleBackwardKernel(Dims d, Seqs seqs, const float *qk,
                                   const float *conv, const float *g,
                                   const float *beta, const float *states,
                                   const float *dO, float *dqk, float *dconv,
                                   float *dg, float *dbeta, float *ws) {
  const int j = blockIdx.x;
  const Head h(d, qk, conv, g, beta, j);
  const int64_t SF = int64_t(d.dk) * d.dv;
  // The head's scratch (global memory): the chunk's states, the state's
  // gradient, and u, dd, du [dv] each.
  float *chunk = ws + j * d.scratch, *dS = chunk + (L + 1) * SF;
  float *u = dS + SF, *dd = u + d.dv, *du = dd + d.dv;
  const float scale = rsqrtf(float(d.dk));
  for (int b = d.T; b > 0;) {
    const int first = seqs.firstRow(b - 1);
    const int a = max(first, ((b - 1) / L) * L), n = b - a;
    if (seqs.rowAhead(b - 1, 1) < 0) // the sequence's last chunk
      for (int64_t x = threadIdx.x; x < SF; x += blockDim.x)
        dS[x] = 0;
    for (int64_t x = threadIdx.x; x < SF; x += blockDim.x)
      chunk[x] =
          first == a ? 0.0f : states[(int64_t(a / L) * d.nv + j) * SF + x];
    __syncthreads();
    for (int t = 0; t < n; ++t)
      ruleStep(d, h, a + t, chunk + t * SF, chunk + (t + 1) * SF, u);
    for (int t = n - 1; t >= 0; --t) {
      const int64_t r = a + t;
      const float *Sp = chunk + t * SF, *St = Sp + SF;
      const float eg = expf(h.g[r * d.nv]), bt = h.beta[r * d.nv];
      const float *q = h.q + r * 2 * d.Kw, *k = h.k + r * 2 * d.Kw,
                  *v = h.v + r * d.Cc, *dOr = dO + r * d.V + j * d.dv;
      float *dq = dqk + (r * 2 * d.nv + j) * d.dk,
            *dkr = dqk + ((r * 2 + 1) * d.nv + j) * d.dk;
      decayedReadout(d, Sp, k, eg, u);
      for (int64_t x = threadIdx.x; x < SF; x += blockDim.x)
        dS[x] += q[x / d.dv] * scale * dOr[x % d.dv];
      __syncthreads();
      for (int i = threadIdx.x; i < d.dk; i += blockDim.x) {
        float aq = 0, ak = 0;
        for (int e = 0; e < d.dv; ++e) {
          aq += St[int64_t(i) * d.dv + e] * dOr[e];
          ak += dS[int64_t(i) * d.dv + e] * bt * (v[e] - u[e]);
        }
        dq[i] = aq * scale;
        dkr[i] = ak;
      }
      for (int e = threadIdx.x; e < d.dv; e += blockDim.x) {
        float acc = 0;
        for (int i = 0; i < d.dk; ++i)
          acc += dS[int64_t(i) * d.dv + e] * k[i];
        dd[e] = acc;
      }
      __syncthreads();
      float part = 0;
      for (int e = threadIdx.x; e < d.dv; e += blockDim.x) {
        part += dd[e] * (v[e] - u[e]);
        dconv[r * d.Cc + 2 * d.Kw + j * d.dv + e] = bt * dd[e];
        du[e] = -bt * dd[e];
      }
      const float dBeta = blockSum(part);
      if (threadIdx.x == 0)
        dbeta[r * d.nv + j] = dBeta;
      __syncthreads();
      for (int i = threadIdx.x; i < d.dk; i += blockDim.x) {
        float acc = 0;
        for (int e = 0; e < d.dv; ++e)
          acc += Sp[int64_t(i) * d.dv + e] * du[e];
        dkr[i] += eg * acc;
      }
      part = 0;
      for (int64_t x = threadIdx.x; x < SF; x += blockDim.x) {
        const float dSt = dS[x] + k[x / d.dv] * du[x % d.dv];
        part += dSt * Sp[x];
        dS[x] = eg * dSt;
      }
      const float dG = blockSum(part);
      if (threadIdx.x == 0)
        dg[r * d.nv + j] = dG * eg;
      __syncthreads();
    }
    b = a;
  }
}

/// One thread per (row, value head): the out norm times SiLU(z).
__global__ void normForwardKernel(Dims d, const float *proj, const float *o,
                                  const float *w, float *orstd, float *normed) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= int64_t(d.T) * d.nv)
    return;
  const int64_t row = idx / d.nv;
  const int j = int(idx % d.nv);
  const float *x = o + row * d.V + j * d.dv,
              *z = proj + row * d.W + d.Cc + j * d.dv;
  float ss = 0;
  for (int e = 0; e < d.dv; ++e)
    ss += x[e] * x[e];
  const float r = rsqrtf(ss / float(d.dv) + kNormEps);
  orstd[idx] = r;
  for (int e = 0; e < d.dv; ++e)
    normed[row * d.V + j * d.dv + e] = x[e] * r * w[e] * siluf(z[e]);
}

/// dn = dnormed * SiLU(z), the norm's output gradient (for its weight's).
__global__ void normGateKernel(Dims d, const float *proj, const float *dnormed,
                               float *dn) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= int64_t(d.T) * d.V)
    return;
  const int64_t row = idx / d.V;
  dn[idx] = dnormed[idx] * siluf(proj[row * d.W + d.Cc + idx % d.V]);
}

/// One thread per (row, value head): dO from dn (in place) and z's
/// gradient.
__global__ void normBackwardKernel(Dims d, const float *proj, const float *o,
                                   const float *w, const float *orstd,
                                   const float *dnormed, float *dn,
                                   float *dproj) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= int64_t(d.T) * d.nv)
    return;
  const int64_t row = idx / d.nv;
  const int j = int(idx % d.nv);
  const int64_t at = row * d.V + j * d.dv;
  const float *x = o + at, *z = proj + row * d.W + d.Cc + j * d.dv;
  const float r = orstd[idx];
  float dot = 0;
  for (int e = 0; e < d.dv; ++e) {
    dot += w[e] * dn[at + e] * x[e];
    dproj[row * d.W + d.Cc + j * d.dv + e] =
        dnormed[at + e] * x[e] * r * w[e] * siluGradf(z[e]);
  }
  const float c = dot / float(d.dv) * r * r;
  for (int e = 0; e < d.dv; ++e)
    dn[at + e] = r * (w[e] * dn[at + e] - x[e] * c);
}

/// Per row: items [0, 2 nk) the L2 norms' backward, then nv gates'.
__global__ void gatesBackwardKernel(Dims d, const float *proj, const float *qk,
                                    const float *qkInv, const float *beta,
                                    const float *aLog, const float *dtBias,
                                    const float *dqk, const float *dg,
                                    const float *dbeta, float *dconv,
                                    float *dproj) {
  int64_t row;
  int item, part, h;
  if (!gateItem(d, row, item, part, h))
    return;
  if (item < 2 * d.nk) {
    const float *y = qk + row * 2 * d.Kw + part * d.Kw + h * d.dk;
    const float *dy = dqk + (row * 2 + part) * d.nv * d.dk;
    float dot = 0;
    for (int i = 0; i < d.dk; ++i) {
      float acc = 0;
      for (int j = h * d.per; j < (h + 1) * d.per; ++j)
        acc += dy[j * d.dk + i];
      dot += acc * y[i];
    }
    const float inv = qkInv[row * 2 * d.nk + item];
    float *dx = dconv + row * d.Cc + part * d.Kw + h * d.dk;
    for (int i = 0; i < d.dk; ++i) {
      float acc = 0;
      for (int j = h * d.per; j < (h + 1) * d.per; ++j)
        acc += dy[j * d.dk + i];
      dx[i] = inv * (acc - y[i] * dot);
    }
  } else {
    const int j = item - 2 * d.nk;
    const float b = beta[row * d.nv + j];
    const float alpha = proj[row * d.W + d.Cc + d.V + d.nv + j];
    dproj[row * d.W + d.Cc + d.V + j] = dbeta[row * d.nv + j] * b * (1 - b);
    dproj[row * d.W + d.Cc + d.V + d.nv + j] =
        dg[row * d.nv + j] * -expf(aLog[j]) * sigmoidf(alpha + dtBias[j]);
  }
}

__global__ void siluBackwardKernel(Dims d, Seqs seqs, const float *proj,
                                   const float *w, float *dconv) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= int64_t(d.T) * d.Cc)
    return;
  const int row = int(idx / d.Cc), c = int(idx % d.Cc);
  dconv[idx] *= siluGradf(convPre(d, proj, w, row, seqs.firstRow(row), c));
}

__global__ void convInputGradKernel(Dims d, Seqs seqs, const float *w,
                                    const float *dpre, float *dproj) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= int64_t(d.T) * d.Cc)
    return;
  const int src = int(idx / d.Cc), c = int(idx % d.Cc);
  float acc = 0;
  for (int k = 0; k < d.K; ++k) {
    const int dst = src + d.K - 1 - k;
    if (seqs.rowAhead(src, d.K - 1 - k) >= 0)
      acc += w[c * d.K + k] * dpre[int64_t(dst) * d.Cc + c];
  }
  dproj[int64_t(src) * d.W + c] = acc;
}

/// One thread per (channel, tap): the rows in order (deterministic).
__global__ void convWeightGradKernel(Dims d, Seqs seqs, const float *proj,
                                     const float *dpre, float *gw) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= int64_t(d.Cc) * d.K)
    return;
  const int c = int(idx / d.K), k = int(idx % d.K);
  float acc = 0;
  for (int row = 0; row < d.T; ++row) {
    const int src = row - (d.K - 1) + k;
    if (src >= seqs.firstRow(row))
      acc += dpre[int64_t(row) * d.Cc + c] * proj[int64_t(src) * d.W + c];
  }
  gw[idx] += acc;
}

/// Threads of a rule block.
constexpr int kRuleThreads = 256;

} // namespace

void Kernels::gdnConvForward(const GdnShape &s, const Tokens &t,
                             const GdnParams<const float> &p, GdnSaved &m) {
  const Dims d = dimsOf(s, t);
  convForwardKernel<<<blocksFor(int64_t(d.T) * d.Cc), 256, 0, stream()>>>(
      d, seqsOf(t), m.proj, p.convW, m.conv);
  launched("gdn conv");
}

void Kernels::gdnGatesForward(const GdnShape &s, const Tokens &t,
                              const GdnParams<const float> &p, GdnSaved &m) {
  const Dims d = dimsOf(s, t);
  gatesForwardKernel<<<blocksFor(int64_t(d.T) * (2 * d.nk + d.nv)), 256, 0,
                       stream()>>>(d, m.proj, m.conv, p.aLog, p.dtBias, m.qk,
                                   m.qkInv, m.g, m.beta);
  launched("gdn gates");
}

void Kernels::gdnRuleForward(const GdnShape &s, const Tokens &t, GdnSaved &m,
                             float *ws) {
  const Dims d = dimsOf(s, t);
  ruleForwardKernel<<<unsigned(d.nv), kRuleThreads, 0, stream()>>>(
      d, seqsOf(t), m.qk, m.conv, m.g, m.beta, m.o, m.states, ws);
  launched("gdn rule");
}

void Kernels::gdnNormForward(const GdnShape &s, const Tokens &t,
                             const GdnParams<const float> &p, GdnSaved &m) {
  const Dims d = dimsOf(s, t);
  normForwardKernel<<<blocksFor(int64_t(d.T) * d.nv), 256, 0, stream()>>>(
      d, m.proj, m.o, p.outNorm, m.orstd, m.normed);
  launched("gdn out norm");
}

void Kernels::gdnNormBackward(const GdnShape &s, const Tokens &t,
                              const GdnParams<const float> &p,
                              GdnParams<float> &gp, GdnSaved &m,
                              const float *dnormed, float *dO) {
  const Dims d = dimsOf(s, t);
  normGateKernel<<<blocksFor(int64_t(d.T) * d.V), 256, 0, stream()>>>(
      d, m.proj, dnormed, dO);
  launched("gdn out norm gate");
  // Its weight's gradient: rows of dv over (row, head).
  columnDot(int64_t(d.T) * d.nv, d.dv, dO, d.dv, m.o, d.dv, m.orstd, 1,
            gp.outNorm);
  normBackwardKernel<<<blocksFor(int64_t(d.T) * d.nv), 256, 0, stream()>>>(
      d, m.proj, m.o, p.outNorm, m.orstd, dnormed, dO, m.dproj);
  launched("gdn out norm backward");
}

void Kernels::gdnRuleBackward(const GdnShape &s, const Tokens &t,
                              const GdnSaved &m, const float *dO, float *dqk,
                              float *dconv, float *dg, float *dbeta,
                              float *ws) {
  const Dims d = dimsOf(s, t);
  ruleBackwardKernel<<<unsigned(d.nv), kRuleThreads, 0, stream()>>>(
      d, seqsOf(t), m.qk, m.conv, m.g, m.beta, m.states, dO, dqk, dconv, dg,
      dbeta, ws);
  launched("gdn rule backward");
}

void Kernels::gdnGatesBackward(const GdnShape &s, const Tokens &t,
                               const GdnParams<const float> &p,
                               GdnParams<float> &gp, GdnSaved &m,
                               const float *dqk, const float *dg,
                               const float *dbeta, float *dconv) {
  const Dims d = dimsOf(s, t);
  gatesBackwardKernel<<<blocksFor(int64_t(d.T) * (2 * d.nk + d.nv)), 256, 0,
                        stream()>>>(d, m.proj, m.qk, m.qkInv, m.beta, p.aLog,
                                    p.dtBias, dqk, dg, dbeta, dconv, m.dproj);
  launched("gdn gates backward");
  columnDot(d.T, d.nv, m.dproj + d.Cc + d.V + d.nv, d.W, nullptr, 0, nullptr, 0,
            gp.dtBias);
  columnDot(d.T, d.nv, dg, d.nv, m.g, d.nv, nullptr, 0, gp.aLog);
}

void Kernels::gdnConvBackward(const GdnShape &s, const Tokens &t,
                              const GdnParams<const float> &p,
                              GdnParams<float> &gp, GdnSaved &m, float *dconv) {
  const Dims d = dimsOf(s, t);
  const Seqs seqs = seqsOf(t);
  siluBackwardKernel<<<blocksFor(int64_t(d.T) * d.Cc), 256, 0, stream()>>>(
      d, seqs, m.proj, p.convW, dconv);
  launched("gdn conv activation backward");
  convInputGradKernel<<<blocksFor(int64_t(d.T) * d.Cc), 256, 0, stream()>>>(
      d, seqs, p.convW, dconv, m.dproj);
  launched("gdn conv input gradient");
  convWeightGradKernel<<<blocksFor(int64_t(d.Cc) * d.K), 256, 0, stream()>>>(
      d, seqs, m.proj, dconv, gp.convW);
  launched("gdn conv weight gradient");
}

} // namespace hypipe::rt::cuda
