//===- Dsa.cu - DeepSeek sparse attention's own kernels on the GPU --------===//
//
// cpu/Dsa.cpp's kernels on the stream, written for correctness first: one
// thread per row (or per row and head) walks its sample's keys, with no
// shared-memory tiling. The per-sample [len, len] blocks lie one after
// another as on the CPU (DsaShape::pairFloats). Compiled in every CUDA
// build; not yet run on a GPU (docs/cuda.md).
//
//===----------------------------------------------------------------------===//

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/LayerNormRows.h"
#include "runtime/kernels/cuda/Kernels.h"
#include "runtime/kernels/cuda/Primitives.cuh"

#include <cmath>

namespace hypipe::rt::cuda {
namespace {

/// The widest core head (KernelPlan refuses wider ones on CUDA).
constexpr int kMaxHeadDim = 128;
constexpr double kLogGuard = 1e-10;

/// Where a row's sample and its [len, len] block are.
struct Pair {
  int sample, start, length, i;
  int64_t block; ///< the sample's block
  __device__ Pair(const Seqs &s, int row) {
    sample = s.sequenceOf(row);
    start = s.start(sample);
    length = s.length(sample);
    i = row - start;
    block = 0;
    for (int b = 0; b < sample; ++b)
      block += int64_t(s.length(b)) * s.length(b);
  }
  __device__ int64_t at(int r, int c) const {
    return block + int64_t(r) * length + c;
  }
};

__device__ float dot(const float *a, const float *b, int n) {
  float s = 0.0f;
  for (int i = 0; i < n; ++i)
    s += a[i] * b[i];
  return s;
}

__global__ void keyNormKernel(int64_t T, int n, const float *x,
                              const float *weight, const float *bias, float *y,
                              float *mean, float *rstd) {
  const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r < T)
    layerNormRowForward(r, n, x, weight, bias, kNormEps, y, mean, rstd);
}

__global__ void keyNormInputGradKernel(int64_t T, int n, const float *x,
                                       const float *weight, const float *mean,
                                       const float *rstd, const float *dy,
                                       float *dx) {
  const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r < T)
    layerNormRowInputGrad(r, n, x, weight, mean, rstd, dy, dx);
}

__global__ void keyNormWeightGradKernel(int64_t T, int n, const float *x,
                                        const float *mean, const float *rstd,
                                        const float *dy, float *dWeight,
                                        float *dBias) {
  const int j = int(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j < n)
    layerNormColumnParamGrad(j, T, n, x, mean, rstd, dy, dWeight, dBias);
}

struct Indexer {
  int n, d;
  float c; ///< n^-1/2 d^-1/2
};

Indexer indexerOf(const DsaShape &s) {
  return {int(s.indexerHeads), int(s.indexerHeadDim),
          float(1.0 / std::sqrt(double(s.indexerHeads)) /
                std::sqrt(double(s.indexerHeadDim)))};
}

/// One thread per row: its row of the index scores.
__global__ void scoresKernel(int64_t T, Seqs seqs, Indexer x, const float *q,
                             const float *k, const float *w, float *scores) {
  const int64_t row = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= T)
    return;
  const Pair p(seqs, int(row));
  for (int j = 0; j < p.length; ++j) {
    float sum = 0.0f;
    if (j <= p.i)
      for (int h = 0; h < x.n; ++h)
        sum += x.c * w[row * x.n + h] *
               fmaxf(dot(q + row * x.n * x.d + h * x.d,
                         k + int64_t(p.start + j) * x.d, x.d),
                     0.0f);
    scores[p.at(p.i, j)] = j <= p.i ? sum : -INFINITY;
  }
}

/// One thread per row: key j is kept when fewer than min(topk, i + 1) keys
/// before it in the order (score descending, index ascending) precede it.
__global__ void topkKernel(int64_t T, Seqs seqs, int64_t topk,
                           const float *scores, float *keep) {
  const int64_t row = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= T)
    return;
  const Pair p(seqs, int(row));
  const int64_t count = topk < p.i + 1 ? topk : p.i + 1;
  const float *I = scores + p.at(p.i, 0);
  for (int j = 0; j < p.length; ++j) {
    int64_t ahead = 0;
    if (j <= p.i)
      for (int m = 0; m <= p.i; ++m)
        ahead += I[m] > I[j] || (I[m] == I[j] && m < j);
    keep[p.at(p.i, j)] = j <= p.i && ahead < count ? 1.0f : 0.0f;
  }
}

