//===- Attention.cu - causal grouped-query attention on the GPU -----------===//
//
// linear_qkv with Megatron's per-group interleaving ([q heads | k | v] per
// query group), optional RoPE, then a tiled online-softmax kernel: one
// thread per query row, key/value tiles staged in shared memory, running
// max and sum per row, so no [seq, seq] matrix ever exists. Forward keeps
// the log-sum-exp of every (row, head); backward recomputes the
// probabilities from it (dK/dV per key row, dQ per query row). One causal
// block per sequence: packed samples never see one another.
//
// A bf16 call takes cuDNN's fused attention instead where it is built and
// found (FusedAttention.h; HYPIPE_FUSED_ATTN=0 keeps these kernels): the
// qkv rows are split into bf16 Q, K, V, and the gradients joined back.
//
//===----------------------------------------------------------------------===//

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/cuda/Primitives.cuh"

#ifdef HYPIPE_HAVE_FUSED_ATTENTION
#include "runtime/kernels/cuda/FusedAttention.h"
#include "runtime/kernels/cuda/QkvColumns.h"
#include <cuda_bf16.h>
#endif

#include <cfloat>
#include <optional>
#include <string>

namespace hypipe::rt::cuda {
namespace {

constexpr int kRows = 64; // query (or key) rows per block, one per thread
constexpr int kTile = 32; // rows staged per shared-memory tile

/// Where head h's q, and its group's k and v, start in a qkv row.
struct Heads {
  int heads, groups, D, Wd, Cw;
  __device__ int qOffset(int h) const {
    int qpg = heads / groups, g = h / qpg;
    return (g * (qpg + 2) + h % qpg) * D;
  }
  __device__ int kOffset(int g) const {
    return (g * (heads / groups + 2) + heads / groups) * D;
  }
};

__global__ void ropeKernel(int64_t T, Seqs seqs, int groups, int qpg, int D,
                           int Wd, double base, float sign, float *qkv) {
  const int half = D / 2;
  int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t perRow = int64_t(groups) * (qpg + 1) * half;
  if (idx >= T * perRow)
    return;
  const int row = int(idx / perRow);
  int rest = int(idx % perRow);
  const int i = rest % half, head = rest / half; // head over groups*(qpg+1)
  const int g = head / (qpg + 1), j = head % (qpg + 1);
  const int pos = row - seqs.firstRow(row);
  double invFreq = pow(base, -2.0 * double(i) / double(D));
  double ang = double(pos) * invFreq;
  float c = float(cos(ang)), sn = sign * float(sin(ang));
  float *v = qkv + int64_t(row) * Wd + (g * (qpg + 2) + j) * D;
  float a = v[i], b = v[i + half];
  v[i] = a * c - b * sn;
  v[i + half] = b * c + a * sn;
}

/// Stages keys and values [k0, k0 + kTile) of group g of one sequence in
/// shared memory (rows past its end repeat row 0 and are never read), with
/// the barriers around it.
template <int D>
__device__ void loadKeyTile(const float *qkv, const Heads &hd, int g, int row0,
                            int len, int k0, float (*Ks)[D], float (*Vs)[D]) {
  __syncthreads();
  for (int e = threadIdx.x; e < kTile * D; e += blockDim.x) {
    int r = e / D, d = e % D, key = k0 + r;
    const float *kr =
        qkv + int64_t(row0 + (key < len ? key : 0)) * hd.Wd + hd.kOffset(g);
    Ks[r][d] = kr[d];
    Vs[r][d] = kr[D + d];
  }
  __syncthreads();
}

/// A query block of the forward and query-gradient kernels: the sequence
/// (blockIdx.z), the head (blockIdx.y) and its K/V group, and the thread's
/// query row qi (kRows a block, one a thread).
struct QueryBlock {
  int seq, h, g, len, row0, qi;
  bool active; ///< qi is a row of the sequence (the others only load tiles)
  /// No row of the block is in the sequence.
  __device__ bool empty() const { return int(blockIdx.x) * kRows >= len; }
};

__device__ inline QueryBlock queryBlock(const Seqs &seqs, const Heads &hd) {
  QueryBlock b;
  b.seq = blockIdx.z;
  b.h = blockIdx.y;
  b.g = b.h / (hd.heads / hd.groups);
  b.len = seqs.length(b.seq);
  b.row0 = seqs.start(b.seq);
  b.qi = blockIdx.x * kRows + threadIdx.x;
  b.active = b.qi < b.len;
  return b;
}

/// visit(r) for every key r, in order, of each K/V tile (Ks, Vs) that the
/// thread's query row sees (causal: keys up to its own row); the whole block
/// loads every tile up to its last row's.
template <int D, typename Visit>
__device__ __forceinline__ void
forEachVisibleKey(const QueryBlock &b, const float *qkv, const Heads &hd,
                  float (*Ks)[D], float (*Vs)[D], Visit visit) {
  const int lastKey = min(b.len, (int(blockIdx.x) + 1) * kRows);
  for (int k0 = 0; k0 < lastKey; k0 += kTile) {
    loadKeyTile<D>(qkv, hd, b.g, b.row0, b.len, k0, Ks, Vs);
    if (!b.active)
      continue;
    const int end = min(kTile, b.qi - k0 + 1);
    for (int r = 0; r < end; ++r)
      visit(r);
  }
}

template <int D>
__global__ void forwardKernel(Seqs seqs, Heads hd, float scale,
                              const float *qkv, float *ctx, float *lse) {
  __shared__ float Ks[kTile][D], Vs[kTile][D];
  const QueryBlock b = queryBlock(seqs, hd);
  if (b.empty())
    return;
  const int h = b.h;
  float q[D], acc[D];
  const float *qr =
      qkv + int64_t(b.row0 + (b.active ? b.qi : 0)) * hd.Wd + hd.qOffset(h);
#pragma unroll
  for (int d = 0; d < D; ++d) {
    q[d] = qr[d] * scale;
    acc[d] = 0;
  }
  float m = -FLT_MAX, l = 0;
  forEachVisibleKey<D>(b, qkv, hd, Ks, Vs, [&](int r) {
    float s = 0;
#pragma unroll
    for (int d = 0; d < D; ++d)
      s += q[d] * Ks[r][d];
    if (s > m) {
      float c = expf(m - s);
      l *= c;
#pragma unroll
      for (int d = 0; d < D; ++d)
        acc[d] *= c;
      m = s;
    }
    float p = expf(s - m);
    l += p;
#pragma unroll
    for (int d = 0; d < D; ++d)
      acc[d] += p * Vs[r][d];
  });
  if (!b.active)
    return;
  const int64_t row = b.row0 + b.qi;
  float inv = 1.0f / l;
  float *out = ctx + row * hd.Cw + int64_t(h) * D;
#pragma unroll
  for (int d = 0; d < D; ++d)
    out[d] = acc[d] * inv;
  lse[row * hd.heads + h] = m + logf(l);
}

/// delta[row, h] = <dctx, ctx> of the row's head h.
__global__ void deltaKernel(int64_t T, int heads, int D, const float *dctx,
                            const float *ctx, float *delta) {
  int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= T * heads)
    return;
  const float *a = dctx + idx * D, *b = ctx + idx * D; // [T, heads*D]
  float s = 0;
  for (int d = 0; d < D; ++d)
    s += a[d] * b[d];
  delta[idx] = s;
}

/// dK, dV of one key row per thread, summed over the group's query heads.
template <int D>
__global__ void keyGradKernel(Seqs seqs, Heads hd, float scale,
                              const float *qkv, const float *dctx,
                              const float *lse, const float *delta,
                              float *dqkv) {
  __shared__ float Qs[kTile][D], Os[kTile][D], L[kTile], Dl[kTile];
  const int seq = blockIdx.z, g = blockIdx.y;
  const int len = seqs.length(seq), row0 = seqs.start(seq);
  const int kj = blockIdx.x * kRows + threadIdx.x;
  if (int(blockIdx.x) * kRows >= len)
    return;
  const bool active = kj < len;
  const int qpg = hd.heads / hd.groups;
  float k[D], v[D], dk[D], dv[D];
  const float *kr =
      qkv + int64_t(row0 + (active ? kj : 0)) * hd.Wd + hd.kOffset(g);
#pragma unroll
  for (int d = 0; d < D; ++d) {
    k[d] = kr[d];
    v[d] = kr[D + d];
    dk[d] = dv[d] = 0;
  }
  for (int hh = 0; hh < qpg; ++hh) {
    const int h = g * qpg + hh;
    for (int q0 = int(blockIdx.x) * kRows; q0 < len; q0 += kTile) {
      __syncthreads();
      for (int e = threadIdx.x; e < kTile * D; e += blockDim.x) {
        int r = e / D, d = e % D, qrow = q0 + r;
        int64_t row = row0 + (qrow < len ? qrow : 0);
        Qs[r][d] = qkv[row * hd.Wd + hd.qOffset(h) + d];
        Os[r][d] = dctx[row * hd.Cw + int64_t(h) * D + d];
      }
      for (int r = threadIdx.x; r < kTile; r += blockDim.x) {
        int64_t row = row0 + (q0 + r < len ? q0 + r : 0);
        L[r] = lse[row * hd.heads + h];
        Dl[r] = delta[row * hd.heads + h];
      }
      __syncthreads();
      if (!active)
        continue;
      for (int r = max(0, kj - q0); r < kTile && q0 + r < len; ++r) {
        float s = 0, dp = 0;
#pragma unroll
        for (int d = 0; d < D; ++d) {
          s += Qs[r][d] * k[d];
          dp += Os[r][d] * v[d];
        }
        float p = expf(s * scale - L[r]);
        float ds = p * (dp - Dl[r]) * scale;
#pragma unroll
        for (int d = 0; d < D; ++d) {
          dv[d] += p * Os[r][d];
          dk[d] += ds * Qs[r][d];
        }
      }
    }
  }
  if (!active)
    return;
  float *out = dqkv + int64_t(row0 + kj) * hd.Wd + hd.kOffset(g);
#pragma unroll
  for (int d = 0; d < D; ++d) {
    out[d] = dk[d];
    out[D + d] = dv[d];
  }
}

/// dQ of one query row per thread.
template <int D>
__global__ void queryGradKernel(Seqs seqs, Heads hd, float scale,
                                const float *qkv, const float *dctx,
                                const float *lse, const float *delta,
                                float *dqkv) {
  __shared__ float Ks[kTile][D], Vs[kTile][D];
  const QueryBlock b = queryBlock(seqs, hd);
  if (b.empty())
    return;
  const int h = b.h;
  const int64_t row = b.row0 + (b.active ? b.qi : 0);
  float q[D], o[D], dq[D];
#pragma unroll
  for (int d = 0; d < D; ++d) {
    q[d] = qkv[row * hd.Wd + hd.qOffset(h) + d];
    o[d] = dctx[row * hd.Cw + int64_t(h) * D + d];
    dq[d] = 0;
  }
  const float L = lse[row * hd.heads + h], Dl = delta[row * hd.heads + h];
  forEachVisibleKey<D>(b, qkv, hd, Ks, Vs, [&](int r) {
    float s = 0, dp = 0;
#pragma unroll
    for (int d = 0; d < D; ++d) {
      s += q[d] * Ks[r][d];
      dp += o[d] * Vs[r][d];
    }
    float p = expf(s * scale - L);
    float ds = p * (dp - Dl) * scale;
#pragma unroll
    for (int d = 0; d < D; ++d)
      dq[d] += ds * Ks[r][d];
  });
  if (!b.active)
    return;
  float *out = dqkv + row * hd.Wd + hd.qOffset(h);
#pragma unroll
  for (int d = 0; d < D; ++d)
    out[d] = dq[d];
}

template <template <int> class Launch, typename... Args>
void byHeadDim(int64_t D, Args... args) {
  switch (D) {
  case 8:
    return Launch<8>::run(args...);
  case 16:
    return Launch<16>::run(args...);
  case 32:
    return Launch<32>::run(args...);
  case 64:
    return Launch<64>::run(args...);
  case 128:
    return Launch<128>::run(args...);
  }
  throw CudaError("error: the CUDA attention kernel takes head dimensions "
                  "8, 16, 32, 64 and 128, not " +
                  std::to_string(D) +
                  "\nhelp: choose hidden_size / num_attention_heads (or "
                  "kv_channels) among them");
}

struct Geometry {
  dim3 grid;
  Seqs seqs;
  Heads hd;
  float scale;
};

Geometry geometry(const AttentionShape &s, const Tokens &t, int64_t perSeq) {
  Geometry g;
  g.grid = dim3(unsigned((t.maxLength() + kRows - 1) / kRows), unsigned(perSeq),
                unsigned(t.shape.sequences()));
  g.seqs = seqsOf(t);
  g.hd = {int(s.heads), int(s.groups), int(s.headDim), int(s.qkvWidth()),
          int(s.contextWidth())};
  g.scale = s.scoreScale();
  return g;
}

template <int D> struct Forward {
  static void run(const Geometry &g, const float *qkv, float *ctx, float *lse) {
    forwardKernel<D>
        <<<g.grid, kRows, 0, stream()>>>(g.seqs, g.hd, g.scale, qkv, ctx, lse);
    launched("attention forward");
  }
};

template <int D> struct Backward {
  static void run(const Geometry &keys, const Geometry &queries,
                  const float *qkv, const float *dctx, const float *lse,
                  const float *delta, float *dqkv) {
    keyGradKernel<D><<<keys.grid, kRows, 0, stream()>>>(
        keys.seqs, keys.hd, keys.scale, qkv, dctx, lse, delta, dqkv);
    launched("attention backward (keys)");
    queryGradKernel<D><<<queries.grid, kRows, 0, stream()>>>(
        queries.seqs, queries.hd, queries.scale, qkv, dctx, lse, delta, dqkv);
    launched("attention backward (queries)");
  }
};

#ifdef HYPIPE_HAVE_FUSED_ATTENTION
using bf16 = __nv_bfloat16;

/// Q [T, heads, D], K and V [T, groups, D] in bf16 from the interleaved
/// fp32 qkv rows (split), or the fp32 rows from the bf16 gradients (join).
template <bool Split>
__global__ void qkvKernel(int64_t T, Heads hd, float *qkv, bf16 *q, bf16 *k,
                          bf16 *v) {
  int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= T * hd.Wd)
    return;
  const int64_t row = idx / hd.Wd;
  const QkvColumn c = qkvColumn(hd.heads, hd.groups, hd.D, int(idx % hd.Wd));
  bf16 *part = c.which == 0 ? q : c.which == 1 ? k : v;
  const int64_t heads = c.which == 0 ? hd.heads : hd.groups;
  bf16 &e = part[(row * heads + c.head) * hd.D + c.d];
  if (Split)
    e = __float2bfloat16_rn(qkv[idx]);
  else
    qkv[idx] = __bfloat162float(e);
}

