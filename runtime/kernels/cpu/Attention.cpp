//===- Attention.cpp - causal grouped-query self-attention on the CPU -----===//
//
// linear_qkv with Megatron's per-group interleaving: for each query group
// [q heads of the group | k | v], each head_dim wide. Optional RoPE
// (rotate-half, base 10000) on q and k. Blocked, flash-style: per (sample,
// head) the scores of 64 query rows against 64 key rows at a time
// (OpenBLAS), an online softmax over the key blocks, and only the
// log-sum-exp of every row kept; backward recomputes each block's
// probabilities from it. Memory and cache traffic grow with the tokens, not
// with the square of the sample length.
//
//===----------------------------------------------------------------------===//

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/cpu/Kernels.h"
#include "runtime/kernels/cpu/Primitives.h"
#include "runtime/kernels/cpu/Profile.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace hypipe::rt::cpu {
namespace {

/// Rotates q and k of every head in place by +angle (forward) or -angle
/// (the transpose, for gradients).
void applyRope(const AttentionShape &s, const TokenShape &t, float *qkv,
               float sign) {
  ProfileScope scope(KernelClass::Attention);
  const int64_t D = s.headDim, half = D / 2, Wd = s.qkvWidth();
  const int64_t qpg = s.heads / s.groups;
  thread_local std::vector<int64_t> firstOfThread;
  sequenceStartOfRows(t, firstOfThread);
  const int64_t *first = firstOfThread.data();
  thread_local std::vector<double> invFreqOfThread;
  std::vector<double> &invFreq = invFreqOfThread;
  invFreq.resize(size_t(half));
  for (int64_t i = 0; i < half; ++i)
    invFreq[size_t(i)] = std::pow(s.ropeBase, -2.0 * double(i) / double(D));
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < t.tokens(); ++row) {
    // One angle per frequency for the row, shared by its q and k heads.
    thread_local std::vector<float> cosSin;
    cosSin.resize(size_t(2 * half));
    const double pos = double(row - first[row]); // restarts every sample
    for (int64_t i = 0; i < half; ++i) {
      const double ang = pos * invFreq[size_t(i)];
      cosSin[size_t(i)] = float(std::cos(ang));
      cosSin[size_t(half + i)] = sign * float(std::sin(ang));
    }
    for (int64_t g = 0; g < s.groups; ++g)
      for (int64_t j = 0; j < qpg + 1; ++j) { // q heads then k
        float *v = qkv + row * Wd + (g * (qpg + 2) + j) * D;
        for (int64_t i = 0; i < half; ++i) {
          const float c = cosSin[size_t(i)], sn = cosSin[size_t(half + i)];
          float a = v[i], b = v[i + half];
          v[i] = a * c - b * sn;
          v[i + half] = b * c + a * sn;
        }
      }
  }
}

/// Query and key rows per block: a block's scores (kBlock x kBlock) stay in
/// the cache, and no [len, len] matrix is ever formed.
constexpr int64_t kBlock = 64;

/// Per-thread blocks: scores or probabilities, their gradient, and a
/// block's running max, sum and output.
struct AttnScratch {
  std::vector<float> buf;
  float *s, *dp, *mx, *sum, *acc;
};

AttnScratch &attnScratch(int64_t D) {
  thread_local AttnScratch sc;
  const size_t need = size_t(2 * kBlock * kBlock + 2 * kBlock + kBlock * D);
  if (sc.buf.size() < need)
    sc.buf.resize(need);
  float *p = sc.buf.data();
  sc.s = p, p += kBlock * kBlock;
  sc.dp = p, p += kBlock * kBlock;
  sc.mx = p, p += kBlock;
  sc.sum = p, p += kBlock;
  sc.acc = p;
  return sc;
}

/// Columns of head h's q, and its group's k and v, in a qkv row.
struct HeadColumns {
  int64_t q, k, v;
  HeadColumns(const AttentionShape &s, int64_t h) {
    const int64_t qpg = s.heads / s.groups, g = h / qpg, D = s.headDim;
    q = (g * (qpg + 2) + h % qpg) * D;
    k = (g * (qpg + 2) + qpg) * D;
    v = k + D;
  }
};