struct Core {
  int n, D;
  float scale;
  __device__ int width() const { return 3 * n * D; }
};

Core coreOf(const AttentionShape &s) {
  return {int(s.heads), int(s.headDim), s.scoreScale()};
}

/// A row's index softmax Q_j (j one of its keys `in`), from the row's
/// scores: its maximum and normaliser.
struct IndexSoftmax {
  double mx = -INFINITY, z = 0;
  const float *I;
  template <class In>
  __device__ IndexSoftmax(const float *I, int i, In in) : I(I) {
    for (int j = 0; j <= i; ++j)
      if (in(j))
        mx = fmax(mx, double(I[j]));
    for (int j = 0; j <= i; ++j)
      if (in(j))
        z += exp(double(I[j]) - mx);
  }
  __device__ double operator()(int j) const {
    return exp(double(I[j]) - mx) / z;
  }
};

/// A query row's keys: those the KL loss covers (the causal ones, kept
/// with the sparse loss).
struct LossRow {
  Pair p;
  const float *kept;
  bool sparse;
  __device__ LossRow(const Seqs &s, int row, const float *keep, bool sparse)
      : p(s, row), kept(keep + p.at(p.i, 0)), sparse(sparse) {}
  __device__ bool in(int j) const {
    return j <= p.i && (!sparse || kept[j] != 0.0f);
  }
};

/// One thread per row: D_j = sum over the core's heads of P_h - Q_j, the
/// heads' causal softmaxes less the index softmax, in the row of dScores.
/// The difference is small beside the target (0.2% at initialisation):
/// stored in float it keeps the target's precision, and it sums over
/// tensor-parallel ranks as floats.
__global__ void targetDifferenceKernel(int64_t T, Seqs seqs, Core c,
                                       bool sparse, const float *qkv,
                                       const float *scores, const float *keep,
                                       float *dScores) {
  const int64_t row = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= T)
    return;
  const LossRow r(seqs, int(row), keep, sparse);
  const Pair &p = r.p;
  auto in = [&](int j) { return r.in(j); };
  float *D = dScores + p.at(p.i, 0);
  const IndexSoftmax Q(scores + p.at(p.i, 0), p.i, in);
  for (int j = 0; j < p.length; ++j)
    D[j] = 0.0f;
  for (int h = 0; h < c.n; ++h) {
    const float *qh = qkv + row * c.width() + 3 * h * c.D;
    auto score = [&](int j) {
      return double(
          c.scale *
          dot(qh, qkv + int64_t(p.start + j) * c.width() + 3 * h * c.D + c.D,
              c.D));
    };
    double hx = -INFINITY, sum = 0;
    for (int j = 0; j <= p.i; ++j)
      if (in(j))
        hx = fmax(hx, score(j));
    for (int j = 0; j <= p.i; ++j)
      if (in(j))
        sum += exp(score(j) - hx);
    for (int j = 0; j <= p.i; ++j)
      if (in(j))
        D[j] += float(exp(score(j) - hx) / sum - Q(j));
  }
}

/// One thread per row: the KL loss's gradient of the row's index scores
/// in place of its D (targetDifferenceKernel's, over all `heads`), and the
/// row's KL in the first entry of its row of `scores` (free once the keys
/// are kept). Rows from `lossRows` (sequence parallelism's padding) add
/// nothing.
__global__ void lossKernel(int64_t T, int64_t lossRows, Seqs seqs, int heads,
                           bool sparse, double coeff, float *scores,
                           const float *keep, float *dScores) {
  const int64_t row = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= T)
    return;
  const LossRow r(seqs, int(row), keep, sparse);
  const Pair &p = r.p;
  auto in = [&](int j) { return r.in(j); };
  float *D = dScores + p.at(p.i, 0), *I = scores + p.at(p.i, 0);
  if (row >= lossRows) {
    for (int j = 0; j < p.length; ++j)
      D[j] = 0.0f;
    I[0] = 0.0f;
    return;
  }
  const IndexSoftmax indexProb(I, p.i, in);
  // The target T_j = Q_j + D_j / heads, L1-normalised as Megatron's.
  double total = 0;
  for (int j = 0; j <= p.i; ++j)
    if (in(j))
      total += indexProb(j) + double(D[j]) / heads;
  auto target = [&](int j) {
    return (indexProb(j) + double(D[j]) / heads) / total;
  };
  double kl = 0, inner = 0;
  for (int j = 0; j <= p.i; ++j)
    if (in(j)) {
      const double tj = target(j), qj = indexProb(j);
      kl += tj * (log(tj + kLogGuard) - log(qj + kLogGuard));
      inner += tj * qj / (qj + kLogGuard);
    }
  for (int j = 0; j < p.length; ++j) {
    float g = 0.0f;
    if (in(j)) {
      const double tj = target(j), qj = indexProb(j);
      g = float(coeff * (-tj * qj / (qj + kLogGuard) + qj * inner));
    }
    D[j] = g;
  }
  I[0] = float(kl);
}