__global__ void toBf16Kernel(int64_t n, const float *x, bf16 *y) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = __float2bfloat16_rn(x[i]);
}

__global__ void toFloatKernel(int64_t n, const bf16 *x, float *y) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = __bfloat162float(x[i]);
}

/// Each sequence's length and, for sequences 0..graphB, its first row times
/// each tensor's elements per token (cuDNN's ragged offsets, int32: the
/// graph refuses a call whose offsets would not fit). The graph's sequences
/// past the call's B are empty, starting where the last one ends.
__global__ void raggedKernel(Seqs seqs, int B, int graphB, int64_t perQ,
                             int64_t perKV, int64_t perStats, int32_t *lengths,
                             int32_t *qOff, int32_t *kvOff, int32_t *statsOff) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i > graphB)
    return;
  // cu[B] (or B * seq) is where the last sequence ends.
  const int64_t first = seqs.start(i < B ? i : B);
  if (i < graphB)
    lengths[i] = i < B ? seqs.length(i) : 0;
  qOff[i] = int32_t(first * perQ);
  kvOff[i] = int32_t(first * perKV);
  statsOff[i] = int32_t(first * perStats);
}

/// The device's compute capability as cuDNN numbers it (90: Hopper).
int smVersion() {
  static const int sm = [] {
    int device = 0, major = 0, minor = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
                                 device),
          "cudaDeviceGetAttribute");
    check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor,
                                 device),
          "cudaDeviceGetAttribute");
    return major * 10 + minor;
  }();
  return sm;
}

