//===- Moe.cu - dropless mixture of experts on the GPU --------------------===//
//
// The CPU kernel's routing (runtime/kernels/cpu/Moe.cpp): softmax router,
// top-k with ties to the lower index, weights renormalised over the chosen
// experts, Switch load-balancing loss. Routing runs on the device; the
// expert assignment comes back to the host, which groups the routed rows by
// expert in token order (the dispatch sizes a dropless MoE needs on the host
// anyway, as in Megatron), and every expert runs its two cuBLAS GEMMs over
// its contiguous rows.
//
//===----------------------------------------------------------------------===//

#include "core/model/BufferLayouts.h"
#include "core/model/MoeCapacity.h"
#include "runtime/kernels/cuda/Primitives.cuh"
#include "runtime/kernels/recipes/Moe.h"

#include <cfloat>
#include <cstring>
#include <cuda_bf16.h>
#include <vector>

namespace hypipe::rt::cuda {
namespace {

/// One thread per token: softmax, top-k (ties to the lower index), weights.
/// A NaN or infinite logit is recorded in `routerCheck` (the first thread to
/// find one writes it), which the trainer reads once a step: no wait here.
__global__ void routeKernel(int64_t T, int E, int k, const float *logits,
                            float *probs, int32_t *topIdx, float *topW,
                            RouterCheck *routerCheck) {
  int64_t tok = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (tok >= T)
    return;
  const float *l = logits + tok * E;
  float *pr = probs + tok * E;
  float mx = -FLT_MAX;
  int nonFinite = -1;
  for (int e = 0; e < E; ++e) {
    if (!isfinite(l[e]))
      nonFinite = e;
    mx = fmaxf(mx, l[e]);
  }
  if (nonFinite >= 0 && atomicExch(&routerCheck->nonFinite, 1) == 0)
    routerCheck->logit = l[nonFinite];
  double sum = 0;
  for (int e = 0; e < E; ++e)
    sum += exp(double(l[e] - mx));
  for (int e = 0; e < E; ++e)
    pr[e] = float(exp(double(l[e] - mx)) / sum);
  double z = 0;
  unsigned long long taken = 0; // E <= 64 (checked on the host)
  for (int j = 0; j < k; ++j) {
    int best = -1;
    for (int e = 0; e < E; ++e)
      if (!(taken >> e & 1ull) && (best < 0 || pr[e] > pr[best]))
        best = e;
    taken |= 1ull << best;
    topIdx[tok * k + j] = best;
    z += pr[best];
  }
  for (int j = 0; j < k; ++j)
    topW[tok * k + j] = float(pr[topIdx[tok * k + j]] / z);
}

/// Held row r's input from its token's normed input (`rowMap` and `xr`
/// from the first held row; every held row is a kept choice's).
__global__ void gatherRowsKernel(int64_t hidden, int k, const int32_t *rowMap,
                                 const float *xn, float *xr) {
  const int64_t r = blockIdx.x;
  if (rowMap[r] < 0)
    return;
  const int64_t tok = rowMap[r] / k;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x)
    xr[r * hidden + i] = xn[tok * hidden + i];
}

/// Each slot's row among the R rows of `rowMap` (from the first held row
/// when it starts there: numbered from it).
__global__ void slotRowKernel(int64_t R, const int32_t *rowMap,
                              int32_t *slotRow) {
  int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r < R && rowMap[r] >= 0)
    slotRow[rowMap[r]] = int32_t(r);
}

