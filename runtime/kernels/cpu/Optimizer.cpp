//===- Optimizer.cpp - AdamW and the gradient norm on the CPU -------------===//
//
// Elementwise over a rank's flat buffers, over the threads. The squared
// norm is summed in blocks of a fixed size and the blocks in order, so the
// result does not depend on the thread count.
//
//===----------------------------------------------------------------------===//

#include "runtime/kernels/cpu/Optimizer.h"

#include <omp.h>

#include <cmath>
#include <utility>
#include <vector>

namespace hypipe::rt::cpu {

namespace {
constexpr int64_t kNormBlock = 1 << 14;
/// Below this many elements (a stage's whole list of segments, 32 MiB of
/// float gradients) the work stays on the calling thread. Vectorised, AdamW
/// and the norm are bound by memory, and in a training process the second
/// thread did not pay for waking it (OMP_WAIT_POLICY=passive; measured in
/// bench/results/train.md). Larger stages, on machines whose one core cannot
/// use all of the memory bandwidth, split.
constexpr int64_t kParallelMin = 1 << 23;

/// The element range [from, to) of the concatenated segments, each part with
/// its own segment: `body(segment, begin, end)` in buffer indices.
template <typename Body>
void forEachPart(const std::vector<ParamSegment> &segments, int64_t from,
                 int64_t to, Body body) {
  int64_t at = 0;
  for (const ParamSegment &seg : segments) {
    const int64_t len = seg.end - seg.begin;
    const int64_t lo = std::max(from, at), hi = std::min(to, at + len);
    if (lo < hi)
      body(seg, seg.begin + (lo - at), seg.begin + (hi - at));
    at += len;
    if (at >= to)
      return;
  }
}

int64_t totalLength(const std::vector<ParamSegment> &segments) {
  int64_t n = 0;
  for (const ParamSegment &seg : segments)
    n += seg.end - seg.begin;
  return n;
}

} // namespace

void adamwUpdate(const AdamWStep &s, const std::vector<ParamSegment> &segments,
                 float *w, const float *g, float *m, float *v,
                 int64_t momentBase) {
  // In float, as PyTorch's AdamW updates fp32 parameters (and so that the
  // loop vectorises); the constants are rounded once.
  const float b1 = float(s.beta1), b2 = float(s.beta2), c1 = float(1 / s.c1),
              c2 = float(1 / s.c2), eps = float(s.eps), lr = float(s.lr),
              clip = float(s.clipScale);
  auto update = [&](const ParamSegment &seg, int64_t begin, int64_t end) {
    const float decay = seg.decay ? s.decay : 1.0f;
    float *wp = w + begin, *mp = m + (begin - momentBase),
          *vp = v + (begin - momentBase);
    const float *gp = g + begin;
#pragma omp simd
    for (int64_t i = 0; i < end - begin; ++i) {
      const float gi = gp[i] * clip;
      mp[i] = b1 * mp[i] + (1 - b1) * gi;
      vp[i] = b2 * vp[i] + (1 - b2) * gi * gi;
      const float step = (mp[i] * c1) / (std::sqrt(vp[i] * c2) + eps);
      wp[i] = wp[i] * decay - lr * step;
    }
  };
  const int64_t total = totalLength(segments);
  // One parallel region for the whole buffer, each thread a contiguous
  // share of it across parameters.
#pragma omp parallel if (total >= kParallelMin)
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    forEachPart(segments, total * t / threads, total * (t + 1) / threads,
                update);
  }
}

double sumOfSquares(const float *x, const std::vector<ParamSegment> &segments,
                    double start) {
  // The blocks of every segment, in order: the sum's order is theirs, at
  // any thread count.
  thread_local std::vector<std::pair<int64_t, int64_t>> blocks;
  thread_local std::vector<double> partial;
  blocks.clear();
  int64_t total = 0;
  for (const ParamSegment &seg : segments) {
    for (int64_t b = seg.begin; b < seg.end; b += kNormBlock)
      blocks.push_back({b, std::min(seg.end, b + kNormBlock)});
    total += seg.end - seg.begin;
  }
  partial.assign(blocks.size(), 0.0);
  const auto *block = blocks.data();
  double *part = partial.data();
  const int64_t n = int64_t(blocks.size());
#pragma omp parallel for schedule(static) if (total >= kParallelMin)
  for (int64_t b = 0; b < n; ++b) {
    double sq = 0;
#pragma omp simd reduction(+ : sq)
    for (int64_t i = block[b].first; i < block[b].second; ++i)
      sq += double(x[i]) * x[i];
    part[b] = sq;
  }
  double sq = start;
  for (int64_t b = 0; b < n; ++b)
    sq += part[b];
  return sq;
}

} // namespace hypipe::rt::cpu
