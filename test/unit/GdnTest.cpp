//===- GdnTest.cpp - the chunked gated delta rule against its definition --===//
//
// The CPU kernels' chunked gated delta rule (runtime/kernels/cpu/Gdn.cpp)
// against the rule one token at a time in double precision, written here:
// its output o, and the gradients of <o, R> for random R with respect to
// every input (q, k, v, g, beta) by central differences of that
// recurrence. Lengths around the chunk (1, 63, 64, 65, 150 rows), two
// sequences of a batch, and packed samples whose boundaries fall inside
// and on chunks, and strong decays. Then the whole layer at 1, 2 and 3 threads:
// the same bits.
//
//===----------------------------------------------------------------------===//

#include "runtime/kernels/recipes/Gdn.h"
#include "runtime/kernels/cpu/Kernels.h"
#include "runtime/kernels/cpu/Primitives.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

using namespace hypipe::rt;
using namespace hypipe::rt::cpu;

namespace {

/// The rule's inputs in the layer's saved layout, as doubles: q and k
/// [T, 2 key width], v inside the conv output [T, conv channels], g and
/// beta [T, value heads].
struct RuleInputs {
  std::vector<double> qk, conv, g, beta;
};

/// o [T, value width] by the definition: per sequence and value head, from
/// a zero state, S = e^g S; S += k (beta (v - S^T k))^T; o = S^T q/sqrt(dk).
std::vector<double> sequentialRule(const GdnShape &s, const TokenShape &t,
                                   const RuleInputs &in) {
  const int64_t dk = s.keyHeadDim, dv = s.valueHeadDim, nv = s.valueHeads;
  std::vector<double> o(size_t(t.tokens() * s.valueWidth()));
  std::vector<double> S(static_cast<size_t>(dk * dv)),
      u(static_cast<size_t>(dv));
  for (int64_t q = 0; q < t.sequences(); ++q)
    for (int64_t j = 0; j < nv; ++j) {
      const int64_t kh = j / s.headsPerKey();
      std::fill(S.begin(), S.end(), 0.0);
      for (int64_t r = t.start(q); r < t.start(q) + t.length(q); ++r) {
        const double *qv = &in.qk[size_t(r * 2 * s.keyWidth() + kh * dk)];
        const double *kv = qv + s.keyWidth();
        const double *vv =
            &in.conv[size_t(r * s.convChannels() + 2 * s.keyWidth() + j * dv)];
        const double eg = std::exp(in.g[size_t(r * nv + j)]),
                     b = in.beta[size_t(r * nv + j)];
        for (double &x : S)
          x *= eg;
        for (int64_t e = 0; e < dv; ++e) {
          u[size_t(e)] = 0;
          for (int64_t d = 0; d < dk; ++d)
            u[size_t(e)] += S[size_t(d * dv + e)] * kv[d];
        }
        for (int64_t d = 0; d < dk; ++d)
          for (int64_t e = 0; e < dv; ++e)
            S[size_t(d * dv + e)] += kv[d] * b * (vv[e] - u[size_t(e)]);
        for (int64_t e = 0; e < dv; ++e) {
          double acc = 0;
          for (int64_t d = 0; d < dk; ++d)
            acc += S[size_t(d * dv + e)] * qv[d];
          o[size_t(r * s.valueWidth() + j * dv + e)] =
              acc / std::sqrt(double(dk));
        }
      }
    }
  return o;
}

/// Runs the kernels' rule forward and backward on `in` (rounded to float)
/// and checks o and every input's gradient against the definition.
/// `gateLow`: the least g drawn (g uniform in [gateLow, -0.01]).
void checkRule(const GdnShape &s, const TokenShape &t, unsigned seed,
               double gateLow = -0.7) {
  const int64_t T = t.tokens(), nv = s.valueHeads, dk = s.keyHeadDim;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> unit(-0.6, 0.6), gate(gateLow, -0.01),
      beta(0.05, 0.95);
  RuleInputs in;
  in.qk.resize(size_t(T * 2 * s.keyWidth()));
  in.conv.resize(size_t(T * s.convChannels()));
  in.g.resize(size_t(T * nv));
  in.beta.resize(size_t(T * nv));
  for (double &x : in.qk)
    x = float(unit(rng));
  for (double &x : in.conv)
    x = float(unit(rng));
  for (double &x : in.g)
    x = float(gate(rng));
  for (double &x : in.beta)
    x = float(beta(rng));
  std::vector<double> R(size_t(T * s.valueWidth()));
  for (double &x : R)
    x = float(unit(rng));

  std::vector<float> saved(size_t(s.savedFloats(t)));
  GdnSaved m = gdnSaved(s, t, saved.data());
  auto toFloat = [](const std::vector<double> &from, float *to) {
    for (size_t i = 0; i < from.size(); ++i)
      to[i] = float(from[i]);
  };
  toFloat(in.qk, m.qk);
  toFloat(in.conv, m.conv);
  toFloat(in.g, m.g);
  toFloat(in.beta, m.beta);
  std::vector<float> scratch(size_t(nv * s.ruleScratchFloats()));
  Kernels::gdnRuleForward(s, t, m, scratch.data());

  const std::vector<double> want = sequentialRule(s, t, in);
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(m.o[i], want[i], 2e-5 + 1e-4 * std::abs(want[i]))
        << "o[" << i << "] of " << T << " rows";

  std::vector<float> dO(R.size()), dqk(size_t(T * 2 * nv * dk)),
      dconv(size_t(T * s.convChannels())), dg(size_t(T * nv)),
      dbeta(size_t(T * nv));
  toFloat(R, dO.data());
  Kernels::gdnRuleBackward(s, t, m, dO.data(), dqk.data(), dconv.data(),
                           dg.data(), dbeta.data(), scratch.data());

  auto loss = [&](const RuleInputs &x) {
    const std::vector<double> o = sequentialRule(s, t, x);
    double sum = 0;
    for (size_t i = 0; i < o.size(); ++i)
      sum += o[i] * R[i];
    return sum;
  };
  auto fd = [&](std::vector<double> &v, size_t i) {
    const double h = 1e-5, keep = v[i];
    v[i] = keep + h;
    const double up = loss(in);
    v[i] = keep - h;
    const double down = loss(in);
    v[i] = keep;
    return (up - down) / (2 * h);
  };
  auto expectGrad = [&](double got, double wantGrad, const char *what,
                        int64_t row) {
    EXPECT_NEAR(got, wantGrad, 1e-4 + 1e-3 * std::abs(wantGrad))
        << what << " at row " << row << " of " << T;
  };
  // Rows to check: all of a short call, else the first and last of every
  // chunk and sequence and a spread between.
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < T; ++r)
    if (T <= 70 || r % GdnShape::kChunk <= 1 ||
        r % GdnShape::kChunk >= GdnShape::kChunk - 2 || r % 7 == 3 ||
        r >= T - 2)
      rows.push_back(r);
  for (int64_t q = 0; q < t.sequences(); ++q)
    for (int64_t r : {t.start(q), t.start(q) + t.length(q) - 1})
      rows.push_back(r);
  for (int64_t r : rows) {
    for (int64_t j = 0; j < nv; ++j) {
      expectGrad(dg[size_t(r * nv + j)], fd(in.g, size_t(r * nv + j)), "dg", r);
      expectGrad(dbeta[size_t(r * nv + j)], fd(in.beta, size_t(r * nv + j)),
                 "dbeta", r);
      for (int64_t e = 0; e < s.valueHeadDim; ++e) {
        const size_t at = size_t(r * s.convChannels() + 2 * s.keyWidth() +
                                 j * s.valueHeadDim + e);
        expectGrad(dconv[at], fd(in.conv, at), "dv", r);
      }
    }
    // q and k: the kernels' per-value-head parts, summed over the value
    // heads each key head serves.
    for (int64_t part = 0; part < 2; ++part)
      for (int64_t kh = 0; kh < s.keyHeads; ++kh)
        for (int64_t d = 0; d < dk; ++d) {
          double got = 0;
          for (int64_t j = kh * s.headsPerKey(); j < (kh + 1) * s.headsPerKey();
               ++j)
            got += dqk[size_t(((r * 2 + part) * nv + j) * dk + d)];
          const size_t at =
              size_t(r * 2 * s.keyWidth() + part * s.keyWidth() + kh * dk + d);
          expectGrad(got, fd(in.qk, at), part ? "dk" : "dq", r);
        }
  }
}