/// y = x + sum_j w_j y_j per token (x null: the weighted sum alone), over
/// the held rows [from, to) (`yr` from row `from` on; a dropped choice's
/// weight is 0, another rank's expert's output is in the group's sum); with
/// `bf16`, the weighted sum is rounded, then the sum with the residual
/// (cpu::moeCombine's order).
__global__ void combineKernel(int64_t hidden, int k, const float *x,
                              const float *yr, const int32_t *slotRow,
                              const float *topW, float *y, bool bf16,
                              int64_t from, int64_t to) {
  const int64_t tok = blockIdx.x;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float xi = x ? x[tok * hidden + i] : 0.0f;
    float acc = bf16 ? 0.0f : xi;
    for (int j = 0; j < k; ++j) {
      const int64_t r = slotRow[tok * k + j];
      if (r >= from && r < to)
        acc += topW[tok * k + j] * yr[(r - from) * hidden + i];
    }
    if (bf16)
      acc = __bfloat162float(
          __float2bfloat16_rn(xi + __bfloat162float(__float2bfloat16_rn(acc))));
    y[tok * hidden + i] = acc;
  }
}

/// Held row r (`rowMap`, `yr` and `dyr` from the first held row): dyr = w
/// dy[tok], dTopW[slot] = <dy[tok], yr>.
__global__ void rowGradKernel(int64_t hidden, int k, const int32_t *rowMap,
                              const float *topW, const float *dy,
                              const float *yr, float *dyr, float *dTopW) {
  const int64_t r = blockIdx.x, slot = rowMap[r], tok = slot / k;
  if (slot < 0)
    return; // past the kept rows (the whole block)
  const float w = topW[slot];
  float dot = 0;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float g = dy[tok * hidden + i];
    dyr[r * hidden + i] = w * g;
    dot += g * yr[r * hidden + i];
  }
  dot = blockSum(dot);
  if (threadIdx.x == 0)
    dTopW[slot] = dot;
}

/// dxn[tok] = sum of its held rows' input gradients (`slotRow` numbered
/// from the first held row, -1 for the others).
__global__ void scatterRowsKernel(int64_t hidden, int k, const int32_t *slotRow,
                                  const float *dxr, float *dxn) {
  const int64_t tok = blockIdx.x;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    float acc = 0;
    for (int j = 0; j < k; ++j)
      if (slotRow[tok * k + j] >= 0)
        acc += dxr[int64_t(slotRow[tok * k + j]) * hidden + i];
    dxn[tok * hidden + i] = acc;
  }
}

/// Renormalisation, load-balancing loss and softmax backward, per token.
/// `auxCoeff` is d(objective)/d(aux loss) times the loss's coefficient.
__global__ void routerGradKernel(int64_t T, int64_t perReplica, int E, int k,
                                 const float *probs, const int32_t *topIdx,
                                 const float *topW, const float *dTopW,
                                 const int32_t *routedOfReplicas,
                                 double auxCoeff, float *dlogits) {
  int64_t tok = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (tok >= T)
    return;
  // The token's replica's counts (MoeShape::groupReplicas), k times its
  // real tokens; a padding row (past them) has no gradient.
  const int64_t replica = tok / perReplica;
  const int32_t *routed = routedOfReplicas + replica * E;
  const float *pr = probs + tok * E;
  float *dl = dlogits + tok * E;
  int64_t real = 0;
  for (int e = 0; e < E; ++e)
    real += routed[e];
  real /= k;
  if (tok - replica * perReplica >= real) {
    for (int e = 0; e < E; ++e)
      dl[e] = 0.0f;
    return;
  }
  const double auxScale =
      auxCoeff * double(E) / (double(real) * double(real) * double(k));
  double z = 0, wdw = 0;
  for (int j = 0; j < k; ++j) {
    z += pr[topIdx[tok * k + j]];
    wdw += double(topW[tok * k + j]) * dTopW[tok * k + j];
  }
  for (int e = 0; e < E; ++e)
    dl[e] = float(auxScale * routed[e]);
  for (int j = 0; j < k; ++j)
    dl[topIdx[tok * k + j]] += float((dTopW[tok * k + j] - wdw) / z);
  double dot = 0;
  for (int e = 0; e < E; ++e)
    dot += double(dl[e]) * pr[e];
  for (int e = 0; e < E; ++e)
    dl[e] = pr[e] * (dl[e] - float(dot));
}

