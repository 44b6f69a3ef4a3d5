//===- Primitives.cpp - GEMM, norms and activations on the CPU ------------===//

#include "runtime/kernels/cpu/Primitives.h"
#include "core/numeric/Bf16.h"
#include "runtime/kernels/cpu/Profile.h"
#include "runtime/kernels/recipes/Linear.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace hypipe::rt::cpu {

void roundActivations(DType activations, float *p, int64_t n) {
  if (activations != DType::BF16 || n <= 0)
    return;
#pragma omp parallel for simd schedule(static) if (n > (int64_t(1) << 15))
  for (int64_t i = 0; i < n; ++i)
    p[i] = bf16::round(p[i]);
}

namespace {
/// A GEMM below this many multiply-adds is one call on the calling thread:
/// a piece would cost about what waking the other threads does.
constexpr int64_t kGemmSplitMin = int64_t(1) << 22;
/// Rows (and columns) of C a tile of a split GEMM has at least, about.
constexpr int64_t kGemmPiece = 512;
} // namespace

void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
          float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
          float beta, float *C, int64_t ldc) {
  if (M == 0 || N == 0)
    return;
  if (K == 0) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j)
        C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
    return;
  }
  ProfileScope scope(KernelClass::Gemm);
  const auto call = [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    // Rows [m0, m1) and columns [n0, n1) of C: op(A)'s rows, op(B)'s columns.
    const float *a = transA ? A + m0 : A + m0 * lda;
    const float *b = transB ? B + n0 * ldb : B + n0;
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                transB ? CblasTrans : CblasNoTrans, int(m1 - m0), int(n1 - n0),
                int(K), alpha, a, int(lda), b, int(ldb), beta,
                C + m0 * ldc + n0, int(ldc));
  };
  // OpenBLAS runs on one thread (setNumThreads). A large GEMM is cut into
  // tiles of C fixed by its shape alone -- each side cut into pieces of at
  // least 512 rows (columns), at least two tiles, an even number of them
  // (two threads get equal shares) -- and the tiles are shared over the
  // OpenMP threads, or run in turn inside the kernels' own parallel loops.
  // Every element of C comes from the same single-threaded tile at any
  // thread count, so the bits do not depend on it; a big GEMM has many
  // tiles (a 4096 x 4096 product 64), so many threads share it. (Tiles cost
  // about 1% of a whole GEMM on one thread on the bench models; OpenBLAS's
  // own 2-thread split was no faster.)
  int64_t rows = std::max<int64_t>(1, M / kGemmPiece),
          cols = std::max<int64_t>(1, N / kGemmPiece);
  if (rows * cols == 1)
    (M >= N ? rows : cols) = 2;
  if (rows * cols % 2 == 1)
    ++(M >= N ? rows : cols);
  if (M * N * K < kGemmSplitMin || std::max(M, N) < 128) {
    call(0, M, 0, N);
    return;
  }
  // The k-th of `parts` cuts of `extent`, on a 16-row (column) boundary.
  const auto cut = [](int64_t extent, int64_t parts, int64_t k) {
    return k == parts ? extent : extent * k / parts / 16 * 16;
  };
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (int64_t q = 0; q < rows * cols; ++q) {
    const int64_t i = q / cols, j = q % cols;
    call(cut(M, rows, i), cut(M, rows, i + 1), cut(N, cols, j),
         cut(N, cols, j + 1));
  }
}

// The GEMM is fp32 in either precision: exact on bf16 values, the caller
// rounds what it writes.
void linearForward(DType, int64_t T, int64_t in, int64_t out, const float *x,
                   const float *W, float *y) {
  recipes::linearForward(gemm, T, in, out, x, W, y);
}

void linearBackwardInput(DType, int64_t T, int64_t in, int64_t out,
                         const float *dy, const float *W, float *dx,
                         bool accumulate) {
  recipes::linearBackwardInput(gemm, T, in, out, dy, W, dx, accumulate);
}

void linearBackwardWeight(DType, int64_t T, int64_t in, int64_t out,
                          const float *dy, const float *x, float *dW) {
  recipes::linearBackwardWeight(gemm, T, in, out, dy, x, dW);
}

void rmsnormForward(int64_t T, int64_t n, const float *x, const float *w,
                    float *y, float *rstd) {
  ProfileScope scope(KernelClass::Norm);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    const float *xr = x + t * n;
    float *yr = y + t * n;
    double ss = 0;
#pragma omp simd reduction(+ : ss)
    for (int64_t i = 0; i < n; ++i)
      ss += double(xr[i]) * xr[i];
    float r = float(1.0 / std::sqrt(ss / double(n) + kNormEps));
    rstd[t] = r;
    for (int64_t i = 0; i < n; ++i)
      yr[i] = xr[i] * r * w[i];
  }
}

void rmsnormBackward(int64_t T, int64_t n, const float *x, const float *w,
                     const float *rstd, const float *dy, float *dx, float *dw,
                     bool accumulate) {
  ProfileScope scope(KernelClass::Norm);
  // y_i = x_i r w_i, r = (mean x^2 + eps)^-1/2:
  // dx_i = r (w_i dy_i - x_i r^2 mean_j(w_j dy_j x_j)).
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    const float *xr = x + t * n, *dyr = dy + t * n;
    float *dxr = dx + t * n;
    float r = rstd[t];
    double dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t i = 0; i < n; ++i)
      dot += double(w[i]) * dyr[i] * xr[i];
    float c = float(dot / double(n)) * r * r;
    for (int64_t i = 0; i < n; ++i) {
      float g = r * (w[i] * dyr[i] - xr[i] * c);
      dxr[i] = accumulate ? dxr[i] + g : g;
    }
  }
  // Weight gradient: a column reduction. Threads take blocks of columns and
  // each column adds its rows in order, so the sum never depends on the
  // thread count.
  constexpr int64_t kColumns = 64;
