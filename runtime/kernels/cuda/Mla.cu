//===- Mla.cu - multi-latent attention's own kernels on the GPU -----------===//
//
// cpu/Mla.cpp's kernels on the stream: q, k and v laid out for attention's
// core (heads padded to MlaShape::coreHeadDim(), Megatron's MLA rotary
// embedding -- de-interleave, then rotate the halves -- on q_pe and the
// shared k_pe, RoPE or YaRN) and their transpose for the gradients. The
// rotary frequencies come from MlaShape::inverseFrequency on the host.
//
//===----------------------------------------------------------------------===//

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/cuda/Kernels.h"
#include "runtime/kernels/cuda/Primitives.cuh"

#include <string>

namespace hypipe::rt::cuda {
namespace {

/// The most rotary pairs a head has here: MLA's core heads are at most 128
/// wide on the GPU (KernelPlan refuses wider ones).
constexpr int kMaxPairs = 64;

/// The rotary embedding of one call: frequencies per pair, the factor on
/// cos and sin, and where each row's sample starts.
struct Rotary {
  double inverse[kMaxPairs];
  double factor;
  int half;
  Seqs seqs;
  __device__ void cosSin(int row, int i, float &c, float &s) const {
    const double ang = double(row - seqs.firstRow(row)) * inverse[i];
    c = float(cos(ang) * factor);
    s = float(sin(ang) * factor);
  }
  /// Channel i of rotate(de-interleave(in)).
  __device__ float rotated(int row, int i, const float *in) const {
    const int j = i < half ? i : i - half;
    float c, s;
    cosSin(row, j, c, s);
    const float a = in[2 * j], b = in[2 * j + 1];
    return i < half ? a * c - b * s : b * c + a * s;
  }
};

Rotary rotaryOf(const MlaShape &s, const Tokens &t) {
  if (s.posEmbDim / 2 > kMaxPairs)
    throw CudaError("error: the CUDA MLA kernels take qk_pos_emb_head_dim up "
                    "to " +
                    std::to_string(2 * kMaxPairs) + ", not " +
                    std::to_string(s.posEmbDim));
  Rotary r{};
  r.half = int(s.posEmbDim / 2);
  for (int i = 0; i < r.half; ++i)
    r.inverse[i] = s.inverseFrequency(i);
  r.factor = s.ropeFactor();
  r.seqs = seqsOf(t);
  return r;
}

struct Dims {
  int n, D, qk, pe, v, kvLora;
  __device__ int queryWidth() const { return n * (qk + pe); }
  __device__ int kvUpWidth() const { return n * (qk + v); }
  __device__ int kvDownWidth() const { return kvLora + pe; }
};

Dims dimsOf(const MlaShape &s) {
  return {int(s.heads),     int(s.coreHeadDim()), int(s.qkHeadDim),
          int(s.posEmbDim), int(s.vHeadDim),      int(s.kvLoraRank)};
}

/// One thread per element of the core's [T, heads x 3D].
__global__ void assembleKernel(int64_t T, Dims d, Rotary r, const float *q,
                               const float *kvu, const float *kvd, float *qkv) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t width = int64_t(3) * d.n * d.D;
  if (idx >= T * width)
    return;
  const int row = int(idx / width), col = int(idx % width);
  const int h = col / (3 * d.D), part = col % (3 * d.D) / d.D, c = col % d.D;
  const float *qIn = q + int64_t(row) * d.queryWidth() + h * (d.qk + d.pe);
  const float *kvIn = kvu + int64_t(row) * d.kvUpWidth() + h * (d.qk + d.v);
  const float *kpe = kvd + int64_t(row) * d.kvDownWidth() + d.kvLora;
  float out = 0.0f;
  if (part == 2)
    out = c < d.v ? kvIn[d.qk + c] : 0.0f;
  else if (c < d.qk)
    out = part == 0 ? qIn[c] : kvIn[c];
  else if (c < d.qk + d.pe)
    out = r.rotated(row, c - d.qk, part == 0 ? qIn + d.qk : kpe);
  qkv[idx] = out;
}

/// One thread per element of dq and dkvu, then one per k_pe channel (the
/// sum over the heads).
__global__ void gatherKernel(int64_t T, Dims d, const float *dqkv, float *dq,
                             float *dkvu, float *dkvd) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int qw = d.queryWidth(), kw = d.kvUpWidth();
  const int64_t width = qw + kw + d.pe;
  if (idx >= T * width)
    return;
  const int row = int(idx / width), col = int(idx % width);
  const float *in = dqkv + int64_t(row) * 3 * d.n * d.D;
  if (col < qw) {
    const int h = col / (d.qk + d.pe), c = col % (d.qk + d.pe);
    dq[int64_t(row) * qw + col] = in[3 * h * d.D + c];
  } else if (col < qw + kw) {
    const int k = col - qw, h = k / (d.qk + d.v), c = k % (d.qk + d.v);
    const float *head = in + 3 * h * d.D;
    dkvu[int64_t(row) * kw + k] =
        c < d.qk ? head[d.D + c] : head[2 * d.D + c - d.qk];
  } else {
    const int i = col - qw - kw;
    float sum = 0.0f;
    for (int h = 0; h < d.n; ++h)
      sum += in[3 * h * d.D + d.D + d.qk + i];
    dkvd[int64_t(row) * d.kvDownWidth() + d.kvLora + i] = sum;
  }
}

