//===- Scan.cpp - Mamba-2's SSD scan in its chunked form on the CPU -------===//
//
// The recurrence, per (sequence, head), with a_t = exp(dt_t A):
//   h_t = a_t h_{t-1} + dt_t x_t B_t^T,   y_t = h_t C_t + D x_t
// is computed over chunks of kScanChunk = L microbatch rows (the state
// every chunk enters with is what the layer saves). Inside a run of l rows
// of one sequence in one chunk (a segment), with cs_r = sum_{k<=r} dt_k A:
//   Y = M X + diag(exp cs) C S0^T + D X,  M_rs = (C_r . B_s) e^{cs_r-cs_s} dt_s
//   S_out = e^{cs_last} S0 + X^T diag(e^{cs_last-cs_s} dt_s) B
// so the work is OpenBLAS products of L x L, L x P and P x N blocks:
//   1. per (chunk, group): C B^T once, then per head the intra-chunk outputs
//      M X and the state the chunk's last segment leaves from its own rows,
//   2. per head: the entering states, serial over chunks (P x N per chunk),
//   3. per (chunk, head): the entering state read out by C.
// Backward mirrors it: (1) each chunk's own contribution to the gradient of
// its entering state, dY^T diag(exp cs) C; (2) those passed back over the
// chunks; (3) per (chunk, group) the x, B, C, dt gradients from the same
// blocks and the A and D partials, summed in chunk order at the end. A
// sequence that starts inside a chunk starts a new segment with a zero
// state, so packed samples never see each other. docs/kernels.md derives
// the gradients.
//
//===----------------------------------------------------------------------===//

#include "runtime/kernels/cpu/Scan.h"
#include "runtime/kernels/cpu/Primitives.h"
#include "runtime/kernels/cpu/Profile.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace hypipe::rt::cpu {
namespace {

constexpr int64_t L = MambaShape::kScanChunk;

/// A run of rows of one sequence inside one chunk.
struct Segment {
  int64_t row0, len;
  /// The sequence started in an earlier chunk: the segment enters with the
  /// chunk's saved state (it is then the chunk's first segment).
  bool continues;
};

/// Every chunk's segments in row order: chunk c owns
/// segs[begin[c]] .. segs[begin[c + 1] - 1].
struct Segments {
  std::vector<Segment> segs;
  std::vector<int64_t> begin;

  void build(const TokenShape &t, int64_t chunks) {
    segs.clear();
    begin.assign(size_t(chunks + 1), 0);
    for (int64_t q = 0; q < t.sequences(); ++q) {
      const int64_t first = t.start(q), end = first + t.length(q);
      for (int64_t r = first; r < end;) {
        const int64_t e = std::min(end, (r / L + 1) * L);
        segs.push_back({r, e - r, r != first});
        ++begin[size_t(r / L + 1)];
        r = e;
      }
    }
    for (int64_t c = 0; c < chunks; ++c)
      begin[size_t(c + 1)] += begin[size_t(c)];
  }
  bool empty(int64_t c) const { return begin[c] == begin[c + 1]; }
  const Segment &first(int64_t c) const { return segs[size_t(begin[c])]; }
  const Segment &last(int64_t c) const {
    return segs[size_t(begin[c + 1] - 1)];
  }
  /// The chunk enters with the state of the sequence crossing into it.
  bool entersWithState(int64_t c) const {
    return !empty(c) && first(c).continues;
  }
};

/// Per-thread blocks, sized once (no allocation in a step after the first).
struct Scratch {
  std::vector<float> buf;
  float *cb, *m, *g, *t1, *t2, *cs, *dcs, *ddt;
  float *gsum; ///< the CB gradient summed over a group's heads
};

Scratch &scratch(const MambaShape &s) {
  thread_local Scratch sc;
  const int64_t wide = std::max(s.headDim, s.state);
  const size_t need = size_t(4 * L * L + 2 * L * wide + 3 * L);
  if (sc.buf.size() < need)
    sc.buf.resize(need);
  float *p = sc.buf.data();
  sc.cb = p, p += L * L;
  sc.m = p, p += L * L;
  sc.g = p, p += L * L;
  sc.t1 = p, p += L * wide;
  sc.t2 = p, p += L * wide;
  sc.cs = p, p += L;
  sc.dcs = p, p += L;
  sc.ddt = p, p += L;
  sc.gsum = p;
  return sc;
}

/// cs[r] = A * (dt_0 + ... + dt_r) over a segment (dt has row stride H).
void cumulativeDecay(const float *dt, int64_t H, float A, int64_t l,
                     float *cs) {
  float acc = 0;
  for (int64_t r = 0; r < l; ++r) {
    acc += dt[r * H] * A;
    cs[r] = acc;
  }
}

/// A = -exp(A_log) of head h.
inline float decayRate(const float *aLog, int64_t h) {
  return -std::exp(aLog[h]);
}

/// exp(cs) at a segment's last row: how much of its entering state leaves.
float segmentDecay(const float *dt, int64_t H, float A, int64_t l) {
  float acc = 0;
  for (int64_t r = 0; r < l; ++r)
    acc += dt[r * H] * A;
  return fastExp(acc);
}

struct Dims {
  int64_t H, P, N, G, I, Cc, hpg, PN, chunks;
  explicit Dims(const MambaShape &s, const TokenShape &t)
      : H(s.heads), P(s.headDim), N(s.state), G(s.groups), I(s.inner()),
        Cc(s.convChannels()), hpg(s.heads / s.groups), PN(P * N),
        chunks(s.scanChunks(t)) {}
};

} // namespace

