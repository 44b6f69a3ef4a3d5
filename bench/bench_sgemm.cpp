//===- bench_sgemm.cpp - the machine's OpenBLAS sgemm rate ----------------===//
//
// The yardstick for bench/run_train.sh: GFLOP/s of a square fp32 GEMM with
// the given thread count (best of five batches). Usage: bench-sgemm THREADS [N]
// OpenBLAS's own threads, with the core type hypipe-run uses
// (cpu::setOpenBlasEnvironment: the user's, or the one it prefers);
// `bench-sgemm --core` prints the core, so that bench scripts give a peer
// the same.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cpu/Primitives.h"

#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char **argv) {
  if (hypipe::rt::cpu::setOpenBlasEnvironment())
    execv("/proc/self/exe", argv);
  if (argc > 1 && std::strcmp(argv[1], "--core") == 0) {
    const char *core = std::getenv("OPENBLAS_CORETYPE");
    std::printf("%s\n", core ? core : openblas_get_corename());
    return 0;
  }
  int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  int n = argc > 2 ? std::atoi(argv[2]) : 1024;
  openblas_set_num_threads(threads);
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f),
      c(size_t(n) * n);
  auto run = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f,
                a.data(), n, b.data(), n, 0.0f, c.data(), n);
  };
  run();
  // The best of five batches: the machine's rate, not its noise (a shared
  // VM's rate moves by a third from one second to the next).
  const int reps = 10;
  double best = 0;
  for (int batch = 0; batch < 5; ++batch) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i)
      run();
    double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    best = std::max(best, 2.0 * n * n * double(n) * reps / s / 1e9);
  }
  std::printf("%.1f\n", best);
  return c[0] == 0.5f * 0.25f * n ? 0 : 1;
}