/// One thread per (row, piece): the rotation's transpose, then the
/// de-interleaving's, in place.
__global__ void ropeBackwardKernel(int64_t T, Rotary r, float *x,
                                   int64_t stride, int heads,
                                   int64_t headStride) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= T * heads)
    return;
  const int row = int(idx / heads), h = int(idx % heads);
  float *g = x + row * stride + h * headStride;
  float u[2 * kMaxPairs];
  for (int i = 0; i < r.half; ++i) {
    float c, s;
    r.cosSin(row, i, c, s);
    u[2 * i] = g[i] * c + g[r.half + i] * s;
    u[2 * i + 1] = g[r.half + i] * c - g[i] * s;
  }
  for (int i = 0; i < 2 * r.half; ++i)
    g[i] = u[i];
}

/// One thread per (row, piece): de-interleave, rotate, in place.
__global__ void ropeKernel(int64_t T, Rotary r, float *x, int64_t stride,
                           int heads, int64_t headStride) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= T * heads)
    return;
  const int row = int(idx / heads), h = int(idx % heads);
  float *g = x + row * stride + h * headStride;
  float u[2 * kMaxPairs];
  for (int i = 0; i < 2 * r.half; ++i)
    u[i] = r.rotated(row, i, g);
  for (int i = 0; i < 2 * r.half; ++i)
    g[i] = u[i];
}

} // namespace

void Kernels::mlaAssemble(const MlaShape &s, const Tokens &t, const float *q,
                          const float *kvu, const float *kvd, float *qkv) {
  const int64_t T = t.tokens(), n = T * 3 * s.heads * s.coreHeadDim();
  if (n == 0)
    return;
  assembleKernel<<<blocksFor(n), 256, 0, stream()>>>(
      T, dimsOf(s), rotaryOf(s, t), q, kvu, kvd, qkv);
  launched("MLA assemble");
}

void Kernels::mlaGatherGradients(const MlaShape &s, const Tokens &t,
                                 const float *dqkv, float *dq, float *dkvu,
                                 float *dkvd) {
  const int64_t T = t.tokens(),
                n = T * (s.queryWidth() + s.kvUpWidth() + s.posEmbDim);
  if (n == 0)
    return;
  gatherKernel<<<blocksFor(n), 256, 0, stream()>>>(T, dimsOf(s), dqkv, dq, dkvu,
                                                   dkvd);
  launched("MLA gradients");
}

void Kernels::mlaRope(const MlaShape &s, const Tokens &t, float *x,
                      int64_t stride, int64_t heads, int64_t headStride) {
  const int64_t T = t.tokens();
  if (T * heads == 0)
    return;
  ropeKernel<<<blocksFor(T * heads), 256, 0, stream()>>>(
      T, rotaryOf(s, t), x, stride, int(heads), headStride);
  launched("MLA rope");
}

void Kernels::mlaRopeBackward(const MlaShape &s, const Tokens &t, float *x,
                              int64_t stride, int64_t heads,
                              int64_t headStride) {
  const int64_t T = t.tokens();
  if (T * heads == 0)
    return;
  ropeBackwardKernel<<<blocksFor(T * heads), 256, 0, stream()>>>(
      T, rotaryOf(s, t), x, stride, int(heads), headStride);
  launched("MLA rope backward");
}

} // namespace hypipe::rt::cuda
