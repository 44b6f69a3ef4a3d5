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
//      M X, and the states the chunk's last segment leaves from its own
//      rows for all the group's heads in one product,
//   2. per head: the entering states, serial over chunks (P x N per chunk),
//   3. per (chunk, group): the entering states read out by C, one product.
// A group's heads share B and C and their states lie one after another
// ([heads x P][N]), so every product with a state is one GEMM per group
// (L x heads*P x N) rather than one per head: 6-10% less scan time here at
// 1 and 2 threads. (Such a product passes OpenBLAS's own threading
// threshold; inside these OpenMP loops it is one single-threaded call
// because gemm() keeps OpenBLAS on one thread.)
// Backward mirrors it: (1) each chunk's own contribution to the gradient of
// its entering state, (diag(exp cs) dY)^T C; (2) those passed back over the
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
  float *cb, *m, *g, *cs, *dcs, *ddt;
  float *dtRows; ///< a head's dt over a segment's rows, contiguous
  float *gsum;   ///< the CB gradient summed over a group's heads
  /// [L][heads of a group x P] blocks: a group's heads side by side, so a
  /// product with the group's B or C, or with its heads' states (which lie
  /// one after another: [heads x P][N]), is one GEMM for all of them.
  float *wa, *wb, *wc, *wd;
};

Scratch &scratch(const MambaShape &s) {
  thread_local Scratch sc;
  const int64_t wide = s.heads / s.groups * s.headDim;
  const size_t need = size_t(4 * L * L + 4 * L * wide + 4 * L);
  if (sc.buf.size() < need)
    sc.buf.resize(need);
  float *p = sc.buf.data();
  sc.cb = p, p += L * L;
  sc.m = p, p += L * L;
  sc.g = p, p += L * L;
  sc.gsum = p, p += L * L;
  sc.wa = p, p += L * wide;
  sc.wb = p, p += L * wide;
  sc.wc = p, p += L * wide;
  sc.wd = p, p += L * wide;
  sc.cs = p, p += L;
  sc.dcs = p, p += L;
  sc.dtRows = p, p += L;
  sc.ddt = p;
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
  /// Columns of a group's heads side by side (hpg x P).
  int64_t GW;
  explicit Dims(const MambaShape &s, const TokenShape &t)
      : H(s.heads), P(s.headDim), N(s.state), G(s.groups), I(s.inner()),
        Cc(s.convChannels()), hpg(s.heads / s.groups), PN(P * N),
        chunks(s.scanChunks(t)), GW(hpg * P) {}
};

