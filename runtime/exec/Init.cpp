//===- Init.cpp - parameter initialisation from (seed, name) --------------===//

#include "runtime/exec/Init.h"

#include "core/model/ParameterNames.h"
#include "core/model/TensorParallel.h"

#include <fmt/format.h>

#include <cmath>

namespace hypipe::rt {

namespace {

uint64_t fnv1a(const std::string &s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s)
    h = (h ^ c) * 0x100000001b3ull;
  return h;
}

/// A counter-based stream: the draw at a counter is a pure function of
/// (key, counter), so element i of a parameter can be computed on any thread
/// without the draws before it. A uniform element i draws counter i; a normal
/// one counters 2i and 2i + 1 (one value per pair, Box-Muller).
struct Stream {
  uint64_t key;
  double uniformAt(uint64_t counter) const { // in (0, 1)
    return unitInterval(splitmix64(key ^ splitmix64(counter)));
  }
  double normalAt(uint64_t i) const {
    return standardNormal(uniformAt(2 * i), uniformAt(2 * i + 1));
  }
};

/// Below this many values one thread fills a parameter (a parallel region
/// costs more than it saves).
constexpr int64_t kParallelFrom = int64_t(1) << 15;

/// dst[i] = value(i) for i in [0, n), shared among threads for large n; the
/// values do not depend on the thread count.
template <class Value> void fill(float *dst, int64_t n, Value value) {
#pragma omp parallel for schedule(static) if (n >= kParallelFrom)
  for (int64_t i = 0; i < n; ++i)
    dst[i] = value(uint64_t(i));
}

/// The shard's elements: each run of the whole tensor's values from its
/// global index.
template <class Value>
void fillShard(const ParamEntry &p, int64_t tp, int64_t rank, float *dst,
               Value value) {
  forEachParamShardRun(
      p, tp, rank, [&](int64_t global, int64_t local, int64_t count) {
        fill(dst + local, count,
             [&](uint64_t i) { return value(uint64_t(global) + i); });
      });
}

} // namespace

void initParameter(const ParamEntry &p, int64_t seed, float *dst, int64_t tp,
                   int64_t tpRank) {
  // Keyed by the name a parameter had when its stream was fixed, so a
  // seed draws the same weights across hypipe versions.
  const Stream s{splitmix64(uint64_t(seed)) ^
                 fnv1a(legacyParameterName(p.name))};
  const double a = p.initA, b = p.initB;
  if (p.init == "normal") {
    fillShard(p, tp, tpRank, dst,
              [&](uint64_t i) { return float(a * s.normalAt(i)); });
  } else if (p.init == "uniform") {
    fillShard(p, tp, tpRank, dst,
              [&](uint64_t i) { return float(a + (b - a) * s.uniformAt(i)); });
  } else if (p.init == "ones") {
    fillShard(p, tp, tpRank, dst, [](uint64_t) { return 1.0f; });
  } else if (p.init == "zeros") {
    fillShard(p, tp, tpRank, dst, [](uint64_t) { return 0.0f; });
  } else if (p.init == "mamba_a_log") {
    // A ~ U[a, b], stored as log A (Mamba-2's A_init_range).
    fillShard(p, tp, tpRank, dst, [&](uint64_t i) {
      return float(std::log(a + (b - a) * s.uniformAt(i)));
    });
  } else if (p.init == "mamba_dt_bias") {
    // dt log-uniform in [dt_min, dt_max], stored as softplus^-1(dt).
    fillShard(p, tp, tpRank, dst, [&](uint64_t i) {
      double dt =
          std::exp(std::log(a) + s.uniformAt(i) * (std::log(b) - std::log(a)));
      dt = std::max(dt, 1e-4);
      return float(dt + std::log(-std::expm1(-dt)));
    });
  } else {
    throw RuntimeError(fmt::format(
        "error: parameter '{}' has unknown initialisation '{}'\nhelp: "
        "recompile the artifact with this version of hypipe",
        p.name, p.init));
  }
}

} // namespace hypipe::rt