/// The rows' KLs (each at its row's first score) summed in row order.
__global__ void lossSumKernel(int64_t T, Seqs seqs, float *scores) {
  double sum = 0;
  for (int64_t row = 0; row < T; ++row)
    sum +=
        scores[Pair(seqs, int(row)).at(int(row) - seqs.firstRow(int(row)), 0)];
  scores[0] = float(sum);
}

/// One thread per (row, head): the core over the row's kept keys.
__global__ void coreForwardKernel(int64_t T, Seqs seqs, Core c,
                                  const float *keep, const float *qkv,
                                  float *ctx, float *lse) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= T * c.n)
    return;
  const int row = int(idx / c.n), h = int(idx % c.n);
  const Pair p(seqs, row);
  const float *qh = qkv + int64_t(row) * c.width() + 3 * h * c.D;
  const float *kr = keep + p.at(p.i, 0);
  float mx = -INFINITY, sum = 0.0f, acc[kMaxHeadDim];
  for (int d = 0; d < c.D; ++d)
    acc[d] = 0.0f;
  for (int j = 0; j <= p.i; ++j)
    if (kr[j] != 0.0f) {
      const float *kv = qkv + int64_t(p.start + j) * c.width() + 3 * h * c.D;
      const float s = c.scale * dot(qh, kv + c.D, c.D);
      const float m = fmaxf(mx, s), keepOld = expf(mx - m), e = expf(s - m);
      sum = sum * keepOld + e;
      for (int d = 0; d < c.D; ++d)
        acc[d] = acc[d] * keepOld + e * kv[2 * c.D + d];
      mx = m;
    }
  for (int d = 0; d < c.D; ++d)
    ctx[int64_t(row) * c.n * c.D + h * c.D + d] = acc[d] / sum;
  lse[idx] = mx + logf(sum);
}

/// dO . O per (row, head).
__global__ void rowDotKernel(int64_t T, Core c, const float *ctx,
                             const float *dctx, float *rows) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= T * c.n)
    return;
  rows[idx] = dot(ctx + idx * c.D, dctx + idx * c.D, c.D);
}

/// One thread per (row, head): the query's gradient over its kept keys,
/// and as a key and value, the gradients from the queries that kept it.
__global__ void coreBackwardKernel(int64_t T, Seqs seqs, Core c,
                                   const float *keep, const float *qkv,
                                   const float *lse, const float *rows,
                                   const float *dctx, float *dqkv) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= T * c.n)
    return;
  const int row = int(idx / c.n), h = int(idx % c.n);
  const Pair p(seqs, row);
  const int64_t head = 3 * h * c.D;
  const float *own = qkv + int64_t(row) * c.width() + head;
  float *dOwn = dqkv + int64_t(row) * c.width() + head;
  for (int d = 0; d < 3 * c.D; ++d)
    dOwn[d] = 0.0f;
  // As a query: dq = sum_j dS_ij k_j.
  const float *dO = dctx + int64_t(row) * c.n * c.D + h * c.D;
  for (int j = 0; j <= p.i; ++j)
    if (keep[p.at(p.i, j)] != 0.0f) {
      const float *kv = qkv + int64_t(p.start + j) * c.width() + head;
      const float pr = expf(c.scale * dot(own, kv + c.D, c.D) - lse[idx]);
      const float ds = pr * (dot(dO, kv + 2 * c.D, c.D) - rows[idx]) * c.scale;
      for (int d = 0; d < c.D; ++d)
        dOwn[d] += ds * kv[c.D + d];
    }
  // As a key and a value: over the later queries that kept this row.
  for (int i = p.i; i < p.length; ++i)
    if (keep[p.at(i, p.i)] != 0.0f) {
      const int64_t qi = int64_t(p.start + i) * c.n + h;
      const float *query = qkv + int64_t(p.start + i) * c.width() + head;
      const float *dOi = dctx + qi * c.D;
      const float pr = expf(c.scale * dot(query, own + c.D, c.D) - lse[qi]);
      const float ds = pr * (dot(dOi, own + 2 * c.D, c.D) - rows[qi]) * c.scale;
      for (int d = 0; d < c.D; ++d) {
        dOwn[c.D + d] += ds * query[d];
        dOwn[2 * c.D + d] += pr * dOi[d];
      }
    }
}

