//===- InitTest.cpp - parallel initialisation is the serial stream
//---------===//
//
// initParameter fills large parameters on every OpenMP thread. Its values
// must be the bits of the serial stream hypipe has always drawn (the
// losses of every recorded run start from them): a stateful generator
// written out here, one draw after another, is the reference, and the
// parallel fill must equal it at one thread and at several.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/Init.h"
#include "core/Random.h"
#include "core/model/ParameterNames.h"
#include "runtime/formats/Artifact.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

using namespace hypipe;
using namespace hypipe::rt;

namespace {

/// The serial stream: one counter advanced by every draw, keyed by the seed
/// and the FNV-1a hash of the parameter's (legacy) name.
struct SerialStream {
  uint64_t key, counter = 0;
  double uniform() {
    return unitInterval(splitmix64(key ^ splitmix64(counter++)));
  }
};

std::vector<float> serialInit(const ParamEntry &p, int64_t seed) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : legacyParameterName(p.name))
    h = (h ^ c) * 0x100000001b3ull;
  SerialStream s{splitmix64(uint64_t(seed)) ^ h};
  std::vector<float> out(p.numel);
  for (float &v : out) {
    if (p.init == "normal") {
      double u1 = s.uniform();
      double u2 = s.uniform();
      v = float(p.initA * standardNormal(u1, u2));
    } else if (p.init == "uniform") {
      v = float(p.initA + (p.initB - p.initA) * s.uniform());
    } else if (p.init == "mamba_a_log") {
      v = float(std::log(p.initA + (p.initB - p.initA) * s.uniform()));
    } else if (p.init == "mamba_dt_bias") {
      double u = s.uniform();
      double dt = std::exp(std::log(p.initA) +
                           u * (std::log(p.initB) - std::log(p.initA)));
      dt = std::max(dt, 1e-4);
      v = float(dt + std::log(-std::expm1(-dt)));
    } else {
      v = p.init == "ones" ? 1.0f : 0.0f;
    }
  }
  return out;
}

std::vector<float> parallelInit(const ParamEntry &p, int64_t seed,
                                int threads) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  std::vector<float> out(p.numel, -7.0f);
  initParameter(p, seed, out.data());
  omp_set_num_threads(before);
  return out;
}

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

ParamEntry param(std::string name, int64_t numel, std::string init, double a,
                 double b) {
  ParamEntry p;
  p.name = std::move(name);
  p.shape = {numel};
  p.numel = numel;
  p.init = std::move(init);
  p.initA = a;
  p.initB = b;
  return p;
}

} // namespace

// Every distribution, small (one thread) and large (split among threads, with
// a length no thread count divides evenly), equals the serial stream bit for
// bit at 1, 3 and 8 threads.
TEST(Init, ParallelFillIsTheSerialStream) {
  const std::vector<ParamEntry> params = {
      param("decoder.layers.0.mixer.in_proj.weight", 100003, "normal", 0.02, 0),
      param("embedding.word_embeddings.weight", 777, "normal", 0.02, 0),
      param("decoder.layers.0.mlp.linear_fc1.weight", 65537, "uniform", -0.1,
            0.3),
      param("decoder.layers.0.mixer.A_log", 40961, "mamba_a_log", 1, 16),
      param("decoder.layers.0.mixer.dt_bias", 50001, "mamba_dt_bias", 1e-3,
            0.1),
      param("decoder.layers.0.mixer.D", 70001, "ones", 0, 0),
      param("decoder.layers.0.mixer.conv1d.bias", 33333, "zeros", 0, 0),
  };
  for (const ParamEntry &p : params) {
    const std::vector<float> reference = serialInit(p, 1234);
    for (int threads : {1, 3, 8})
      EXPECT_TRUE(sameBits(parallelInit(p, 1234, threads), reference))
          << p.name << " (" << p.init << ") at " << threads << " threads";
  }
}

// The stream is keyed by the seed: another seed draws other values.
TEST(Init, SeedChangesTheDraws) {
  const ParamEntry p = param("output_layer.weight", 50000, "normal", 0.02, 0);
  EXPECT_FALSE(sameBits(parallelInit(p, 1, 4), parallelInit(p, 2, 4)));
}