/// Device memory of the fused calls (a GrowingBuffer), carved in 256-byte
/// aligned pieces.
class FusedScratch {
public:
  /// Starts a carving of at least `bytes` (the sum of what will be taken).
  void reserve(int64_t bytes) {
    base_ = static_cast<char *>(
        buffer_.bytes(bytes, "cudaMallocAsync (fused attention scratch)"));
    used_ = 0;
  }
  template <typename T> T *take(int64_t n) {
    auto *p = reinterpret_cast<T *>(base_ + used_);
    used_ += aligned(n * int64_t(sizeof(T)));
    return p;
  }
  static int64_t aligned(int64_t bytes) { return (bytes + 255) / 256 * 256; }

private:
  GrowingBuffer buffer_;
  char *base_ = nullptr;
  int64_t used_ = 0;
};

FusedScratch &fusedScratch() {
  static FusedScratch *scratch = new FusedScratch; // as long as the process
  return *scratch;
}

fused::Problem problemOf(const AttentionShape &s, const Tokens &t) {
  fused::Problem p;
  p.sequences = t.shape.sequences();
  p.tokens = t.tokens();
  p.maxLength = t.maxLength();
  p.heads = s.heads;
  p.groups = s.groups;
  p.headDim = s.headDim;
  p.scale = s.scoreScale();
  return p;
}