/// body(scratch, d, c, g) for every (chunk c, group g), the items shared out
/// over the threads as they free up. Every thread sizes its scratch
/// whichever items it gets, so a later step allocates nothing however the
/// items fall. The body reads the dims through `d`, this function's copy,
/// which the parallel region shares as the loops' own variables.
template <typename Body>
void forEachChunkAndGroup(const MambaShape &s, const Dims d, Body &&body) {
#pragma omp parallel
  {
    Scratch &sc = scratch(s);
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t c = 0; c < d.chunks; ++c)
      for (int64_t g = 0; g < d.G; ++g)
        body(sc, d, c, g);
  }
}

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
  forEachChunkAndGroup(
      s, d, [&](Scratch &sc, const Dims &d, int64_t c, int64_t g) {
        const int64_t h0 = g * d.hpg;
        for (int64_t i = sg.begin[c]; i < sg.begin[c + 1]; ++i) {
          const Segment &seg = sg.segs[size_t(i)];
          const int64_t l = seg.len, r0 = seg.row0;
          const bool last = i + 1 == sg.begin[c + 1];
          const float *B = xbc + r0 * d.Cc + d.I + g * d.N, *C = B + d.G * d.N;
          gemm(false, true, l, l, d.N, 1.0f, C, d.Cc, B, d.Cc, 0.0f, sc.cb, l);
          for (int64_t h = h0; h < h0 + d.hpg; ++h) {
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
            // The chunk leaves with sum_j w_j x_j B_j^T: this head's columns
            // of the weighted X (w_j = e^{cs_last-cs_j} dt_j).
            if (last)
              for (int64_t j = 0; j < l; ++j) {
                const float w = fastExp(sc.cs[l - 1] - sc.cs[j]) * dth[j * d.H];
                float *xw = sc.wa + j * d.GW + (h - h0) * d.P;
                for (int64_t p = 0; p < d.P; ++p)
                  xw[p] = w * X[j * d.Cc + p];
              }
          }
          if (last) // the group's heads' own states, [heads x P][N], at once
            gemm(true, false, d.GW, d.N, l, 1.0f, sc.wa, d.GW, B, d.Cc, 0.0f,
                 own + (c * d.H + h0) * d.PN, d.N);
        }
      });

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

  // 3. The entering state read out by C in each chunk's first segment:
  // C S^T for a group's heads in one product.
  forEachChunkAndGroup(
      s, d, [&](Scratch &sc, const Dims &d, int64_t c, int64_t g) {
        if (!sg.entersWithState(c))
          return;
        const Segment &seg = sg.first(c);
        const int64_t l = seg.len, r0 = seg.row0, h0 = g * d.hpg;
        const float *C = xbc + r0 * d.Cc + d.I + d.G * d.N + g * d.N;
        gemm(false, true, l, d.GW, d.N, 1.0f, C, d.Cc,
             states + (c * d.H + h0) * d.PN, d.N, 0.0f, sc.wa, d.GW);
        for (int64_t h = h0; h < h0 + d.hpg; ++h) {
          float *Y = y + r0 * d.I + h * d.P;
          cumulativeDecay(dt + r0 * d.H + h, d.H, decayRate(aLog, h), l, sc.cs);
          for (int64_t r = 0; r < l; ++r) {
            const float e = fastExp(sc.cs[r]);
            const float *readOut = sc.wa + r * d.GW + (h - h0) * d.P;
            for (int64_t p = 0; p < d.P; ++p)
              Y[r * d.I + p] += e * readOut[p];
          }
        }
      });
}