int64_t scanWorkspaceFloats(const MambaShape &s, const TokenShape &t) {
  return s.scanChunks(t) * s.heads * (s.headDim * s.state + 2);
}

void scanForward(const MambaShape &s, const TokenShape &t, const float *xbc,
                 const float *dt, const float *aLog, const float *D, float *y,
                 float *states, float *ws) {
  ProfileScope scope(KernelClass::Scan);
  const Dims d(s, t);
  thread_local Segments segmentsOfThisThread;
  Segments &sg = segmentsOfThisThread; // shared with the loops' threads
  sg.build(t, d.chunks);
  float *own = ws; // [chunk][head][P x N]: what the chunk's last segment adds

  // 1. Intra-chunk outputs and the chunks' own states.
#pragma omp parallel
  {
    // Every thread sizes its scratch whichever items it gets, so a later
    // step allocates nothing however the items fall.
    Scratch &sc = scratch(s);
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t c = 0; c < d.chunks; ++c)
      for (int64_t g = 0; g < d.G; ++g) {
        for (int64_t i = sg.begin[c]; i < sg.begin[c + 1]; ++i) {
          const Segment &seg = sg.segs[size_t(i)];
          const int64_t l = seg.len, r0 = seg.row0;
          const float *B = xbc + r0 * d.Cc + d.I + g * d.N, *C = B + d.G * d.N;
          gemm(false, true, l, l, d.N, 1.0f, C, d.Cc, B, d.Cc, 0.0f, sc.cb, l);
          for (int64_t h = g * d.hpg; h < (g + 1) * d.hpg; ++h) {
            const float *X = xbc + r0 * d.Cc + h * d.P,
                        *dth = dt + r0 * d.H + h;
            float *Y = y + r0 * d.I + h * d.P;
            cumulativeDecay(dth, d.H, decayRate(aLog, h), l, sc.cs);
            for (int64_t r = 0; r < l; ++r) {
              float *mr = sc.m + r * l;
              const float *cbr = sc.cb + r * l;
              for (int64_t j = 0; j <= r; ++j)
                mr[j] = cbr[j] * fastExp(sc.cs[r] - sc.cs[j]) * dth[j * d.H];
              std::fill(mr + r + 1, mr + l, 0.0f);
            }
            gemm(false, false, l, d.P, l, 1.0f, sc.m, l, X, d.Cc, 0.0f, Y, d.I);
            for (int64_t r = 0; r < l; ++r)
              for (int64_t p = 0; p < d.P; ++p)
                Y[r * d.I + p] += D[h] * X[r * d.Cc + p];
            if (i + 1 == sg.begin[c + 1]) {
              for (int64_t j = 0; j < l; ++j) {
                float w = fastExp(sc.cs[l - 1] - sc.cs[j]) * dth[j * d.H];
                for (int64_t n = 0; n < d.N; ++n)
                  sc.t1[j * d.N + n] = w * B[j * d.Cc + n];
              }
              gemm(true, false, d.P, d.N, l, 1.0f, X, d.Cc, sc.t1, d.N, 0.0f,
                   own + (c * d.H + h) * d.PN, d.N);
            }
          }
        }
      }
  }

  // 2. The state entering every chunk, serial over chunks.