/// One thread per (row, head): the indexer query's and head weight's
/// gradients.
__global__ void scoresQueryGradKernel(int64_t T, Seqs seqs, Indexer x,
                                      int64_t first, int64_t rows,
                                      const float *q, const float *k,
                                      const float *w, const float *dScores,
                                      float lossScale, float *dq, float *dw) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= T * x.n)
    return;
  const int row = int(idx / x.n), h = int(idx % x.n);
  const Pair p(seqs, row);
  const float *qh = q + int64_t(row) * x.n * x.d + h * x.d;
  float *dqh = dq + int64_t(row) * x.n * x.d + h * x.d;
  const float wi = x.c * w[idx];
  for (int d = 0; d < x.d; ++d)
    dqh[d] = 0.0f;
  double dwi = 0;
  const bool mine = row >= first && row < first + rows;
  for (int j = 0; mine && j <= p.i; ++j) {
    const float g = lossScale * dScores[p.at(p.i, j)];
    const float *kj = k + int64_t(p.start + j) * x.d;
    const float a = dot(qh, kj, x.d);
    if (a > 0.0f) {
      dwi += double(g) * a;
      for (int d = 0; d < x.d; ++d)
        dqh[d] += g * wi * kj[d];
    }
  }
  dw[idx] = float(x.c * dwi);
}

/// One thread per row: the indexer key's gradient, over the later queries
/// and their heads.
__global__ void scoresKeyGradKernel(int64_t T, Seqs seqs, Indexer x,
                                    int64_t first, int64_t rows, const float *q,
                                    const float *k, const float *w,
                                    const float *dScores, float lossScale,
                                    float *dk) {
  const int64_t row = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= T)
    return;
  const Pair p(seqs, int(row));
  const float *kj = k + row * x.d;
  float *dkj = dk + row * x.d;
  for (int d = 0; d < x.d; ++d)
    dkj[d] = 0.0f;
  for (int i = p.i; i < p.length; ++i) {
    if (p.start + i < first || p.start + i >= first + rows)
      continue; // another rank's query
    const float g = lossScale * dScores[p.at(i, p.i)];
    for (int h = 0; h < x.n; ++h) {
      const float *qh = q + int64_t(p.start + i) * x.n * x.d + h * x.d;
      if (dot(qh, kj, x.d) > 0.0f) {
        const float f = g * x.c * w[int64_t(p.start + i) * x.n + h];
        for (int d = 0; d < x.d; ++d)
          dkj[d] += f * qh[d];
      }
    }
  }
}

} // namespace

void Kernels::dsaKeyNormForward(int64_t T, int64_t n, const float *x,
                                const float *weight, const float *bias,
                                float *y, float *mean, float *rstd) {
  if (T == 0)
    return;
  keyNormKernel<<<blocksFor(T), 256, 0, stream()>>>(T, int(n), x, weight, bias,
                                                    y, mean, rstd);
  launched("DSA k_norm");
}

void Kernels::dsaKeyNormBackward(int64_t T, int64_t n, const float *x,
                                 const float *weight, const float *mean,
                                 const float *rstd, const float *dy, float *dx,
                                 float *dWeight, float *dBias) {
  if (T == 0)
    return;
  keyNormInputGradKernel<<<blocksFor(T), 256, 0, stream()>>>(
      T, int(n), x, weight, mean, rstd, dy, dx);
  launched("DSA k_norm backward");
  keyNormWeightGradKernel<<<blocksFor(n), 256, 0, stream()>>>(
      T, int(n), x, mean, rstd, dy, dWeight, dBias);
  launched("DSA k_norm weight gradient");
}

void Kernels::dsaIndexScores(const DsaShape &s, const Tokens &t, const float *q,
                             const float *k, const float *w, float *scores) {
  const int64_t T = t.tokens();
  if (T == 0)
    return;
  scoresKernel<<<blocksFor(T), 256, 0, stream()>>>(T, seqsOf(t), indexerOf(s),
                                                   q, k, w, scores);
  launched("DSA index scores");
}