/// One fused call's bf16 tensors and index arrays, carved from the scratch.
struct FusedCall {
  fused::Problem p;
  fused::Buffers b;
  bf16 *q, *k, *v, *o;
  void *workspace;
  int64_t qn, kvn; ///< elements of Q (O, dQ, dO) and of K (V, dK, dV)

  FusedCall(const fused::Problem &problem, const Seqs &seqs,
            int64_t workspaceBytes, bool backward)
      : p(problem), qn(p.tokens * p.heads * p.headDim),
        kvn(p.tokens * p.groups * p.headDim) {
    const int64_t idx = fused::graphSequences(p.sequences) + 1,
                  parts = backward ? 4 : 2;
    FusedScratch &s = fusedScratch();
    s.reserve(parts * FusedScratch::aligned(2 * qn) +
              parts * FusedScratch::aligned(2 * kvn) +
              4 * FusedScratch::aligned(4 * idx) +
              FusedScratch::aligned(workspaceBytes));
    q = s.take<bf16>(qn);
    k = s.take<bf16>(kvn);
    v = s.take<bf16>(kvn);
    o = s.take<bf16>(qn);
    b.q = q;
    b.k = k;
    b.v = v;
    b.o = o;
    if (backward) {
      b.dO = s.take<bf16>(qn);
      b.dq = s.take<bf16>(qn);
      b.dk = s.take<bf16>(kvn);
      b.dv = s.take<bf16>(kvn);
    }
    auto *lengths = s.take<int32_t>(idx), *qOff = s.take<int32_t>(idx),
         *kvOff = s.take<int32_t>(idx), *statsOff = s.take<int32_t>(idx);
    b.seqLens = lengths;
    b.qOffsets = qOff;
    b.kvOffsets = kvOff;
    b.statsOffsets = statsOff;
    workspace = s.take<char>(workspaceBytes);
    raggedKernel<<<blocksFor(idx), 256, 0, stream()>>>(
        seqs, int(p.sequences), int(idx - 1), p.heads * p.headDim,
        p.groups * p.headDim, p.heads, lengths, qOff, kvOff, statsOff);
    launched("fused attention offsets");
  }

