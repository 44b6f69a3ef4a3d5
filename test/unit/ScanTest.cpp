//===- ScanTest.cpp - the chunked SSD scan against the recurrence ---------===//
//
// The CPU scan (runtime/kernels/cpu/Scan.cpp) computes Mamba-2's recurrence
//   h_t = exp(dt_t A) h_{t-1} + dt_t x_t B_t^T,  y_t = h_t C_t + D x_t
// in chunks of 64 rows with GEMMs. Here the recurrence is written the plain
// way, one step at a time in double precision, and the chunked scan must
// give its outputs and the gradients of L = sum(y * r), the latter checked
// against central differences of the double recurrence. Shapes cross chunk
// boundaries, end inside a chunk, use several groups, and pack samples that
// start inside a chunk.
//
//===----------------------------------------------------------------------===//

#include "runtime/kernels/cpu/Scan.h"
#include "runtime/kernels/cpu/Primitives.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

using namespace hypipe::rt;
using namespace hypipe::rt::cpu;

namespace {

struct Inputs {
  std::vector<float> xbc, dt, aLog, d;
};

/// The recurrence per (sequence, head), in double.
std::vector<double> recurrence(const MambaShape &s, const TokenShape &t,
                               const std::vector<double> &xbc,
                               const std::vector<double> &dt,
                               const std::vector<double> &aLog,
                               const std::vector<double> &d) {
  const int64_t H = s.heads, P = s.headDim, N = s.state, G = s.groups,
                I = s.inner(), Cc = s.convChannels();
  std::vector<double> y(size_t(t.tokens() * I), 0.0);
  for (int64_t q = 0; q < t.sequences(); ++q)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / G);
      const double A = -std::exp(aLog[h]);
      std::vector<double> st(size_t(P * N), 0.0);
      for (int64_t row = t.start(q); row < t.start(q) + t.length(q); ++row) {
        const double *x = &xbc[row * Cc + h * P];
        const double *B = &xbc[row * Cc + I + g * N];
        const double *C = &xbc[row * Cc + I + G * N + g * N];
        const double step = dt[row * H + h], a = std::exp(step * A);
        for (int64_t i = 0; i < P; ++i) {
          double acc = 0;
          for (int64_t n = 0; n < N; ++n) {
            double &v = st[i * N + n];
            v = a * v + step * x[i] * B[n];
            acc += v * C[n];
          }
          y[row * I + h * P + i] = acc + d[h] * x[i];
        }
      }
    }
  return y;
}

std::vector<double> toDouble(const std::vector<float> &v) {
  return std::vector<double>(v.begin(), v.end());
}

Inputs randomInputs(const MambaShape &s, const TokenShape &t, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f), pos(0.01f, 0.3f),
      logA(0.0f, 1.5f);
  Inputs in;
  in.xbc.resize(size_t(t.tokens() * s.convChannels()));
  in.dt.resize(size_t(t.tokens() * s.heads));
  in.aLog.resize(size_t(s.heads));
  in.d.resize(size_t(s.heads));
  for (float &v : in.xbc)
    v = u(rng);
  for (float &v : in.dt)
    v = pos(rng);
  for (float &v : in.aLog)
    v = logA(rng);
  for (float &v : in.d)
    v = u(rng);
  return in;
}

void checkScan(const MambaShape &s, const TokenShape &t, unsigned seed) {
  const int64_t T = t.tokens(), I = s.inner(), Cc = s.convChannels(),
                H = s.heads;
  Inputs in = randomInputs(s, t, seed);
  std::mt19937 rng(seed + 100);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  std::vector<float> r(size_t(T * I));
  for (float &v : r)
    v = u(rng);

  // Outputs.
  std::vector<float> y(size_t(T * I)),
      states(size_t(s.scanChunks(t) * H * s.headDim * s.state)),
      ws(size_t(scanWorkspaceFloats(s, t)));
  scanForward(s, t, in.xbc.data(), in.dt.data(), in.aLog.data(), in.d.data(),
              y.data(), states.data(), ws.data());
  const std::vector<double> want =
      recurrence(s, t, toDouble(in.xbc), toDouble(in.dt), toDouble(in.aLog),
                 toDouble(in.d));
  double scale = 0;
  for (double v : want)
    scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(y[i], want[i], 1e-5 * scale + 1e-6) << "output " << i;

  // Gradients of L = sum(y * r), against central differences in double.
  std::vector<float> dxbc(size_t(T * Cc), 0.0f), ddt(size_t(T * H)),
      gALog(size_t(H), 0.0f), gD(size_t(H), 0.0f);
  scanBackward(s, t, in.xbc.data(), in.dt.data(), in.aLog.data(), in.d.data(),
               states.data(), r.data(), dxbc.data(), ddt.data(), gALog.data(),
               gD.data(), ws.data());
  std::vector<double> xbc = toDouble(in.xbc), dt = toDouble(in.dt),
                      aLog = toDouble(in.aLog), d = toDouble(in.d);
  auto loss = [&]() {
    std::vector<double> yy = recurrence(s, t, xbc, dt, aLog, d);
    double l = 0;
    for (size_t i = 0; i < yy.size(); ++i)
      l += yy[i] * r[i];
    return l;
  };
  auto numeric = [&](double &v) {
    const double h = 1e-5, keep = v;
    v = keep + h;
    double up = loss();
    v = keep - h;
    double down = loss();
    v = keep;
    return (up - down) / (2 * h);
  };
  auto check = [&](const char *what, std::vector<double> &vals,
                   const std::vector<float> &grads, size_t stride) {
    double worst = 0, largest = 0;
    for (size_t i = 0; i < vals.size(); i += stride) {
      double want = numeric(vals[i]);
      worst = std::max(worst, std::abs(grads[i] - want));
      largest = std::max(largest, std::abs(want));
    }
    EXPECT_LT(worst, 2e-4 * std::max(1.0, largest))
        << what << ": largest gradient " << largest;
  };
  // Every dt, A_log and D; a sample of xbc entries (x, B and C columns).
  check("dt", dt, ddt, 1);
  check("A_log", aLog, gALog, 1);
  check("D", d, gD, 1);
  check("xBC", xbc, dxbc, 7);
}

} // namespace

