//===- bench_gdn.cpp - one G layer's forward and backward on the CPU ------===//
//
// Milliseconds of one Gated DeltaNet layer (recipes/Gdn.h on the CPU
// kernels, what hypipe-run runs for a `G`): forward, input gradient and
// weight gradient of one microbatch, the least of `reps` runs after a
// warm-up (a shared machine's noise only adds). bench/run_gdn.sh runs it
// beside PyTorch (bench/fast_gdn.py) on the same sizes and threads.
//
// Usage: bench-gdn THREADS REPS HIDDEN KEY_HEADS VALUE_HEADS KEY_DIM
//                  VALUE_DIM BATCH SEQ
// prints: forward_ms backward_ms (backward: input and weight gradients)
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cpu/Kernels.h"
#include "runtime/kernels/cpu/Primitives.h"
#include "runtime/kernels/recipes/Gdn.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

using namespace hypipe::rt;

int main(int argc, char **argv) {
  if (cpu::setOpenBlasEnvironment())
    execv("/proc/self/exe", argv);
  if (argc != 10) {
    std::fprintf(stderr, "usage: bench-gdn THREADS REPS HIDDEN KEY_HEADS "
                         "VALUE_HEADS KEY_DIM VALUE_DIM BATCH SEQ\n");
    return 2;
  }
  int64_t a[10];
  for (int i = 1; i < 10; ++i) {
    a[i] = std::atoll(argv[i]);
    if (a[i] <= 0) {
      std::fprintf(stderr, "error: argument %d ('%s') must be positive\n", i,
                   argv[i]);
      return 2;
    }
  }
  const GdnShape s{a[3], a[4], a[5], a[6], a[7], 4};
  if (s.valueHeads % s.keyHeads) {
    std::fprintf(stderr, "error: VALUE_HEADS must be a multiple of "
                         "KEY_HEADS\n");
    return 2;
  }
  const TokenShape t{a[8], a[9]};
  cpu::setNumThreads(int(a[1]));
  int64_t params = 0;
  for (const ParamSpec &p : s.params(2))
    params += p.numel();
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t act = t.tokens() * s.hidden;
  std::vector<float> p(static_cast<size_t>(params)),
      x(static_cast<size_t>(act)), dy(static_cast<size_t>(act));
  for (float &e : p)
    e = 0.05f * normal(rng);
  for (std::vector<float> *v : {&x, &dy})
    for (float &e : *v)
      e = normal(rng);
  std::vector<float> saved(static_cast<size_t>(s.savedFloats(t))),
      ws(static_cast<size_t>(s.workspaceFloats(t))),
      y(static_cast<size_t>(act)), dx(static_cast<size_t>(act)),
      g(static_cast<size_t>(params));
  const cpu::Kernels k{{DType::F32}};
  recipes::Gdn<cpu::Kernels> layer{k};
  using clock = std::chrono::steady_clock;
  auto ms = [](clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  double forward = 1e30, backward = 1e30;
  for (int64_t r = 0; r <= a[2]; ++r) { // run 0 warms up
    std::fill(g.begin(), g.end(), 0.0f);
    const auto t0 = clock::now();
    layer.forward(s, t, p.data(), x.data(), y.data(), saved.data(), ws.data());
    const auto t1 = clock::now();
    layer.backwardInput(s, t, p.data(), g.data(), saved.data(), dy.data(),
                        dx.data(), ws.data());
    layer.backwardWeight(s, t, saved.data(), g.data());
    const auto t2 = clock::now();
    if (r > 0) {
      forward = std::min(forward, ms(t0, t1));
      backward = std::min(backward, ms(t1, t2));
    }
  }
  std::printf("%.3f %.3f\n", forward, backward);
  // Something the compiler cannot drop, and a finite result.
  return std::isfinite(y[0] + dx[0] + g[0]) ? 0 : 1;
}
