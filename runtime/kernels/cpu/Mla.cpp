//===- Mla.cpp - multi-latent attention's own kernels on the CPU ----------===//
//
// What recipes/Mla.h adds to attention's core: q, k and v laid out for the
// core (heads padded to MlaShape::coreHeadDim(), RoPE or YaRN on the rotary
// parts) and the transpose of that for the gradients. Megatron's MLA rotary
// embedding (multi_latent_attention=True) de-interleaves the pe channels,
// even ones then odd ones, and rotates the halves; the result stays
// de-interleaved.
//
//===----------------------------------------------------------------------===//

#include "core/model/LayerShapes.h"
#include "runtime/kernels/cpu/Kernels.h"
#include "runtime/kernels/cpu/Primitives.h"
#include "runtime/kernels/cpu/Profile.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace hypipe::rt::cpu {
namespace {

/// Each row's cos and sin of its pe / 2 angles (position within its
/// sample), times the rotary factor: [T, pe] as [cos | sin].
const std::vector<float> &rotaryTable(const MlaShape &s, const TokenShape &t) {
  // The calling thread's buffers, reused from call to call; the loop's
  // threads reach them through these pointers (a thread_local named inside
  // the loop would be each thread's own).
  thread_local std::vector<int64_t> firstOfThread;
  thread_local std::vector<double> inverseOfThread;
  thread_local std::vector<float> tableOfThread;
  const int64_t half = s.posEmbDim / 2, T = t.tokens();
  sequenceStartOfRows(t, firstOfThread);
  inverseOfThread.resize(size_t(half));
  for (int64_t i = 0; i < half; ++i)
    inverseOfThread[size_t(i)] = s.inverseFrequency(i);
  const double factor = s.ropeFactor();
  tableOfThread.resize(size_t(T * 2 * half));
  const int64_t *first = firstOfThread.data();
  const double *inverse = inverseOfThread.data();
  float *table = tableOfThread.data();
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < T; ++row) {
    const double pos = double(row - first[row]);
    float *cs = table + row * 2 * half;
    for (int64_t i = 0; i < half; ++i) {
      const double ang = pos * inverse[i];
      cs[i] = float(std::cos(ang) * factor);
      cs[half + i] = float(std::sin(ang) * factor);
    }
  }
  return tableOfThread;
}

/// out = rotate(de-interleave(in)) for one pe-wide piece.
inline void rotate(int64_t half, const float *cs, const float *in, float *out) {
  for (int64_t i = 0; i < half; ++i) {
    const float a = in[2 * i], b = in[2 * i + 1], c = cs[i], sn = cs[half + i];
    out[i] = a * c - b * sn;
    out[half + i] = b * c + a * sn;
  }
}

} // namespace

void Kernels::mlaAssemble(const MlaShape &s, const TokenShape &t,
                          const float *q, const float *kvu, const float *kvd,
                          float *qkv) {
  ProfileScope scope(KernelClass::Attention);
  const int64_t T = t.tokens(), n = s.heads, D = s.coreHeadDim(),
                qk = s.qkHeadDim, pe = s.posEmbDim, v = s.vHeadDim;
  const float *table = rotaryTable(s, t).data();
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < T; ++row) {
    const float *cs = table + row * pe;
    float *out = qkv + row * 3 * n * D;
    std::fill(out, out + 3 * n * D, 0.0f);
    const float *qRow = q + row * s.queryWidth(),
                *kvRow = kvu + row * s.kvUpWidth(),
                *kpe = kvd + row * s.kvDownWidth() + s.kvLoraRank;
    for (int64_t h = 0; h < n; ++h) {
      float *qh = out + 3 * h * D, *kh = qh + D, *vh = kh + D;
      const float *qIn = qRow + h * (qk + pe), *kvIn = kvRow + h * (qk + v);
      std::copy(qIn, qIn + qk, qh);
      rotate(pe / 2, cs, qIn + qk, qh + qk);
      std::copy(kvIn, kvIn + qk, kh);
      rotate(pe / 2, cs, kpe, kh + qk);
      std::copy(kvIn + qk, kvIn + qk + v, vh);
    }
  }
}

void Kernels::mlaGatherGradients(const MlaShape &s, const TokenShape &t,
                                 const float *dqkv, float *dq, float *dkvu,
                                 float *dkvd) {
  ProfileScope scope(KernelClass::Attention);
  const int64_t T = t.tokens(), n = s.heads, D = s.coreHeadDim(),
                qk = s.qkHeadDim, pe = s.posEmbDim, v = s.vHeadDim;
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < T; ++row) {
    const float *in = dqkv + row * 3 * n * D;
    float *dqRow = dq + row * s.queryWidth(),
          *dkvRow = dkvu + row * s.kvUpWidth(),
          *dkpe = dkvd + row * s.kvDownWidth() + s.kvLoraRank;
    std::fill(dkpe, dkpe + pe, 0.0f);
    for (int64_t h = 0; h < n; ++h) {
      const float *dqh = in + 3 * h * D, *dkh = dqh + D, *dvh = dkh + D;
      std::copy(dqh, dqh + qk + pe, dqRow + h * (qk + pe));
      std::copy(dkh, dkh + qk, dkvRow + h * (qk + v));
      std::copy(dvh, dvh + v, dkvRow + h * (qk + v) + qk);
      for (int64_t i = 0; i < pe; ++i)
        dkpe[i] += dkh[qk + i];
    }
  }
}

void Kernels::mlaRope(const MlaShape &s, const TokenShape &t, float *x,
                      int64_t stride, int64_t heads, int64_t headStride) {
  ProfileScope scope(KernelClass::Attention);
  const int64_t T = t.tokens(), pe = s.posEmbDim;
  const float *table = rotaryTable(s, t).data();
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < T; ++row) {
    const float *cs = table + row * pe;
    thread_local std::vector<float> u;
    u.resize(size_t(pe));
    for (int64_t h = 0; h < heads; ++h) {
      float *piece = x + row * stride + h * headStride;
      rotate(pe / 2, cs, piece, u.data());
      std::copy(u.begin(), u.end(), piece);
    }
  }
}

void Kernels::mlaRopeBackward(const MlaShape &s, const TokenShape &t, float *x,
                              int64_t stride, int64_t heads,
                              int64_t headStride) {
  ProfileScope scope(KernelClass::Attention);
  const int64_t T = t.tokens(), pe = s.posEmbDim, half = pe / 2;
  const float *table = rotaryTable(s, t).data();
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < T; ++row) {
    const float *cs = table + row * pe;
    for (int64_t h = 0; h < heads; ++h) {
      float *g = x + row * stride + h * headStride;
      // The rotation's transpose, then the de-interleaving's: channel i of
      // the even half back to 2i, of the odd half to 2i + 1.
      thread_local std::vector<float> u;
      u.resize(size_t(pe));
      for (int64_t i = 0; i < half; ++i) {
        const float c = cs[i], sn = cs[half + i];
        u[size_t(2 * i)] = g[i] * c + g[half + i] * sn;
        u[size_t(2 * i + 1)] = g[half + i] * c - g[i] * sn;
      }
      std::copy(u.begin(), u.end(), g);
    }
  }
}

} // namespace hypipe::rt::cpu