/// The core forward: a.qkv to a.ctx and each row's log-sum-exp in
/// a.softmax (recipes/Attention.h).
void coreForward(const AttentionShape &s, const TokenShape &t, AttnSaved &a) {
  const int64_t D = s.headDim, Wd = s.qkvWidth(), Cw = s.contextWidth();
  const float scale = s.scoreScale();
  ProfileScope core(KernelClass::Attention);
  // One causal block per sample: a sample attends only to itself. Per
  // (sample, head, block of query rows) the key blocks up to the diagonal
  // pass through an online softmax (running max and sum, the output
  // rescaled as the max grows); the log-sum-exp of every row is kept.
#pragma omp parallel
  {
    // Every thread sizes its scratch whichever items it gets, so a later
    // step allocates nothing however the items fall.
    AttnScratch &sc = attnScratch(D);
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t b = 0; b < t.sequences(); ++b)
      for (int64_t h = 0; h < s.heads; ++h) {
        const int64_t S = t.length(b), row0 = t.start(b);
        const HeadColumns col(s, h);
        for (int64_t i0 = 0; i0 < S; i0 += kBlock) {
          const int64_t bi = std::min(kBlock, S - i0);
          const float *q = a.qkv + (row0 + i0) * Wd + col.q;
          std::fill(sc.mx, sc.mx + bi, -std::numeric_limits<float>::infinity());
          std::fill(sc.sum, sc.sum + bi, 0.0f);
          std::fill(sc.acc, sc.acc + bi * D, 0.0f);
          for (int64_t j0 = 0; j0 < i0 + bi; j0 += kBlock) {
            const int64_t bj = std::min(kBlock, S - j0);
            const float *k = a.qkv + (row0 + j0) * Wd + col.k;
            const float *v = a.qkv + (row0 + j0) * Wd + col.v;
            gemm(false, true, bi, bj, D, scale, q, Wd, k, Wd, 0.0f, sc.s, bj);
            for (int64_t i = 0; i < bi; ++i) {
              float *r = sc.s + i * bj;
              const int64_t last =
                  std::min(bj, i0 + i - j0 + 1); // >= 1: i0 >= j0 // causal
              float mx = sc.mx[i];
              for (int64_t j = 0; j < last; ++j)
                mx = std::max(mx, r[j]);
              const float keep = fastExp(sc.mx[i] - mx);
              float sum = 0;
#pragma omp simd reduction(+ : sum)
              for (int64_t j = 0; j < last; ++j) {
                r[j] = fastExp(r[j] - mx);
                sum += r[j];
              }
              std::fill(r + last, r + bj, 0.0f);
              sc.mx[i] = mx;
              sc.sum[i] = sc.sum[i] * keep + sum;
              for (int64_t d = 0; d < D; ++d)
                sc.acc[i * D + d] *= keep;
            }
            gemm(false, false, bi, D, bj, 1.0f, sc.s, bj, v, Wd, 1.0f, sc.acc,
                 D);
          }
          for (int64_t i = 0; i < bi; ++i) {
            const float inv = 1.0f / sc.sum[i];
            float *out = a.ctx + (row0 + i0 + i) * Cw + h * D;
            for (int64_t d = 0; d < D; ++d)
              out[d] = sc.acc[i * D + d] * inv;
            a.softmax[(row0 + i0 + i) * s.heads + h] =
                sc.mx[i] + std::log(sc.sum[i]);
          }
        }
      }
  }
}