template <typename T> std::vector<T> download(const T *src, int64_t n) {
  std::vector<T> out(n);
  if (n)
    check(cudaMemcpyAsync(out.data(), src, sizeof(T) * n,
                          cudaMemcpyDeviceToHost, stream()),
          "reading the expert assignment");
  synchronize();
  return out;
}

template <typename T> void upload(T *dst, const std::vector<T> &src) {
  if (src.empty())
    return;
  check(cudaMemcpyAsync(dst, src.data(), sizeof(T) * src.size(),
                        cudaMemcpyHostToDevice, stream()),
        "writing the dispatch");
  synchronize(); // src is a temporary
}

} // namespace

float Kernels::moeRoute(const MoeShape &s, const TokenShape &t,
                        const float *logits, MoeSaved &m, int32_t *slotRow,
                        std::vector<int64_t> &off, RouterCheck *routerCheck,
                        float *scratch) const {
  const int64_t T = t.tokens();
  const int64_t E = s.experts, k = s.topk, Hd = s.hidden;
  if (E > 64)
    throw CudaError("error: the CUDA MoE router takes at most 64 experts");
  // Each replica's routing statistics (one replica but on an expert grid
  // over data-parallel ones: MoeShape::groupReplicas), as the CPU's.
  const int64_t replicas = s.groupReplicas, perReplica = T / replicas;
  float *probSum = scratch; // [replicas, E]
  routeKernel<<<blocksFor(T, 128), 128, 0, stream()>>>(
      T, int(E), int(k), logits, m.probs, m.topIdx, m.topW, routerCheck);
  launched("moe routing");
  // Over each replica's real tokens (its rows' first; MoeShape::realTokens).
  std::vector<int64_t> real(static_cast<size_t>(replicas));
  zero(probSum, replicas * E);
  for (int64_t r = 0; r < replicas; ++r) {
    real[size_t(r)] = s.realTokens(t, r);
    columnDot(real[size_t(r)], E, m.probs + r * perReplica * E, E, nullptr, 0,
              nullptr, 0, probSum + r * E);
  }

  // Group the routed rows by expert, in token order, on the host: the
  // choices within each expert's capacity (all of them, dropless; the same
  // rule as the CPU's, core/model/MoeCapacity.h), the rows past the kept
  // ones -1. The load-balancing loss counts every real token's choices.
  std::vector<int32_t> top = download(m.topIdx, T * k);
  std::vector<float> pe = download(probSum, replicas * E);
  std::vector<float> weights;
  if (s.capacityFactor > 0)
    weights = download(m.topW, T * k);
  thread_local std::vector<uint8_t> kept;
  keepWithinCapacity(s, t, top.data(), weights.data(), kept);
  std::vector<int32_t> counts(E, 0), routed(replicas * E, 0), rowMap(T * k, -1);
  for (int64_t slot = 0; slot < T * k; ++slot) {
    const int64_t r = slot / (perReplica * k);
    if (slot / k - r * perReplica < real[size_t(r)])
      ++routed[r * E + top[slot]];
    counts[top[slot]] += kept[size_t(slot)];
  }
  expertOffsets(s, counts.data(), off);
  recipes::holdRowsOf(m, off);
  std::vector<int64_t> fill(off);
  for (int64_t slot = 0; slot < T * k; ++slot)
    if (kept[size_t(slot)])
      rowMap[fill[top[slot]]++] = int32_t(slot);
  // Each replica's load-balancing loss; the layer's is their mean. m.aux
  // follows m.counts: one upload (one wait) for both, each replica's loss
  // a float in an int32 slot after the counts.
  double aux = 0;
  for (int64_t r = 0; r < replicas; ++r) {
    double mine = 0;
    for (int64_t e = 0; e < E; ++e)
      mine += double(pe[r * E + e]) * routed[r * E + e];
    const double n = double(real[size_t(r)]);
    mine =
        n > 0 ? mine * (s.auxLossCoeff * double(E) / (n * n * double(k))) : 0.0;
    const float replicaLoss = float(mine);
    counts.push_back(0);
    std::memcpy(&counts.back(), &replicaLoss, sizeof replicaLoss);
    aux += mine;
  }
  const float auxLoss = float(aux / double(replicas));
  upload(m.counts, counts);
  upload(m.routed, routed);
  upload(m.rowMap, rowMap);

  if (m.heldRows() > 0) {
    gatherRowsKernel<<<unsigned(m.heldRows()), 128, 0, stream()>>>(
        Hd, int(k), m.rowMap + m.rowFrom, m.xn, m.xr);
    launched("moe dispatch");
  }
  check(cudaMemsetAsync(slotRow, 0xff, sizeof(int32_t) * T * k, stream()),
        "clearing the slots' rows");
  slotRowKernel<<<blocksFor(T * k), 256, 0, stream()>>>(T * k, m.rowMap,
                                                        slotRow);
  launched("moe slots");
  return auxLoss;
}