/// Two key heads, each serving two value heads, dk 4, dv 3.
const GdnShape kRule{8, 2, 4, 4, 3, 3};

TEST(GdnRule, MatchesTheRecurrenceAroundTheChunk) {
  for (int64_t n : {1, 63, 64, 65, 150})
    checkRule(kRule, TokenShape{1, n}, unsigned(n));
}

TEST(GdnRule, EverySequenceOfABatchStartsFromZero) {
  checkRule(kRule, TokenShape{2, 70}, 3);
}

/// Samples of 1, 63, 66, 2 and 60 rows: boundaries at row 1, on chunk
/// starts (64), inside chunks (130, 132), a sample ending on 192.
const int32_t kPacked[] = {0, 1, 64, 130, 132, 192};

TEST(GdnRule, PackedSamplesDoNotSeeEachOther) {
  TokenShape t{1, 200};
  t.cuSeqlens = kPacked;
  t.numSeqs = 5;
  checkRule(kRule, t, 11);
}

/// Strong decays, as Megatron's A_log init gives them (g down to about -20
/// a row, a chunk's Gc in the hundreds): still the recurrence. (Its
/// gradients are small here; the float-Gc rounding this regime exposed was
/// caught by packing.test's G model against the float64 reference, 2e-2 on
/// A_log's gradient, not by these tolerances.)
TEST(GdnRule, StrongDecays) {
  TokenShape t{1, 200};
  t.cuSeqlens = kPacked;
  t.numSeqs = 5;
  checkRule(kRule, t, 13, -20.0);
}

