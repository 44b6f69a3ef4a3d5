//===- Attention.cpp - causal grouped-query self-attention on the CPU -----===//
//
// linear_qkv with Megatron's per-group interleaving: for each query group
// [q heads of the group | k | v], each head_dim wide. Optional RoPE
// (rotate-half, base 10000) on q and k. Scores and probabilities per
// (sequence, head) with OpenBLAS; probabilities are kept for backward.
//
//===----------------------------------------------------------------------===//

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/cpu/Layers.h"
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
  const std::vector<int64_t> first = sequenceStartOfRows(t);
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

/// Offset of sequence q's [heads, len, len] probabilities.
std::vector<int64_t> probOffsets(const AttentionShape &s, const TokenShape &t) {
  std::vector<int64_t> off(t.sequences() + 1, 0);
  for (int64_t q = 0; q < t.sequences(); ++q)
    off[q + 1] = off[q] + s.heads * t.length(q) * t.length(q);
  return off;
}

} // namespace

void attentionForward(const AttentionShape &s, const TokenShape &t,
                      const float *params, const float *x, float *y,
                      float *saved, float *ws) {
  (void)ws;
  const int64_t T = t.tokens(), D = s.headDim, Wd = s.qkvWidth(),
                Cw = s.contextWidth(), qpg = s.heads / s.groups;
  const float *norm = params, *wQkv = norm + s.hidden,
              *wProj = wQkv + Wd * s.hidden;
  AttnSaved a = attnSaved(s, t, saved, Target::Cpu);
  const std::vector<int64_t> probOff = probOffsets(s, t);
  std::memcpy(a.x, x, sizeof(float) * T * s.hidden);
  rmsnormForward(T, s.hidden, x, norm, a.xn, a.rstd);
  linearForward(T, s.hidden, Wd, a.xn, wQkv, a.qkv);
  if (s.rope)
    applyRope(s, t, a.qkv, 1.0f);

  const float scale = 1.0f / std::sqrt(float(D));
  ProfileScope core(KernelClass::Attention);
  // One causal block per sequence: a sample attends only to itself.
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < t.sequences(); ++b)
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t S = t.length(b), row0 = t.start(b), g = h / qpg;
      const float *q = a.qkv + row0 * Wd + (g * (qpg + 2) + h % qpg) * D;
      const float *k = a.qkv + row0 * Wd + (g * (qpg + 2) + qpg) * D;
      const float *v = k + D;
      float *P = a.softmax + probOff[b] + h * S * S;
      gemm(false, true, S, S, D, scale, q, Wd, k, Wd, 0.0f, P, S);
      for (int64_t i = 0; i < S; ++i) {
        float *r = P + i * S;
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j <= i; ++j)
          mx = std::max(mx, r[j]);
        double sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          r[j] = std::exp(r[j] - mx);
          sum += r[j];
        }
        float inv = float(1.0 / sum);
        for (int64_t j = 0; j <= i; ++j)
          r[j] *= inv;
        for (int64_t j = i + 1; j < S; ++j)
          r[j] = 0.0f;
      }
      gemm(false, false, S, D, S, 1.0f, P, S, v, Wd, 0.0f,
           a.ctx + row0 * Cw + h * D, Cw);
    }
  linearForward(T, Cw, s.hidden, a.ctx, wProj, y);
  addResidual(T * s.hidden, x, y);
}

void attentionBackwardInput(const AttentionShape &s, const TokenShape &t,
                            const float *params, float *grads, float *saved,
                            const float *dy, float *dx, float *ws) {
  const int64_t T = t.tokens(), D = s.headDim, Wd = s.qkvWidth(),
                Cw = s.contextWidth(), qpg = s.heads / s.groups;
  const float *norm = params, *wQkv = norm + s.hidden,
              *wProj = wQkv + Wd * s.hidden;
  AttnSaved a = attnSaved(s, t, saved, Target::Cpu);
  const std::vector<int64_t> probOff = probOffsets(s, t);
  float *dctx = ws;           // [T, Cw]
  float *dxn = dctx + T * Cw; // [T, hidden]

  std::memcpy(a.dout, dy, sizeof(float) * T * s.hidden);
  linearBackwardInput(T, Cw, s.hidden, dy, wProj, dctx);
  std::memset(a.dqkv, 0, sizeof(float) * T * Wd);

  const float scale = 1.0f / std::sqrt(float(D));
  // Heads of one sequence share k and v gradients, so parallelism is over
  // sequences only.
  {
    ProfileScope core(KernelClass::Attention);
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < t.sequences(); ++b) {
      const int64_t S = t.length(b), row0 = t.start(b);
      std::vector<float> dPScratch(S * S);
      float *dPb = dPScratch.data();
      for (int64_t h = 0; h < s.heads; ++h) {
        int64_t g = h / qpg;
        int64_t qOff = (g * (qpg + 2) + h % qpg) * D,
                kOff = (g * (qpg + 2) + qpg) * D, vOff = kOff + D;
        const float *base = a.qkv + row0 * Wd;
        float *dbase = a.dqkv + row0 * Wd;
        const float *P = a.softmax + probOff[b] + h * S * S;
        const float *dc = dctx + row0 * Cw + h * D;
        // dV += P^T dctx; dP = dctx V^T.
        gemm(true, false, S, D, S, 1.0f, P, S, dc, Cw, 1.0f, dbase + vOff, Wd);
        gemm(false, true, S, S, D, 1.0f, dc, Cw, base + vOff, Wd, 0.0f, dPb, S);
        for (int64_t i = 0; i < S; ++i) {
          const float *pr = P + i * S;
          float *dr = dPb + i * S;
          double dot = 0;
          for (int64_t j = 0; j <= i; ++j)
            dot += double(pr[j]) * dr[j];
          for (int64_t j = 0; j <= i; ++j)
            dr[j] = pr[j] * (dr[j] - float(dot)) * scale;
          for (int64_t j = i + 1; j < S; ++j)
            dr[j] = 0.0f;
        }
        // dQ = dS K; dK += dS^T Q.
        gemm(false, false, S, D, S, 1.0f, dPb, S, base + kOff, Wd, 0.0f,
             dbase + qOff, Wd);
        gemm(true, false, S, D, S, 1.0f, dPb, S, base + qOff, Wd, 1.0f,
             dbase + kOff, Wd);
      }
    }
  }
  if (s.rope)
    applyRope(s, t, a.dqkv, -1.0f);

  linearBackwardInput(T, s.hidden, Wd, a.dqkv, wQkv, dxn);
  std::memcpy(dx, dy, sizeof(float) * T * s.hidden);
  rmsnormBackward(T, s.hidden, a.x, norm, a.rstd, dxn, dx, grads, true);
}

void attentionBackwardWeight(const AttentionShape &s, const TokenShape &t,
                             const float *saved, float *grads) {
  const int64_t T = t.tokens(), Wd = s.qkvWidth(), Cw = s.contextWidth();
  AttnSaved a = attnSaved(s, t, const_cast<float *>(saved), Target::Cpu);
  float *gQkv = grads + s.hidden, *gProj = gQkv + Wd * s.hidden;
  linearBackwardWeight(T, s.hidden, Wd, a.dqkv, a.xn, gQkv);
  linearBackwardWeight(T, Cw, s.hidden, a.dout, a.ctx, gProj);
}

} // namespace hypipe::rt::cpu