#pragma omp parallel for schedule(static)
  for (int64_t i0 = 0; i0 < n; i0 += kColumns) {
    const int64_t i1 = std::min(n, i0 + kColumns);
    for (int64_t t = 0; t < T; ++t) {
      const float *xr = x + t * n, *dyr = dy + t * n;
      const float r = rstd[t];
#pragma omp simd
      for (int64_t i = i0; i < i1; ++i)
        dw[i] += dyr[i] * xr[i] * r;
    }
  }
}

namespace {
constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
} // namespace

void activationForward(Activation act, int64_t T, int64_t ffn, const float *h,
                       float *a) {
  ProfileScope scope(KernelClass::Elementwise);
  switch (act) {
  case Activation::SquaredRelu:
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < T * ffn; ++i) {
      float r = std::max(h[i], 0.0f);
      a[i] = r * r;
    }
    return;
  case Activation::Gelu:
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < T * ffn; ++i)
      a[i] = 0.5f * h[i] * (1.0f + std::erf(h[i] * kInvSqrt2));
    return;
  case Activation::Swiglu:
    // fc1 output rows are [gate | up], Megatron's chunk order.
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T; ++t) {
      const float *g = h + t * 2 * ffn, *u = g + ffn;
      float *ar = a + t * ffn;
      for (int64_t i = 0; i < ffn; ++i)
        ar[i] = silu(g[i]) * u[i];
    }
    return;
  }
}

void activationBackward(Activation act, int64_t T, int64_t ffn, const float *h,
                        const float *da, float *dh) {
  ProfileScope scope(KernelClass::Elementwise);
  switch (act) {
  case Activation::SquaredRelu:
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < T * ffn; ++i)
      dh[i] = 2.0f * std::max(h[i], 0.0f) * da[i];
    return;
  case Activation::Gelu:
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < T * ffn; ++i) {
      float x = h[i];
      float cdf = 0.5f * (1.0f + std::erf(x * kInvSqrt2));
      float pdf = kInvSqrt2Pi * std::exp(-0.5f * x * x);
      dh[i] = (cdf + x * pdf) * da[i];
    }
    return;
  case Activation::Swiglu:
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T; ++t) {
      const float *g = h + t * 2 * ffn, *u = g + ffn;
      const float *dar = da + t * ffn;
      float *dg = dh + t * 2 * ffn, *du = dg + ffn;
      for (int64_t i = 0; i < ffn; ++i) {
        dg[i] = dar[i] * u[i] * siluGrad(g[i]);
        du[i] = dar[i] * silu(g[i]);
      }
    }
    return;
  }
}

void addResidual(int64_t n, const float *x, float *y) {
  ProfileScope scope(KernelClass::Elementwise);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    y[i] += x[i];
}

std::string preferredBlasCore() {
  // OpenBLAS's x86-64 cores that predate AVX2; a CPU with AVX2 and FMA seen
  // as one of them was not recognised.
  static const char *const kOlder[] = {
      "Prescott", "Core2",     "Penryn",     "Dunnington", "Nehalem",
      "Atom",     "Katmai",    "Coppermine", "Northwood",  "Banias",
      "Opteron",  "Barcelona", "Bobcat",     "Nano",       "Sandybridge"};
  const std::string seen = openblas_get_corename();
  bool older = false;
  for (const char *name : kOlder)
    older = older || seen == name;
  if (!older || !__builtin_cpu_supports("avx2") ||
      !__builtin_cpu_supports("fma"))
    return "";
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    return "SkylakeX";
  return "Haswell";
}

bool setOpenBlasEnvironment() {
  bool changed = false;
  if (!std::getenv("OPENBLAS_CORETYPE")) {
    const std::string core = preferredBlasCore();
    if (!core.empty()) {
      setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
      changed = true;
    }
  }
  return changed;
}

void setNumThreads(int threads) {
  threads = std::max(threads, 1);
  omp_set_num_threads(threads);
  // The kernels own the threads: OpenBLAS's own pool, called from inside
  // an OpenMP loop, would fight the loop's threads for the cores, so it runs
  // on one thread and gemm() splits the large GEMMs itself (both measured
  // in bench/results/train.md).
  openblas_set_num_threads(1);
}

int numThreads() { return omp_get_max_threads(); }

const float *transposedTaps(int64_t channels, int64_t taps, const float *w) {
  thread_local std::vector<float> wT;
  wT.resize(size_t(taps * channels));
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t k = 0; k < taps; ++k)
      wT[size_t(k * channels + c)] = w[c * taps + k];
  return wT.data();
}

void sequenceStartOfRows(const TokenShape &t, std::vector<int64_t> &first) {
  first.assign(size_t(t.tokens()), 0);
  for (int64_t q = 0; q < t.sequences(); ++q)
    for (int64_t r = t.start(q); r < t.start(q) + t.length(q); ++r)
      first[r] = t.start(q);
}

void rowsAhead(const TokenShape &t, int64_t shift,
               std::vector<int64_t> &ahead) {
  ahead.assign(size_t(t.tokens()), -1);
  for (int64_t q = 0; q < t.sequences(); ++q)
    for (int64_t i = 0; i + shift < t.length(q); ++i)
      ahead[size_t(t.start(q) + i)] = t.start(q) + i + shift;
}

} // namespace hypipe::rt::cpu