void Kernels::dsaTopk(const DsaShape &s, const Tokens &t, const float *scores,
                      float *keep) {
  const int64_t T = t.tokens();
  if (T == 0)
    return;
  topkKernel<<<blocksFor(T), 256, 0, stream()>>>(T, seqsOf(t), s.topk, scores,
                                                 keep);
  launched("DSA top-k");
}

void Kernels::dsaTargetDifference(const DsaShape &s, const Tokens &t,
                                  const AttnSaved &a, const float *scores,
                                  const float *keep, float *dScores) {
  const int64_t T = t.tokens();
  if (T == 0)
    return;
  targetDifferenceKernel<<<blocksFor(T), 256, 0, stream()>>>(
      T, seqsOf(t), coreOf(s.mla().core()), s.sparseLoss, a.qkv, scores, keep,
      dScores);
  launched("DSA indexer target");
}

float Kernels::dsaIndexerLoss(const DsaShape &s, const Tokens &t, int64_t heads,
                              const float *scores, const float *keep,
                              float *dScores) {
  const int64_t T = t.tokens();
  if (T == 0)
    return 0.0f;
  // The mean over the microbatch's rows; sequence parallelism's padding
  // adds no loss.
  const int64_t rows = t.shape.lossRows();
  const double coeff = s.lossCoeff / double(rows > 0 ? rows : 1);
  // The scores' blocks are free once the keys are kept: each row's first
  // entry takes its KL, their sum the very first.
  float *rowLoss = const_cast<float *>(scores);
  lossKernel<<<blocksFor(T), 256, 0, stream()>>>(T, rows, seqsOf(t), int(heads),
                                                 s.sparseLoss, coeff, rowLoss,
                                                 keep, dScores);
  launched("DSA indexer loss");
  lossSumKernel<<<1, 1, 0, stream()>>>(T, seqsOf(t), rowLoss);
  launched("DSA indexer loss sum");
  float sum = 0.0f;
  check(cudaMemcpyAsync(&sum, rowLoss, sizeof(float), cudaMemcpyDeviceToHost,
                        stream()),
        "reading the indexer loss");
  synchronize();
  return float(coeff * sum);
}

void Kernels::dsaCoreForward(const AttentionShape &s, const Tokens &t,
                             AttnSaved &a, const float *keep) {
  const int64_t T = t.tokens();
  if (T == 0)
    return;
  coreForwardKernel<<<blocksFor(T * s.heads), 128, 0, stream()>>>(
      T, seqsOf(t), coreOf(s), keep, a.qkv, a.ctx, a.softmax);
  launched("DSA core");
}

void Kernels::dsaCoreBackward(const AttentionShape &s, const Tokens &t,
                              AttnSaved &a, const float *keep,
                              const float *dctx, float *rows) {
  const int64_t T = t.tokens();
  if (T == 0)
    return;
  rowDotKernel<<<blocksFor(T * s.heads), 256, 0, stream()>>>(T, coreOf(s),
                                                             a.ctx, dctx, rows);
  launched("DSA core row dots");
  coreBackwardKernel<<<blocksFor(T * s.heads), 128, 0, stream()>>>(
      T, seqsOf(t), coreOf(s), keep, a.qkv, a.softmax, rows, dctx, a.dqkv);
  launched("DSA core backward");
}

void Kernels::dsaIndexScoresBackward(const DsaShape &s, const Tokens &t,
                                     int64_t first, int64_t rows,
                                     const float *q, const float *k,
                                     const float *w, const float *dScores,
                                     float lossScale, float *, float *dq,
                                     float *dk, float *dw) {
  const int64_t T = t.tokens();
  if (T == 0)
    return;
  scoresQueryGradKernel<<<blocksFor(T * s.indexerHeads), 256, 0, stream()>>>(
      T, seqsOf(t), indexerOf(s), first, rows, q, k, w, dScores, lossScale, dq,
      dw);
  launched("DSA index scores backward (queries)");
  scoresKeyGradKernel<<<blocksFor(T), 256, 0, stream()>>>(
      T, seqsOf(t), indexerOf(s), first, rows, q, k, w, dScores, lossScale, dk);
  launched("DSA index scores backward (keys)");
}

} // namespace hypipe::rt::cuda