namespace {

/// The scan backward's operands and the workspace its phases share.
struct Backward {
  Dims d;
  const Segments &sg;
  const float *xbc, *dt, *aLog, *D, *states, *dy;
  float *dxbc, *ddt;
  float *dS;      ///< [chunk][head][P x N]: gradient of the entering state
  float *partial; ///< [chunk][head][dA, dD]
};

/// 1. Each chunk's own outputs' share of its entering state's gradient,
/// (e^{cs} dY)^T C, for a group's heads in one product.
void enteringStateGradients(const MambaShape &s, const Backward &b) {
  const Segments &sg = b.sg;
  forEachChunkAndGroup(
      s, b.d, [&](Scratch &sc, const Dims &d, int64_t c, int64_t g) {
        const int64_t h0 = g * d.hpg;
        float *out = b.dS + (c * d.H + h0) * d.PN;
        if (!sg.entersWithState(c)) {
          std::memset(out, 0, sizeof(float) * d.hpg * d.PN);
          return;
        }
        const Segment &seg = sg.first(c);
        const int64_t l = seg.len, r0 = seg.row0;
        const float *C = b.xbc + r0 * d.Cc + d.I + d.G * d.N + g * d.N;
        for (int64_t h = h0; h < h0 + d.hpg; ++h) {
          cumulativeDecay(b.dt + r0 * d.H + h, d.H, decayRate(b.aLog, h), l,
                          sc.cs);
          for (int64_t r = 0; r < l; ++r) {
            const float e = fastExp(sc.cs[r]);
            const float *dY = b.dy + (r0 + r) * d.I + h * d.P;
            float *scaled = sc.wa + r * d.GW + (h - h0) * d.P;
            for (int64_t p = 0; p < d.P; ++p)
              scaled[p] = e * dY[p];
          }
        }
        gemm(true, false, d.GW, d.N, l, 1.0f, sc.wa, d.GW, C, d.Cc, 0.0f, out,
             d.N);
      });
}

/// 2. Passed back over the chunks: a chunk that is one continuing segment
/// hands the next chunk's entering-state gradient through its decay.
void passStateGradientsBack(const Backward &b) {
  const Dims &d = b.d;
  const Segments &sg = b.sg;
#pragma omp parallel for schedule(static)
  for (int64_t h = 0; h < d.H; ++h)
    for (int64_t c = d.chunks - 2; c >= 0; --c) {
      if (!sg.entersWithState(c) || !sg.entersWithState(c + 1) ||
          sg.begin[c + 1] - sg.begin[c] != 1)
        continue;
      const Segment &seg = sg.first(c);
      const float decay = segmentDecay(b.dt + seg.row0 * d.H + h, d.H,
                                       decayRate(b.aLog, h), seg.len);
      float *here = b.dS + (c * d.H + h) * d.PN;
      const float *next = b.dS + ((c + 1) * d.H + h) * d.PN;
      for (int64_t k = 0; k < d.PN; ++k)
        here[k] += decay * next[k];
    }
}

/// One head's rows of one segment in phase 3, and the state the segment
/// enters with (S0) and the gradient of the one it leaves (dSout), where
/// they exist.
struct HeadRows {
  int64_t l, hp; ///< rows; the head's columns in the scratch's wa..wd
  const float *X, *dth, *dY;
  float *dX;
  float a;
  const float *S0, *dSout;
};

/// Intra-chunk pairs: G = dY X^T; M, and dCB = G e^{..} dt. dX gets M^T dY
/// and D dY; the group's CB gradient gets G.
[[gnu::always_inline]] inline void
intraChunkGradients(const Dims &d, Scratch &sc, const HeadRows &r, float Dh) {
  const int64_t l = r.l;
  const float *cs = sc.cs;
  const float *dtRows = sc.dtRows;
  float *dcs = sc.dcs, *ddtx = sc.ddt;
  gemm(false, true, l, l, d.P, 1.0f, r.dY, d.I, r.X, d.Cc, 0.0f, sc.g, l);
  for (int64_t i = 0; i < l; ++i) {
    float *mr = sc.m + i * l, *gr = sc.g + i * l;
    const float *cbr = sc.cb + i * l;
    float rowTerm = 0;
#pragma omp simd reduction(+ : rowTerm)
    for (int64_t j = 0; j <= i; ++j) {
      const float decay = fastExp(cs[i] - cs[j]), dtj = dtRows[j];
      const float q = gr[j] * cbr[j] * decay;
      ddtx[j] += q;
      rowTerm += q * dtj;
      dcs[j] -= q * dtj;
      mr[j] = cbr[j] * decay * dtj;
      gr[j] = gr[j] * decay * dtj;
    }
    dcs[i] += rowTerm;
    std::fill(mr + i + 1, mr + l, 0.0f);
    std::fill(gr + i + 1, gr + l, 0.0f);
  }
  gemm(true, false, l, d.P, l, 1.0f, sc.m, l, r.dY, d.I, 1.0f, r.dX, d.Cc);
  for (int64_t i = 0; i < l; ++i)
    for (int64_t p = 0; p < d.P; ++p)
      r.dX[i * d.Cc + p] += Dh * r.dY[i * d.I + p];
  for (int64_t k = 0; k < l * l; ++k)
    sc.gsum[k] += sc.g[k];
}

/// The entering state read out: y_r += e^{cs_r} S0 C_r. dC gets
/// (e^{cs} dY) S0, summed over the heads by one product after them.
[[gnu::always_inline]] inline void
enteringStateReadOutGradients(const Dims &d, Scratch &sc, const HeadRows &r) {
  for (int64_t i = 0; i < r.l; ++i) {
    const float e = fastExp(sc.cs[i]);
    const float *readOut = sc.wa + i * d.GW + r.hp;
    float *scaled = sc.wb + i * d.GW + r.hp;
    float dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t p = 0; p < d.P; ++p) {
      dot += r.dY[i * d.I + p] * readOut[p];
      scaled[p] = e * r.dY[i * d.I + p];
    }
    sc.dcs[i] += e * dot;
  }
}