  void split(const Heads &hd, const float *qkv) {
    qkvKernel<true><<<blocksFor(p.tokens * hd.Wd), 256, 0, stream()>>>(
        p.tokens, hd, const_cast<float *>(qkv), q, k, v);
    launched("fused attention split qkv");
  }
};

void toBf16(const float *x, void *y, int64_t n) {
  toBf16Kernel<<<blocksFor(n), 256, 0, stream()>>>(n, x,
                                                   static_cast<bf16 *>(y));
  launched("fused attention to bf16");
}

/// A fused call of `pass` with q, k and v split out of `qkv`, or nothing
/// when cuDNN has no plan for it (the caller runs the hand-written kernels).
std::optional<FusedCall> fusedCall(const Geometry &g, const AttentionShape &s,
                                   const Tokens &t, const float *qkv,
                                   fused::Pass pass) {
  const fused::Problem p = problemOf(s, t);
  const int64_t workspace = fused::prepare(p, pass, smVersion(), stream());
  if (workspace < 0)
    return std::nullopt;
  std::optional<FusedCall> call;
  call.emplace(p, g.seqs, workspace, pass == fused::Pass::Backward);
  call->split(g.hd, qkv);
  return call;
}

bool fusedForward(const Geometry &g, const AttentionShape &s, const Tokens &t,
                  AttnSaved &a) {
  std::optional<FusedCall> call =
      fusedCall(g, s, t, a.qkv, fused::Pass::Forward);
  if (!call)
    return false;
  check(cudaMemsetAsync(call->o, 0, size_t(2 * call->qn), stream()),
        "cudaMemsetAsync");
  call->b.stats = a.softmax;
  fused::run(call->p, fused::Pass::Forward, call->b, call->workspace, stream());
  toFloatKernel<<<blocksFor(call->qn), 256, 0, stream()>>>(call->qn, call->o,
                                                           a.ctx);
  launched("fused attention from bf16");
  return true;
}