void Kernels::moeCombine(const MoeShape &s, int64_t T, const MoeSaved &m,
                         const int32_t *slotRow, const float *x,
                         float *y) const {
  combineKernel<<<unsigned(T), 128, 0, stream()>>>(
      s.hidden, int(s.topk), x, m.yr, slotRow, m.topW, y,
      x && activations == DType::BF16, m.rowFrom, m.rowTo);
  launched("moe combine");
}

void Kernels::moeOffsets(const MoeShape &s, MoeSaved &m,
                         std::vector<int64_t> &off) const {
  expertOffsets(s, download(m.counts, s.experts).data(), off);
  recipes::holdRowsOf(m, off);
}

void Kernels::moeRowMap(const MoeSaved &m, int64_t rows,
                        std::vector<int32_t> &rowMap) const {
  rowMap = download(m.rowMap, rows);
}

void Kernels::moeCombineBackward(const MoeShape &s, int64_t T,
                                 const MoeSaved &m, const float *dy,
                                 float *dTopW) const {
  // A dropped choice's weight gets no gradient (no row writes it), nor
  // does one of another rank's expert (a row not held).
  zero(dTopW, T * s.topk);
  if (m.heldRows() == 0)
    return;
  rowGradKernel<<<unsigned(m.heldRows()), 128, 0, stream()>>>(
      s.hidden, int(s.topk), m.rowMap + m.rowFrom, m.topW, dy, m.yr, m.dyr,
      dTopW);
  launched("moe combine backward");
}

void Kernels::moeGatherRowGradients(const MoeShape &s, int64_t T,
                                    const MoeSaved &m, const float *dxr,
                                    float *dxn, int32_t *slotRow) const {
  check(cudaMemsetAsync(slotRow, 0xff, sizeof(int32_t) * T * s.topk, stream()),
        "clearing the slots' rows");
  if (m.heldRows() > 0) {
    slotRowKernel<<<blocksFor(m.heldRows()), 256, 0, stream()>>>(
        m.heldRows(), m.rowMap + m.rowFrom, slotRow);
    launched("moe slots");
  }
  scatterRowsKernel<<<unsigned(T), 128, 0, stream()>>>(s.hidden, int(s.topk),
                                                       slotRow, dxr, dxn);
  launched("moe dispatch backward");
}

void Kernels::moeRouterBackward(const MoeShape &s, int64_t T, const MoeSaved &m,
                                const float *dTopW, float lossScale,
                                float *dlogits) const {
  const int64_t E = s.experts, k = s.topk;
  // Each replica's tokens against its own counts (MoeShape::groupReplicas).
  const int64_t perReplica = T / s.groupReplicas;
  routerGradKernel<<<blocksFor(T, 128), 128, 0, stream()>>>(
      T, perReplica, int(E), int(k), m.probs, m.topIdx, m.topW, dTopW, m.routed,
      double(lossScale) * s.auxLossCoeff, dlogits);
  launched("moe router backward");
}

} // namespace hypipe::rt::cuda