/// The core backward: a.dqkv whole from the context's gradient `dctx`;
/// `rows` is [T, heads] of scratch for dO . O (recipes/Attention.h).
void coreBackward(const AttentionShape &s, const TokenShape &t, AttnSaved &a,
                  const float *dctx, float *rows) {
  const int64_t T = t.tokens(), D = s.headDim, Wd = s.qkvWidth(),
                Cw = s.contextWidth(), qpg = s.heads / s.groups;
  std::memset(a.dqkv, 0, sizeof(float) * T * Wd);

  const float scale = s.scoreScale();
  {
    ProfileScope core(KernelClass::Attention);
    // dO . O per row and head: the softmax backward's row term.
    float *rowDot = rows; // [T, heads]
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < T; ++row)
      for (int64_t h = 0; h < s.heads; ++h) {
        const float *o = a.ctx + row * Cw + h * D,
                    *dO = dctx + row * Cw + h * D;
        float dot = 0;
#pragma omp simd reduction(+ : dot)
        for (int64_t d = 0; d < D; ++d)
          dot += o[d] * dO[d];
        rowDot[row * s.heads + h] = dot;
      }
      // The heads of a group share k and v (and their gradients), so a work
      // item is a (sample, group). Per key block, every query block at or
      // below the diagonal: P from the saved log-sum-exp, then
      //   dV += P^T dO,  dS = P (dO V^T - rowDot) scale,  dQ += dS K,
      //   dK += dS^T Q.
#pragma omp parallel
    {
      // Every thread sizes its scratch whichever items it gets, so a later
      // step allocates nothing however the items fall.
      AttnScratch &sc = attnScratch(D);
#pragma omp for collapse(2) schedule(dynamic)
      for (int64_t b = 0; b < t.sequences(); ++b)
        for (int64_t g = 0; g < s.groups; ++g) {
          const int64_t S = t.length(b), row0 = t.start(b);
          const float *base = a.qkv + row0 * Wd;
          float *dbase = a.dqkv + row0 * Wd;
          for (int64_t h = g * qpg; h < (g + 1) * qpg; ++h) {
            const HeadColumns col(s, h);
            for (int64_t j0 = 0; j0 < S; j0 += kBlock) {
              const int64_t bj = std::min(kBlock, S - j0);
              for (int64_t i0 = j0 / kBlock * kBlock; i0 < S; i0 += kBlock) {
                const int64_t bi = std::min(kBlock, S - i0);
                const float *q = base + i0 * Wd + col.q;
                const float *dO = dctx + (row0 + i0) * Cw + h * D;
                gemm(false, true, bi, bj, D, scale, q, Wd,
                     base + j0 * Wd + col.k, Wd, 0.0f, sc.s, bj);
                gemm(false, true, bi, bj, D, 1.0f, dO, Cw,
                     base + j0 * Wd + col.v, Wd, 0.0f, sc.dp, bj);
                for (int64_t i = 0; i < bi; ++i) {
                  float *p = sc.s + i * bj, *dp = sc.dp + i * bj;
                  const int64_t last = std::min(bj, i0 + i - j0 + 1);
                  const float lse = a.softmax[(row0 + i0 + i) * s.heads + h],
                              rd = rowDot[(row0 + i0 + i) * s.heads + h];
#pragma omp simd
                  for (int64_t j = 0; j < last; ++j) {
                    p[j] = fastExp(p[j] - lse);
                    dp[j] = p[j] * (dp[j] - rd) * scale;
                  }
                  std::fill(p + last, p + bj, 0.0f);
                  std::fill(dp + last, dp + bj, 0.0f);
                }
                gemm(true, false, bj, D, bi, 1.0f, sc.s, bj, dO, Cw, 1.0f,
                     dbase + j0 * Wd + col.v, Wd);
                gemm(false, false, bi, D, bj, 1.0f, sc.dp, bj,
                     base + j0 * Wd + col.k, Wd, 1.0f, dbase + i0 * Wd + col.q,
                     Wd);
                gemm(true, false, bj, D, bi, 1.0f, sc.dp, bj, q, Wd, 1.0f,
                     dbase + j0 * Wd + col.k, Wd);
              }
            }
          }
        }
    }
  }
}

} // namespace

void Kernels::rope(const AttentionShape &s, const TokenShape &t, float *qkv,
                   float sign) {
  applyRope(s, t, qkv, sign);
}

void Kernels::coreForward(const AttentionShape &s, const TokenShape &t,
                          AttnSaved &a) const {
  cpu::coreForward(s, t, a);
}

void Kernels::coreBackward(const AttentionShape &s, const TokenShape &t,
                           AttnSaved &a, const float *dctx, float *rows) const {
  cpu::coreBackward(s, t, a, dctx, rows);
}

} // namespace hypipe::rt::cpu