/// The leaving state: S_out = e^{cs_last} S0 + sum_j w_j x_j B_j^T. dB gets
/// (w X) dSout, summed over the heads by one product after them;
/// u_j = x_j dSout B_j^T.
[[gnu::always_inline]] inline void
leavingStateGradients(const Dims &d, Scratch &sc, const HeadRows &r) {
  const int64_t l = r.l;
  const float *cs = sc.cs;
  float lastTerm = 0;
  for (int64_t j = 0; j < l; ++j) {
    const float decay = fastExp(cs[l - 1] - cs[j]), w = decay * sc.dtRows[j];
    const float *bs = sc.wc + j * d.GW + r.hp;
    float *xw = sc.wd + j * d.GW + r.hp;
    float u = 0;
#pragma omp simd reduction(+ : u)
    for (int64_t p = 0; p < d.P; ++p) {
      u += r.X[j * d.Cc + p] * bs[p];
      r.dX[j * d.Cc + p] += w * bs[p];
      xw[p] = w * r.X[j * d.Cc + p];
    }
    sc.ddt[j] += decay * u;
    lastTerm += w * u;
    sc.dcs[j] -= w * u;
  }
  if (r.S0) {
    double dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t k = 0; k < d.PN; ++k)
      dot += double(r.dSout[k]) * r.S0[k];
    lastTerm += fastExp(cs[l - 1]) * float(dot);
  }
  sc.dcs[l - 1] += lastTerm;
}

/// One head of one segment in phase 3: its x and dt gradients, its share of
/// the group's B and C gradients (in the scratch), and its A and D partials.
/// Out of line: a call per (segment, head) costs nothing beside its
/// products, and it is how the split was timed (no slower than before).
[[gnu::noinline]] void headGradients(const Backward &b, Scratch &sc,
                                     const Segment &seg, int64_t c, int64_t h,
                                     int64_t h0, bool leaves) {
  // A copy the compiler keeps in registers: through the reference, the
  // strided rows below turn into gathers and scatters.
  const Dims d = b.d;
  const int64_t l = seg.len, r0 = seg.row0;
  const HeadRows r{l,
                   (h - h0) * d.P,
                   b.xbc + r0 * d.Cc + h * d.P,
                   b.dt + r0 * d.H + h,
                   b.dy + r0 * d.I + h * d.P,
                   b.dxbc + r0 * d.Cc + h * d.P,
                   decayRate(b.aLog, h),
                   seg.continues ? b.states + (c * d.H + h) * d.PN : nullptr,
                   leaves ? b.dS + ((c + 1) * d.H + h) * d.PN : nullptr};
  cumulativeDecay(r.dth, d.H, r.a, l, sc.cs);
  for (int64_t k = 0; k < l; ++k)
    sc.dtRows[k] = r.dth[k * d.H];
  std::fill(sc.dcs, sc.dcs + l, 0.0f);
  std::fill(sc.ddt, sc.ddt + l, 0.0f);
  intraChunkGradients(d, sc, r, b.D[h]);
  if (r.S0)
    enteringStateReadOutGradients(d, sc, r);
  if (r.dSout)
    leavingStateGradients(d, sc, r);

  // cs_r = a * sum_{k<=r} dt_k: each dt_k gets a times the gradient of
  // every cs_r with r >= k; A gets sum_k dt_k times it.
  double dApart = 0, dDpart = 0;
  float suffix = 0;
  for (int64_t k = l - 1; k >= 0; --k) {
    suffix += sc.dcs[k];
    b.ddt[(r0 + k) * d.H + h] = sc.ddt[k] + suffix * r.a;
    dApart += double(suffix) * sc.dtRows[k];
  }
  for (int64_t i = 0; i < l; ++i)
#pragma omp simd reduction(+ : dDpart)
    for (int64_t p = 0; p < d.P; ++p)
      dDpart += double(r.dY[i * d.I + p]) * r.X[i * d.Cc + p];
  b.partial[(c * d.H + h) * 2] += float(dApart);
  b.partial[(c * d.H + h) * 2 + 1] += float(dDpart);
}