/// The whole layer (recipes/Gdn.h on the CPU kernels), forward, input and
/// weight gradients, at 1, 2 and 3 threads: the same bits, as every other
/// CPU kernel (every sum in an order fixed by the shape).
TEST(GdnLayer, SameBitsAtAnyThreadCount) {
  const GdnShape s{16, 2, 4, 8, 6, 4};
  const TokenShape t{2, 150};
  int64_t params = 0;
  for (const ParamSpec &p : s.params(4))
    params += p.numel();
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  const int64_t act = t.tokens() * s.hidden;
  std::vector<float> p(static_cast<size_t>(params)),
      x(static_cast<size_t>(act)), dy(static_cast<size_t>(act));
  for (std::vector<float> *v : {&p, &x, &dy})
    for (float &e : *v)
      e = u(rng);
  const Kernels k{{DType::F32}};
  auto run = [&](int threads) {
    setNumThreads(threads);
    std::vector<float> saved(static_cast<size_t>(s.savedFloats(t))),
        ws(static_cast<size_t>(s.workspaceFloats(t))),
        y(static_cast<size_t>(act)), dx(static_cast<size_t>(act)),
        g(static_cast<size_t>(params), 0.0f);
    recipes::Gdn<Kernels> layer{k};
    layer.forward(s, t, p.data(), x.data(), y.data(), saved.data(), ws.data());
    layer.backwardInput(s, t, p.data(), g.data(), saved.data(), dy.data(),
                        dx.data(), ws.data());
    layer.backwardWeight(s, t, saved.data(), g.data());
    y.insert(y.end(), dx.begin(), dx.end());
    y.insert(y.end(), g.begin(), g.end());
    return y;
  };
  const std::vector<float> one = run(1), two = run(2), three = run(3);
  setNumThreads(1);
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); ++i) {
    ASSERT_EQ(one[i], two[i]) << "value " << i << " at 2 threads";
    ASSERT_EQ(one[i], three[i]) << "value " << i << " at 3 threads";
  }
}

} // namespace