bool fusedBackward(const Geometry &g, const AttentionShape &s, const Tokens &t,
                   AttnSaved &a, const float *dctx) {
  std::optional<FusedCall> call =
      fusedCall(g, s, t, a.qkv, fused::Pass::Backward);
  if (!call)
    return false;
  fused::Buffers &b = call->b;
  toBf16(a.ctx, b.o, call->qn);
  toBf16(dctx, const_cast<void *>(b.dO), call->qn);
  // Rows outside every sequence (a padded tail) get zero gradients.
  for (auto [ptr, n] : {std::pair<void *, int64_t>{b.dq, call->qn},
                        {b.dk, call->kvn},
                        {b.dv, call->kvn}})
    check(cudaMemsetAsync(ptr, 0, size_t(2 * n), stream()), "cudaMemsetAsync");
  b.stats = a.softmax;
  fused::run(call->p, fused::Pass::Backward, b, call->workspace, stream());
  qkvKernel<false><<<blocksFor(call->p.tokens * g.hd.Wd), 256, 0, stream()>>>(
      call->p.tokens, g.hd, a.dqkv, static_cast<bf16 *>(b.dq),
      static_cast<bf16 *>(b.dk), static_cast<bf16 *>(b.dv));
  launched("fused attention join dqkv");
  return true;
}
#endif // HYPIPE_HAVE_FUSED_ATTENTION

} // namespace

void Kernels::rope(const AttentionShape &s, const Tokens &t, float *qkv,
                   float sign) {
  const int64_t qpg = s.heads / s.groups,
                n = t.tokens() * s.groups * (qpg + 1) * (s.headDim / 2);
  if (n == 0)
    return;
  ropeKernel<<<blocksFor(n), 256, 0, stream()>>>(
      t.tokens(), seqsOf(t), int(s.groups), int(qpg), int(s.headDim),
      int(s.qkvWidth()), s.ropeBase, sign, qkv);
  launched("rope");
}

/// The core forward: a.qkv to a.ctx and each row's log-sum-exp in
/// a.softmax (recipes/Attention.h).
void Kernels::coreForward(const AttentionShape &s, const Tokens &t,
                          AttnSaved &a) const {
  if (t.tokens() == 0)
    return;
  const Geometry g = geometry(s, t, s.heads);
#ifdef HYPIPE_HAVE_FUSED_ATTENTION
  if (activations == DType::BF16 && fused::enabled() &&
      fusedForward(g, s, t, a))
    return;
#endif
  byHeadDim<Forward>(s.headDim, g, a.qkv, a.ctx, a.softmax);
}

/// The core backward: a.dqkv whole from the context's gradient `dctx`;
/// `rows` is [T, heads] of scratch for each row's dO . O.
void Kernels::coreBackward(const AttentionShape &s, const Tokens &t,
                           AttnSaved &a, const float *dctx, float *rows) const {
  const int64_t T = t.tokens();
  if (T == 0)
    return;
#ifdef HYPIPE_HAVE_FUSED_ATTENTION
  if (activations == DType::BF16 && fused::enabled() &&
      fusedBackward(geometry(s, t, s.heads), s, t, a, dctx))
    return;
#endif
  deltaKernel<<<blocksFor(T * s.heads), 256, 0, stream()>>>(
      T, int(s.heads), int(s.headDim), dctx, a.ctx, rows);
  launched("attention delta");
  byHeadDim<Backward>(s.headDim, geometry(s, t, s.groups),
                      geometry(s, t, s.heads), a.qkv, dctx, a.softmax, rows,
                      a.dqkv);
}

} // namespace hypipe::rt::cuda