/// One segment of chunk c for group g in phase 3. The heads of a group share
/// B and C: their CB gradients add up first, and dB, dC take two products per
/// group, not per head; the products with the entering and leaving states
/// are one per group too (the heads' states lie one after another).
[[gnu::always_inline]] inline void segmentGradients(const Backward &b,
                                                    Scratch &sc, int64_t c,
                                                    int64_t g, int64_t i) {
  const Dims &d = b.d;
  const Segment &seg = b.sg.segs[size_t(i)];
  const int64_t l = seg.len, r0 = seg.row0, h0 = g * d.hpg;
  const float *B = b.xbc + r0 * d.Cc + d.I + g * d.N, *C = B + d.G * d.N;
  float *dB = b.dxbc + r0 * d.Cc + d.I + g * d.N, *dC = dB + d.G * d.N;
  const bool leaves = i + 1 == b.sg.begin[c + 1] && c + 1 < d.chunks &&
                      b.sg.entersWithState(c + 1);
  gemm(false, true, l, l, d.N, 1.0f, C, d.Cc, B, d.Cc, 0.0f, sc.cb, l);
  std::fill(sc.gsum, sc.gsum + l * l, 0.0f);
  const float *S0g = seg.continues ? b.states + (c * d.H + h0) * d.PN : nullptr;
  const float *dSg = leaves ? b.dS + ((c + 1) * d.H + h0) * d.PN : nullptr;
  if (S0g) // C S0^T, [l][heads x P]
    gemm(false, true, l, d.GW, d.N, 1.0f, C, d.Cc, S0g, d.N, 0.0f, sc.wa, d.GW);
  if (dSg) // B dSout^T, [l][heads x P]
    gemm(false, true, l, d.GW, d.N, 1.0f, B, d.Cc, dSg, d.N, 0.0f, sc.wc, d.GW);
  for (int64_t h = h0; h < h0 + d.hpg; ++h)
    headGradients(b, sc, seg, c, h, h0, leaves);
  if (S0g)
    gemm(false, false, l, d.N, d.GW, 1.0f, sc.wb, d.GW, S0g, d.N, 1.0f, dC,
         d.Cc);
  if (dSg)
    gemm(false, false, l, d.N, d.GW, 1.0f, sc.wd, d.GW, dSg, d.N, 1.0f, dB,
         d.Cc);
  gemm(false, false, l, d.N, l, 1.0f, sc.gsum, l, B, d.Cc, 1.0f, dC, d.Cc);
  gemm(true, false, l, d.N, l, 1.0f, sc.gsum, l, C, d.Cc, 1.0f, dB, d.Cc);
}

/// 3. x, B, C, dt gradients per (chunk, group); the heads of a group share
/// B and C, so they run in order inside one work item.
void chunkGradients(const MambaShape &s, const Backward &b) {
  forEachChunkAndGroup(
      s, b.d, [&](Scratch &sc, const Dims &d, int64_t c, int64_t g) {
        for (int64_t h = g * d.hpg; h < (g + 1) * d.hpg; ++h)
          b.partial[(c * d.H + h) * 2] = b.partial[(c * d.H + h) * 2 + 1] = 0;
        for (int64_t i = b.sg.begin[c]; i < b.sg.begin[c + 1]; ++i)
          segmentGradients(b, sc, c, g, i);
      });
}

} // namespace

void scanBackward(const MambaShape &s, const TokenShape &t, const float *xbc,
                  const float *dt, const float *aLog, const float *D,
                  const float *states, const float *dy, float *dxbc, float *ddt,
                  float *gALog, float *gD, float *ws) {
  ProfileScope scope(KernelClass::Scan);
  const Dims d(s, t);
  thread_local Segments segmentsOfThisThread;
  Segments &sg = segmentsOfThisThread; // shared with the loops' threads
  sg.build(t, d.chunks);
  float *dS = ws;
  const Backward b{d,      sg, xbc,  dt,  aLog, D,
                   states, dy, dxbc, ddt, dS,   dS + d.chunks * d.H * d.PN};
  enteringStateGradients(s, b);
  passStateGradientsBack(b);
  chunkGradients(s, b);

  // The A and D partials summed in chunk order.
  for (int64_t h = 0; h < d.H; ++h) {
    double a = 0, dd = 0;
    for (int64_t c = 0; c < d.chunks; ++c) {
      a += b.partial[(c * d.H + h) * 2];
      dd += b.partial[(c * d.H + h) * 2 + 1];
    }
    // dA/dA_log = A.
    gALog[h] += float(a) * decayRate(aLog, h);
    gD[h] += float(dd);
  }
}

} // namespace hypipe::rt::cpu
