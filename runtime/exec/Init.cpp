//===- Init.cpp - parameter initialisation from (seed, name) --------------===//

#include "runtime/exec/Init.h"

#include "core/model/ParameterNames.h"

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

/// A counter-based stream: value i is a pure function of (key, i).
struct Stream {
  uint64_t key, counter = 0;
  double uniform() { // in (0, 1)
    return unitInterval(splitmix64(key ^ splitmix64(counter++)));
  }
  double normal() { // one value per pair of uniforms
    double u1 = uniform(), u2 = uniform();
    return standardNormal(u1, u2);
  }
};

} // namespace

void initParameter(const ParamEntry &p, int64_t seed, float *dst) {
  // Keyed by the name a parameter had when its stream was fixed, so a
  // seed draws the same weights across hypipe versions.
  Stream s{splitmix64(uint64_t(seed)) ^ fnv1a(legacyParameterName(p.name))};
  if (p.init == "normal") {
    for (int64_t i = 0; i < p.numel; ++i)
      dst[i] = float(p.initA * s.normal());
  } else if (p.init == "uniform") {
    for (int64_t i = 0; i < p.numel; ++i)
      dst[i] = float(p.initA + (p.initB - p.initA) * s.uniform());
  } else if (p.init == "ones") {
    for (int64_t i = 0; i < p.numel; ++i)
      dst[i] = 1.0f;
  } else if (p.init == "zeros") {
    for (int64_t i = 0; i < p.numel; ++i)
      dst[i] = 0.0f;
  } else if (p.init == "mamba_a_log") {
    // A ~ U[a, b], stored as log A (Mamba-2's A_init_range).
    for (int64_t i = 0; i < p.numel; ++i)
      dst[i] = float(std::log(p.initA + (p.initB - p.initA) * s.uniform()));
  } else if (p.init == "mamba_dt_bias") {
    // dt log-uniform in [dt_min, dt_max], stored as softplus^-1(dt).
    for (int64_t i = 0; i < p.numel; ++i) {
      double dt =
          std::exp(std::log(p.initA) +
                   s.uniform() * (std::log(p.initB) - std::log(p.initA)));
      dt = std::max(dt, 1e-4);
      dst[i] = float(dt + std::log(-std::expm1(-dt)));
    }
  } else {
    throw RuntimeError(fmt::format(
        "error: parameter '{}' has unknown initialisation '{}'\nhelp: "
        "recompile the artifact with this version of hypipe",
        p.name, p.init));
  }
}

} // namespace hypipe::rt