#pragma omp parallel for schedule(static)
  for (int64_t h = 0; h < d.H; ++h)
    for (int64_t c = 0; c < d.chunks; ++c) {
      float *enter = states + (c * d.H + h) * d.PN;
      if (!sg.entersWithState(c)) {
        std::memset(enter, 0, sizeof(float) * d.PN);
        continue;
      }
      // The previous chunk's last segment is the same sequence.
      const Segment &prev = sg.last(c - 1);
      const float decay = prev.continues
                              ? segmentDecay(dt + prev.row0 * d.H + h, d.H,
                                             decayRate(aLog, h), prev.len)
                              : 0.0f;
      const float *before = states + ((c - 1) * d.H + h) * d.PN,
                  *added = own + ((c - 1) * d.H + h) * d.PN;
      for (int64_t k = 0; k < d.PN; ++k)
        enter[k] = decay * before[k] + added[k];
    }

    // 3. The entering state read out by C in each chunk's first segment.
#pragma omp parallel
  {
    // Every thread sizes its scratch whichever items it gets, so a later
    // step allocates nothing however the items fall.
    Scratch &sc = scratch(s);
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t c = 0; c < d.chunks; ++c)
      for (int64_t h = 0; h < d.H; ++h) {
        if (!sg.entersWithState(c))
          continue;
        const Segment &seg = sg.first(c);
        const int64_t l = seg.len, r0 = seg.row0, g = h / d.hpg;
        const float *C = xbc + r0 * d.Cc + d.I + d.G * d.N + g * d.N;
        float *Y = y + r0 * d.I + h * d.P;
        cumulativeDecay(dt + r0 * d.H + h, d.H, decayRate(aLog, h), l, sc.cs);
        gemm(false, true, l, d.P, d.N, 1.0f, C, d.Cc,
             states + (c * d.H + h) * d.PN, d.N, 0.0f, sc.t1, d.P);
        for (int64_t r = 0; r < l; ++r) {
          const float e = fastExp(sc.cs[r]);
          for (int64_t p = 0; p < d.P; ++p)
            Y[r * d.I + p] += e * sc.t1[r * d.P + p];
        }
      }
  }
}

void scanBackward(const MambaShape &s, const TokenShape &t, const float *xbc,
                  const float *dt, const float *aLog, const float *D,
                  const float *states, const float *dy, float *dxbc, float *ddt,
                  float *gALog, float *gD, float *ws) {
  ProfileScope scope(KernelClass::Scan);
  const Dims d(s, t);
  thread_local Segments segmentsOfThisThread;
  Segments &sg = segmentsOfThisThread; // shared with the loops' threads
  sg.build(t, d.chunks);
  float *dS = ws; // [chunk][head][P x N]: gradient of the entering state
  float *partial = dS + d.chunks * d.H * d.PN; // [chunk][head][dA, dD]

  // 1. Each chunk's own outputs' share of its entering state's gradient.
#pragma omp parallel
  {
    // Every thread sizes its scratch whichever items it gets, so a later
    // step allocates nothing however the items fall.
    Scratch &sc = scratch(s);
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t c = 0; c < d.chunks; ++c)
      for (int64_t h = 0; h < d.H; ++h) {
        float *out = dS + (c * d.H + h) * d.PN;
        if (!sg.entersWithState(c)) {
          std::memset(out, 0, sizeof(float) * d.PN);
          continue;
        }
        const Segment &seg = sg.first(c);
        const int64_t l = seg.len, r0 = seg.row0, g = h / d.hpg;
        const float *C = xbc + r0 * d.Cc + d.I + d.G * d.N + g * d.N;
        cumulativeDecay(dt + r0 * d.H + h, d.H, decayRate(aLog, h), l, sc.cs);
        for (int64_t r = 0; r < l; ++r) {
          const float e = fastExp(sc.cs[r]);
          for (int64_t n = 0; n < d.N; ++n)
            sc.t1[r * d.N + n] = e * C[r * d.Cc + n];
        }
        gemm(true, false, d.P, d.N, l, 1.0f, dy + r0 * d.I + h * d.P, d.I,
             sc.t1, d.N, 0.0f, out, d.N);
      }
  }

  // 2. Passed back over the chunks: a chunk that is one continuing segment
  // hands the next chunk's entering-state gradient through its decay.