TEST(ChunkedScan, OneChunkTwoGroups) {
  checkScan(MambaShape{8, 4, 3, 5, 2, 3}, TokenShape{2, 7}, 1);
}

TEST(ChunkedScan, AcrossChunksNotAMultiple) {
  // 150 rows: two whole chunks and a part; the state crosses two
  // boundaries.
  checkScan(MambaShape{8, 2, 4, 6, 1, 4}, TokenShape{1, 150}, 2);
}

TEST(ChunkedScan, SequencesStartingInsideChunks) {
  // Batch 3 of 50: sequences start at rows 50 and 100, inside chunks 0 and
  // 1; three groups of one head.
  checkScan(MambaShape{8, 3, 2, 4, 3, 4}, TokenShape{3, 50}, 3);
}

TEST(ChunkedScan, PackedSamples) {
  // Packed lengths 5, 64, 70, 1, 40: a sample that fills a chunk exactly
  // from a boundary's side, one that crosses two, one of one row.
  static const int32_t cu[] = {0, 5, 69, 139, 140, 180};
  TokenShape t;
  t.cuSeqlens = cu;
  t.numSeqs = 5;
  checkScan(MambaShape{8, 4, 2, 3, 2, 4}, t, 4);
}

TEST(ChunkedScan, SameBitsAtAnyThreadCount) {
  const MambaShape s{8, 4, 8, 16, 2, 4};
  const TokenShape t{2, 200};
  Inputs in = randomInputs(s, t, 5);
  std::vector<float> dy(size_t(t.tokens() * s.inner()), 0.25f);
  auto run = [&](int threads) {
    setNumThreads(threads);
    std::vector<float> y(size_t(t.tokens() * s.inner())),
        states(size_t(s.scanChunks(t) * s.heads * s.headDim * s.state)),
        ws(size_t(scanWorkspaceFloats(s, t))),
        dxbc(size_t(t.tokens() * s.convChannels()), 0.0f),
        ddt(size_t(t.tokens() * s.heads)), ga(size_t(s.heads), 0.0f),
        gd(size_t(s.heads), 0.0f);
    scanForward(s, t, in.xbc.data(), in.dt.data(), in.aLog.data(), in.d.data(),
                y.data(), states.data(), ws.data());
    scanBackward(s, t, in.xbc.data(), in.dt.data(), in.aLog.data(), in.d.data(),
                 states.data(), dy.data(), dxbc.data(), ddt.data(), ga.data(),
                 gd.data(), ws.data());
    y.insert(y.end(), dxbc.begin(), dxbc.end());
    y.insert(y.end(), ddt.begin(), ddt.end());
    y.insert(y.end(), ga.begin(), ga.end());
    return y;
  };
  std::vector<float> one = run(1), two = run(2);
  setNumThreads(1);
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); ++i)
    ASSERT_EQ(one[i], two[i]) << "value " << i;
}

TEST(VectorisedExp, WithinTwoUlpOfTheLibrary) {
  // Every 1/1024 over the range the kernels use, and the clamped ends.
  for (float x = -87.0f; x <= 88.0f; x += 1.0f / 1024) {
    const float want = std::exp(x), got = fastExp(x);
    ASSERT_LE(std::abs(got - want),
              2.0f * std::abs(std::nextafter(want, 0.0f) - want))
        << "x = " << x;
  }
  EXPECT_EQ(fastExp(0.0f), 1.0f);
  EXPECT_GT(fastExp(-1000.0f), 0.0f);
  EXPECT_LT(fastExp(-1000.0f), 1.2e-38f);
  EXPECT_TRUE(std::isfinite(fastExp(1000.0f)));
}