#pragma omp parallel for schedule(static)
  for (int64_t h = 0; h < d.H; ++h)
    for (int64_t c = d.chunks - 2; c >= 0; --c) {
      if (!sg.entersWithState(c) || !sg.entersWithState(c + 1) ||
          sg.begin[c + 1] - sg.begin[c] != 1)
        continue;
      const Segment &seg = sg.first(c);
      const float decay = segmentDecay(dt + seg.row0 * d.H + h, d.H,
                                       decayRate(aLog, h), seg.len);
      float *here = dS + (c * d.H + h) * d.PN;
      const float *next = dS + ((c + 1) * d.H + h) * d.PN;
      for (int64_t k = 0; k < d.PN; ++k)
        here[k] += decay * next[k];
    }

    // 3. x, B, C, dt gradients per (chunk, group); the heads of a group share
    // B and C, so they run in order inside one work item.
#pragma omp parallel
  {
    // Every thread sizes its scratch whichever items it gets, so a later
    // step allocates nothing however the items fall.
    Scratch &sc = scratch(s);
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t c = 0; c < d.chunks; ++c)
      for (int64_t g = 0; g < d.G; ++g) {
        for (int64_t h = g * d.hpg; h < (g + 1) * d.hpg; ++h)
          partial[(c * d.H + h) * 2] = partial[(c * d.H + h) * 2 + 1] = 0;
        for (int64_t i = sg.begin[c]; i < sg.begin[c + 1]; ++i) {
          const Segment &seg = sg.segs[size_t(i)];
          const int64_t l = seg.len, r0 = seg.row0;
          const float *B = xbc + r0 * d.Cc + d.I + g * d.N, *C = B + d.G * d.N;
          float *dB = dxbc + r0 * d.Cc + d.I + g * d.N, *dC = dB + d.G * d.N;
          const bool isLast = i + 1 == sg.begin[c + 1];
          const bool leaves =
              isLast && c + 1 < d.chunks && sg.entersWithState(c + 1);
          gemm(false, true, l, l, d.N, 1.0f, C, d.Cc, B, d.Cc, 0.0f, sc.cb, l);
          // The heads of a group share B and C: their CB gradients add up
          // first, and dB, dC take two products per group, not per head.
          std::fill(sc.gsum, sc.gsum + l * l, 0.0f);
          for (int64_t h = g * d.hpg; h < (g + 1) * d.hpg; ++h) {
            const float *X = xbc + r0 * d.Cc + h * d.P,
                        *dth = dt + r0 * d.H + h, *dY = dy + r0 * d.I + h * d.P;
            float *dX = dxbc + r0 * d.Cc + h * d.P;
            const float a = decayRate(aLog, h);
            const float *S0 =
                seg.continues ? states + (c * d.H + h) * d.PN : nullptr;
            const float *dSout =
                leaves ? dS + ((c + 1) * d.H + h) * d.PN : nullptr;
            float *cs = sc.cs, *dcs = sc.dcs, *ddtx = sc.ddt;
            cumulativeDecay(dth, d.H, a, l, cs);
            std::fill(dcs, dcs + l, 0.0f);
            std::fill(ddtx, ddtx + l, 0.0f);

            // Intra-chunk pairs: G = dY X^T; M, and dCB = G e^{..} dt.
            gemm(false, true, l, l, d.P, 1.0f, dY, d.I, X, d.Cc, 0.0f, sc.g, l);
            for (int64_t r = 0; r < l; ++r) {
              float *mr = sc.m + r * l, *gr = sc.g + r * l;
              const float *cbr = sc.cb + r * l;
              float rowTerm = 0;
#pragma omp simd reduction(+ : rowTerm)
              for (int64_t j = 0; j <= r; ++j) {
                const float decay = fastExp(cs[r] - cs[j]), dtj = dth[j * d.H];
                const float q = gr[j] * cbr[j] * decay;
                ddtx[j] += q;
                rowTerm += q * dtj;
                dcs[j] -= q * dtj;
                mr[j] = cbr[j] * decay * dtj;
                gr[j] = gr[j] * decay * dtj;
              }
              dcs[r] += rowTerm;
              std::fill(mr + r + 1, mr + l, 0.0f);
              std::fill(gr + r + 1, gr + l, 0.0f);
            }
            gemm(true, false, l, d.P, l, 1.0f, sc.m, l, dY, d.I, 1.0f, dX,
                 d.Cc);
            for (int64_t r = 0; r < l; ++r)
              for (int64_t p = 0; p < d.P; ++p)
                dX[r * d.Cc + p] += D[h] * dY[r * d.I + p];
            for (int64_t k = 0; k < l * l; ++k)
              sc.gsum[k] += sc.g[k];

            // The entering state read out: y_r += e^{cs_r} S0 C_r.
            if (S0) {
              gemm(false, true, l, d.P, d.N, 1.0f, C, d.Cc, S0, d.N, 0.0f,
                   sc.t1, d.P);
              gemm(false, false, l, d.N, d.P, 1.0f, dY, d.I, S0, d.N, 0.0f,
                   sc.t2, d.N);
              for (int64_t r = 0; r < l; ++r) {
                const float e = fastExp(cs[r]);
                float dot = 0;
#pragma omp simd reduction(+ : dot)
                for (int64_t p = 0; p < d.P; ++p)
                  dot += dY[r * d.I + p] * sc.t1[r * d.P + p];
                dcs[r] += e * dot;
                for (int64_t n = 0; n < d.N; ++n)
                  dC[r * d.Cc + n] += e * sc.t2[r * d.N + n];
              }
            }

            // The leaving state: S_out = e^{cs_last} S0 + sum_j w_j x_j B_j^T.
            if (dSout) {
              gemm(false, false, l, d.N, d.P, 1.0f, X, d.Cc, dSout, d.N, 0.0f,
                   sc.t1, d.N);
              gemm(false, true, l, d.P, d.N, 1.0f, B, d.Cc, dSout, d.N, 0.0f,
                   sc.t2, d.P);
              float lastTerm = 0;
              for (int64_t j = 0; j < l; ++j) {
                const float decay = fastExp(cs[l - 1] - cs[j]),
                            w = decay * dth[j * d.H];
                float u = 0;
#pragma omp simd reduction(+ : u)
                for (int64_t n = 0; n < d.N; ++n) {
                  u += sc.t1[j * d.N + n] * B[j * d.Cc + n];
                  dB[j * d.Cc + n] += w * sc.t1[j * d.N + n];
                }
                for (int64_t p = 0; p < d.P; ++p)
                  dX[j * d.Cc + p] += w * sc.t2[j * d.P + p];
                ddtx[j] += decay * u;
                lastTerm += w * u;
                dcs[j] -= w * u;
              }
              if (S0) {
                double dot = 0;
#pragma omp simd reduction(+ : dot)
                for (int64_t k = 0; k < d.PN; ++k)
                  dot += double(dSout[k]) * S0[k];
                lastTerm += fastExp(cs[l - 1]) * float(dot);
              }
              dcs[l - 1] += lastTerm;
            }

            // cs_r = a * sum_{k<=r} dt_k: each dt_k gets a times the gradient
            // of every cs_r with r >= k; A gets sum_k dt_k times it.
            double dApart = 0, dDpart = 0;
            float suffix = 0;
            for (int64_t k = l - 1; k >= 0; --k) {
              suffix += dcs[k];
              ddt[(r0 + k) * d.H + h] = ddtx[k] + suffix * a;
              dApart += double(suffix) * dth[k * d.H];
            }
            for (int64_t r = 0; r < l; ++r)
#pragma omp simd reduction(+ : dDpart)
              for (int64_t p = 0; p < d.P; ++p)
                dDpart += double(dY[r * d.I + p]) * X[r * d.Cc + p];
            partial[(c * d.H + h) * 2] += float(dApart);
            partial[(c * d.H + h) * 2 + 1] += float(dDpart);
          }
          gemm(false, false, l, d.N, l, 1.0f, sc.gsum, l, B, d.Cc, 1.0f, dC,
               d.Cc);
          gemm(true, false, l, d.N, l, 1.0f, sc.gsum, l, C, d.Cc, 1.0f, dB,
               d.Cc);
        }
      }
  }

  for (int64_t h = 0; h < d.H; ++h) {
    double a = 0, dd = 0;
    for (int64_t c = 0; c < d.chunks; ++c) {
      a += partial[(c * d.H + h) * 2];
      dd += partial[(c * d.H + h) * 2 + 1];
    }
    // dA/dA_log = A.
    gALog[h] += float(a) * decayRate(aLog, h);
    gD[h] += float(dd);
  }
}

} // namespace hypipe::rt::cpu
