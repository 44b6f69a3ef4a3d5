//===- KernelGradientTest.cpp - CPU kernels against finite differences ----===//
//
// For each layer kind on small shapes: L = sum(y * r) for a fixed random r;
// the analytic input and parameter gradients (I then W) must match central
// differences of L. Kernels run in fp32, so the tolerance is loose; the
// PyTorch reference (test/e2e/reference.test) is the tight check. Each layer
// runs as the stage interpreter runs it: its recipe over the CPU target's
// primitive set (cpu::Kernels).
//
//===----------------------------------------------------------------------===//

#include "core/model/MoeCapacity.h"
#include "runtime/kernels/cpu/Kernels.h"
#include "runtime/kernels/cpu/Optimizer.h"
#include "runtime/kernels/cpu/Primitives.h"
#include "runtime/kernels/recipes/Attention.h"
#include "runtime/kernels/recipes/Gdn.h"
#include "runtime/kernels/recipes/Mamba.h"
#include "runtime/kernels/recipes/Mlp.h"
#include "runtime/kernels/recipes/Moe.h"
#include "runtime/kernels/recipes/Mtp.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <new>
#include <numeric>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

using namespace hypipe::rt;
using namespace hypipe::rt::cpu;

namespace {

/// The CPU target's primitive set in `activations`.
const Kernels &cpuKernels(DType activations) {
  static const Kernels fp32{{DType::F32}}, bf16{{DType::BF16}};
  return activations == DType::BF16 ? bf16 : fp32;
}

// A layer's pass as the checks below call it: the layer's recipe `R` over
// cpuKernels, in the precision of the first argument.
template <template <class> class R>
const auto cpuForward = [](DType a, auto &&...args) {
  return R<Kernels>{cpuKernels(a)}.forward(
      std::forward<decltype(args)>(args)...);
};
template <template <class> class R>
const auto cpuBackwardInput = [](DType a, auto &&...args) {
  R<Kernels>{cpuKernels(a)}.backwardInput(
      std::forward<decltype(args)>(args)...);
};
template <template <class> class R>
const auto cpuBackwardWeight = [](DType a, auto &&...args) {
  R<Kernels>{cpuKernels(a)}.backwardWeight(
      std::forward<decltype(args)>(args)...);
};

const auto mambaForward = cpuForward<recipes::Mamba>;
const auto mambaBackwardInput = cpuBackwardInput<recipes::Mamba>;
const auto mambaBackwardWeight = cpuBackwardWeight<recipes::Mamba>;
const auto attentionForward = cpuForward<recipes::Attention>;
const auto attentionBackwardInput = cpuBackwardInput<recipes::Attention>;
const auto attentionBackwardWeight = cpuBackwardWeight<recipes::Attention>;
const auto gdnForward = cpuForward<recipes::Gdn>;
const auto gdnBackwardInput = cpuBackwardInput<recipes::Gdn>;
const auto gdnBackwardWeight = cpuBackwardWeight<recipes::Gdn>;
const auto mlpForward = cpuForward<recipes::Mlp>;
const auto mlpBackwardInput = cpuBackwardInput<recipes::Mlp>;
const auto mlpBackwardWeight = cpuBackwardWeight<recipes::Mlp>;
const auto moeForward = cpuForward<recipes::Moe>;
const auto moeBackwardInput = cpuBackwardInput<recipes::Moe>;
const auto moeBackwardWeight = cpuBackwardWeight<recipes::Moe>;
const auto mtpInputForward = cpuForward<recipes::MtpInput>;
const auto mtpInputBackwardInput = cpuBackwardInput<recipes::MtpInput>;
const auto mtpInputBackwardWeight = cpuBackwardWeight<recipes::MtpInput>;
const auto mtpOutputForward = cpuForward<recipes::MtpOutput>;
const auto mtpOutputBackwardInput = cpuBackwardInput<recipes::MtpOutput>;
const auto mtpOutputBackwardWeight = cpuBackwardWeight<recipes::MtpOutput>;

const float *mtpNormed(const MtpOutputShape &s, const TokenShape &t,
                       const float *sv) {
  return recipes::MtpOutput<Kernels>{cpuKernels(DType::F32)}.normed(s, t, sv);
}

} // namespace

namespace {

struct Layer {
  int64_t params, saved, workspace, hidden;
  TokenShape tokens;
  /// Returns a scalar loss term of its own (the MoE load-balancing loss).
  std::function<float(const float *p, const float *x, float *y, float *saved,
                      float *ws)>
      forward;
  std::function<void(const float *p, float *g, float *saved, const float *dy,
                     float *dx, float *ws)>
      backwardInput;
  std::function<void(const float *p, const float *saved, float *g, float *ws)>
      backwardWeight;
};

/// A Layer of `params` parameters with the buffers shape `s` plans for `t`
/// (its kernels set by the caller).
template <typename Shape>
Layer sized(const Shape &s, TokenShape t, int64_t params) {
  return Layer{
      params,  s.savedFloats(t), s.workspaceFloats(t), s.hidden, t, nullptr,
      nullptr, nullptr};
}

template <typename Shape> int64_t countParams(const Shape &s) {
  int64_t n = 0;
  for (const ParamSpec &p : s.params(4))
    n += p.numel();
  return n;
}

/// Every element of each vector, in turn, drawn from `u`.
template <typename... Vectors>
void fillRandom(std::mt19937 &rng, std::uniform_real_distribution<float> &u,
                Vectors &...vectors) {
  for (std::vector<float> *v : {&vectors...})
    for (float &x : *v)
      x = u(rng);
}

/// Checks dx and the parameter gradients against central differences at
/// 12 random entries each, and at every parameter index in `every`.
void checkGradients(const Layer &L, unsigned seed,
                    const std::vector<int64_t> &every = {}) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  const int64_t act = L.tokens.tokens() * L.hidden;
  std::vector<float> p(L.params), x(act), r(act);
  fillRandom(rng, u, p, x, r);
  std::vector<float> saved(L.saved), ws(L.workspace), y(act);

  auto loss = [&](const std::vector<float> &pp, const std::vector<float> &xx) {
    double s =
        L.forward(pp.data(), xx.data(), y.data(), saved.data(), ws.data());
    for (int64_t i = 0; i < act; ++i)
      s += double(y[i]) * r[i];
    return s;
  };

  loss(p, x);
  std::vector<float> g(L.params, 0.0f), dx(act);
  L.backwardInput(p.data(), g.data(), saved.data(), r.data(), dx.data(),
                  ws.data());
  L.backwardWeight(p.data(), saved.data(), g.data(), ws.data());

  const float eps = 1e-2f;
  auto fd = [&](std::vector<float> &vec, int64_t i, bool isParam) {
    float keep = vec[i];
    vec[i] = keep + eps;
    double up = isParam ? loss(vec, x) : loss(p, vec);
    vec[i] = keep - eps;
    double down = isParam ? loss(vec, x) : loss(p, vec);
    vec[i] = keep;
    return (up - down) / (2.0 * eps);
  };
  std::uniform_int_distribution<int64_t> pickX(0, act - 1),
      pickP(0, L.params - 1);
  for (int k = 0; k < 12; ++k) {
    int64_t i = pickX(rng);
    double want = fd(x, i, false);
    EXPECT_NEAR(dx[i], want, 1e-2 + 2e-2 * std::abs(want)) << "dx[" << i << "]";
    int64_t j = pickP(rng);
    want = fd(p, j, true);
    EXPECT_NEAR(g[j], want, 1e-2 + 2e-2 * std::abs(want))
        << "dparam[" << j << "]";
  }
  for (int64_t j : every) {
    const double want = fd(p, j, true);
    EXPECT_NEAR(g[j], want, 1e-2 + 2e-2 * std::abs(want))
        << "dparam[" << j << "]";
  }
}

/// The Layer of kernels `fwd`, `bwdI`, `bwdW` on shape `s`.
template <typename Shape, typename Fwd, typename BwdI, typename BwdW>
Layer makeLayer(const Shape &s, TokenShape t, Fwd fwd, BwdI bwdI, BwdW bwdW) {
  Layer l = sized(s, t, countParams(s));
  l.forward = [=](const float *p, const float *x, float *y, float *sv,
                  float *ws) -> float {
    if constexpr (std::is_void_v<decltype(fwd(DType::F32, s, t, p, x, y, sv,
                                              ws))>) {
      fwd(DType::F32, s, t, p, x, y, sv, ws);
      return 0.0f;
    } else {
      return fwd(DType::F32, s, t, p, x, y, sv, ws);
    }
  };
  l.backwardInput = [=](const float *p, float *g, float *sv, const float *dy,
                        float *dx, float *ws) {
    bwdI(DType::F32, s, t, p, g, sv, dy, dx, ws);
  };
  l.backwardWeight = [=](const float *, const float *sv, float *g, float *) {
    bwdW(DType::F32, s, t, sv, g);
  };
  return l;
}

const TokenShape kTokens{2, 7};

/// moeForward where every router logit is finite: its check stays clear.
float moeForwardFinite(DType activations, const MoeShape &s,
                       const TokenShape &t, const float *p, const float *x,
                       float *y, float *sv, float *ws) {
  RouterCheck check;
  const float aux = moeForward(activations, s, t, p, x, y, sv, ws, &check);
  EXPECT_EQ(check.nonFinite, 0);
  return aux;
}

TEST(KernelGradient, Mamba) {
  // Two groups, a sequence shorter than one scan chunk.
  checkGradients(makeLayer(MambaShape{8, 4, 3, 5, 2, 3}, kTokens, mambaForward,
                           mambaBackwardInput, mambaBackwardWeight),
                 1);
}

TEST(KernelGradient, MambaAcrossScanChunks) {
  // 70 steps: the backward recomputes states from two checkpoints.
  checkGradients(makeLayer(MambaShape{4, 2, 2, 3, 1, 4}, TokenShape{1, 70},
                           mambaForward, mambaBackwardInput,
                           mambaBackwardWeight),
                 2);
}

TEST(KernelGradient, AttentionWithRope) {
  checkGradients(makeLayer(AttentionShape{8, 4, 2, 2, true}, kTokens,
                           attentionForward, attentionBackwardInput,
                           attentionBackwardWeight),
                 3);
}

class MlpGradient : public ::testing::TestWithParam<Activation> {};

TEST_P(MlpGradient, EveryActivation) {
  checkGradients(makeLayer(MlpShape{6, 10, GetParam()}, kTokens, mlpForward,
                           mlpBackwardInput, mlpBackwardWeight),
                 4);
}

INSTANTIATE_TEST_SUITE_P(Activations, MlpGradient,
                         ::testing::Values(Activation::SquaredRelu,
                                           Activation::Gelu,
                                           Activation::Swiglu),
                         [](const auto &info) {
                           return std::string(activationName(info.param));
                         });

TEST(KernelGradient, MoeWithAuxLoss) {
  // The load-balancing loss enters L with weight 1 (lossScale = 1).
  auto bwdI = [](DType activations, const MoeShape &s, const TokenShape &t,
                 const float *p, float *g, float *sv, const float *dy,
                 float *dx, float *ws) {
    moeBackwardInput(activations, s, t, p, g, sv, dy, dx, ws, 1.0f);
  };
  checkGradients(makeLayer(MoeShape{6, 8, 4, 2, Activation::Gelu, 0.1}, kTokens,
                           moeForwardFinite, bwdI, moeBackwardWeight),
                 5);
}

TEST(KernelGradient, MoeWithCapacityDroppingTokens) {
  // 14 tokens x top-2 over 4 experts at capacity factor 0.5: each expert
  // keeps ceil(28 / 4 x 0.5) = 4 of its tokens; a dropped choice's weight
  // is 0 (its gradient too), the aux loss counts every choice.
  MoeShape s{6, 8, 4, 2, Activation::Gelu, 0.1};
  s.capacityFactor = 0.5;
  auto bwdI = [](DType activations, const MoeShape &s, const TokenShape &t,
                 const float *p, float *g, float *sv, const float *dy,
                 float *dx, float *ws) {
    moeBackwardInput(activations, s, t, p, g, sv, dy, dx, ws, 1.0f);
  };
  checkGradients(
      makeLayer(s, kTokens, moeForwardFinite, bwdI, moeBackwardWeight), 5);
  // Such a layer drops tokens: the kept rows are the capacity's, the
  // routed counts every choice.
  const int64_t T = kTokens.tokens();
  std::vector<float> p(countParams(s)), x(T * s.hidden), y(x.size()),
      saved(s.savedFloats(kTokens)), ws(s.workspaceFloats(kTokens));
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  fillRandom(rng, u, p, x);
  moeForwardFinite(DType::F32, s, kTokens, p.data(), x.data(), y.data(),
                   saved.data(), ws.data());
  MoeSaved m = moeSaved(s, kTokens, saved.data());
  int64_t kept = 0, routed = 0;
  for (int64_t e = 0; e < s.experts; ++e) {
    EXPECT_LE(m.counts[e], 4);
    kept += m.counts[e];
    routed += m.routed[e];
  }
  EXPECT_EQ(routed, T * s.topk);
  EXPECT_LT(kept, routed);
}

/// One MoE layer's forward and backward over `t` (every gradient for an
/// output gradient `dy` with the load-balancing loss at weight 1).
struct MoeRun {
  std::vector<float> y, dx, grads;
  float aux = 0;
  std::vector<int32_t> routed;
};
MoeRun runMoe(const MoeShape &s, const TokenShape &t, const float *p,
              const std::vector<float> &x, const std::vector<float> &dy) {
  MoeRun r;
  std::vector<float> saved(s.savedFloats(t)), ws(s.workspaceFloats(t));
  r.y.resize(x.size());
  r.dx.resize(x.size());
  r.grads.assign(size_t(countParams(s)), 0.0f);
  r.aux = moeForwardFinite(DType::F32, s, t, p, x.data(), r.y.data(),
                           saved.data(), ws.data());
  moeBackwardInput(DType::F32, s, t, p, r.grads.data(), saved.data(), dy.data(),
                   r.dx.data(), ws.data(), 1.0f);
  moeBackwardWeight(DType::F32, s, t, saved.data(), r.grads.data());
  const MoeSaved m = moeSaved(s, t, saved.data());
  r.routed.assign(m.routed, m.routed + s.groupReplicas * s.experts);
  return r;
}

/// Padding rows -- a packed microbatch's tail for sequence parallelism, or
/// on an expert grid over data-parallel replicas each replica's microbatch
/// padded to the group's most rows -- are no tokens of the router's (as
/// Megatron-LM's router padding mask takes them out of the load-balancing
/// loss; here out of the dispatch and the capacity too): the real rows'
/// outputs and input gradients, the load-balancing loss and the weight
/// gradients are those of the same tokens unpadded, each replica's on its
/// own, and a padding row's output is its input. With a capacity that
/// counted the padding (ceil(12 x 2 / 4 x 0.75) = 5, not ceil(9 x 2 / 4 x
/// 0.75) = 4) the kept rows would differ.
TEST(MoeRouter, PaddingRowsAreNoTokens) {
  MoeShape s{6, 8, 4, 2, Activation::Gelu, 0.1};
  s.capacityFactor = 0.75;
  const int64_t Hd = s.hidden, rows = 12, real0 = 9;
  const int32_t cu[] = {0, 5, 9, 12}; // two samples, then 3 rows of padding
  const TokenShape padded = packedTokens(TokenShape{1, rows}, cu, 3, true);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  std::vector<float> p(countParams(s)), x(2 * rows * Hd), dy(x.size());
  fillRandom(rng, u, p, x, dy);
  auto rowsOf = [&](const std::vector<float> &v, int64_t first, int64_t n) {
    return std::vector<float>(v.begin() + first * Hd,
                              v.begin() + (first + n) * Hd);
  };
  auto expectNear = [](const std::vector<float> &a, const std::vector<float> &b,
                       const char *what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    for (size_t i = 0; i < a.size(); ++i)
      ASSERT_NEAR(a[i], b[i], 1e-6f) << what << " [" << i << "]";
  };
  // The references: replica 0's 9 real tokens, replica 1's 12, unpadded.
  const MoeRun alone0 = runMoe(s, TokenShape{1, real0}, p.data(),
                               rowsOf(x, 0, real0), rowsOf(dy, 0, real0));
  const MoeRun alone1 = runMoe(s, TokenShape{1, rows}, p.data(),
                               rowsOf(x, rows, rows), rowsOf(dy, rows, rows));

  // Sequence parallelism's padding: one replica, its packed tail.
  const MoeRun one =
      runMoe(s, padded, p.data(), rowsOf(x, 0, rows), rowsOf(dy, 0, rows));
  expectNear(rowsOf(one.y, 0, real0), alone0.y, "y");
  expectNear(rowsOf(one.y, real0, rows - real0), rowsOf(x, real0, rows - real0),
             "padding's y");
  expectNear(rowsOf(one.dx, 0, real0), alone0.dx, "dx");
  expectNear(one.grads, alone0.grads, "grads");
  EXPECT_NEAR(one.aux, alone0.aux, 1e-7f);
  EXPECT_EQ(one.routed, alone0.routed);

  // Two replicas run as one group (MoeShape::groupReplicas), replica 0's
  // microbatch padded to replica 1's 12 rows.
  s.groupReplicas = 2;
  const int64_t real[] = {real0, rows};
  TokenShape group = padded;
  group.replicaTokens = real;
  const MoeRun both = runMoe(s, group, p.data(), x, dy);
  expectNear(rowsOf(both.y, 0, real0), alone0.y, "group's y, replica 0");
  expectNear(rowsOf(both.y, real0, rows - real0),
             rowsOf(x, real0, rows - real0), "group's padding's y");
  expectNear(rowsOf(both.y, rows, rows), alone1.y, "group's y, replica 1");
  expectNear(rowsOf(both.dx, 0, real0), alone0.dx, "group's dx, replica 0");
  expectNear(rowsOf(both.dx, rows, rows), alone1.dx, "group's dx, replica 1");
  std::vector<float> sum(alone0.grads);
  for (size_t i = 0; i < sum.size(); ++i)
    sum[i] += alone1.grads[i];
  expectNear(both.grads, sum, "group's grads");
  EXPECT_NEAR(both.aux, (alone0.aux + alone1.aux) / 2, 1e-7f);
  std::vector<int32_t> routed(alone0.routed);
  routed.insert(routed.end(), alone1.routed.begin(), alone1.routed.end());
  EXPECT_EQ(both.routed, routed);
}

/// The padded layer's gradients against finite differences: a padding
/// row's router logits reach neither the output nor the loss.
TEST(KernelGradient, MoeWithPaddingRows) {
  const int32_t cu[] = {0, 5, 9, 14};
  auto bwdI = [](DType activations, const MoeShape &s, const TokenShape &t,
                 const float *p, float *g, float *sv, const float *dy,
                 float *dx, float *ws) {
    moeBackwardInput(activations, s, t, p, g, sv, dy, dx, ws, 1.0f);
  };
  checkGradients(makeLayer(MoeShape{6, 8, 4, 2, Activation::Gelu, 0.1},
                           packedTokens(TokenShape{1, 14}, cu, 3, true),
                           moeForwardFinite, bwdI, moeBackwardWeight),
                 5);
}

/// Megatron-LM's capacity, hand-worked: ceil(tokens x topk / experts x
/// factor) per block of tokens; over capacity an expert keeps its highest
/// weights (ties to the earlier token) or, by position, its earliest, in
/// Megatron-LM's sequence-major order.
TEST(MoeCapacity, KeepsTheHighestWeightsOrTheEarliestPerBlock) {
  MoeShape s{4, 4, 2, 1, Activation::Gelu, 0.0};
  s.capacityFactor = 1.0;
  EXPECT_EQ(s.capacityOf(6), 3); // 6 x 1 / 2
  s.capacityFactor = 0.6;
  EXPECT_EQ(s.capacityOf(6), 2); // ceil(1.8)
  // Past the tokens a capacity drops nothing: at most the tokens, however
  // large the factor (1e300's would not fit an int64_t).
  s.capacityFactor = 2.5;
  EXPECT_EQ(s.capacityOf(6), 6); // ceil(7.5), capped
  s.capacityFactor = 1e300;
  EXPECT_EQ(s.capacityOf(6), 6);
  EXPECT_EQ(s.heldRows({1, 6}), 6); // every token's one choice
  s.capacityFactor = 0.6;
  // One sample of six tokens, top-1: five chose expert 0, one expert 1.
  const TokenShape one{1, 6};
  const int32_t idx[] = {0, 0, 1, 0, 0, 0};
  const float w[] = {0.5f, 0.9f, 1.0f, 0.7f, 0.9f, 0.6f};
  std::vector<uint8_t> kept;
  keepWithinCapacity(s, one, idx, w, kept);
  // Expert 0 keeps 0.9 (token 1) and 0.9 (token 4: the tie to the
  // earlier), expert 1 its one.
  EXPECT_EQ(kept, (std::vector<uint8_t>{0, 1, 1, 0, 1, 0}));
  s.dropByPosition = true;
  keepWithinCapacity(s, one, idx, w, kept);
  EXPECT_EQ(kept, (std::vector<uint8_t>{1, 1, 1, 0, 0, 0}));
  // Two samples of three: Megatron-LM's order is position-major (rows 0,
  // 3, 1, 4, 2, 5), so the earliest two of expert 0 are rows 0 and 3.
  keepWithinCapacity(s, TokenShape{2, 3}, idx, w, kept);
  EXPECT_EQ(kept, (std::vector<uint8_t>{1, 0, 1, 1, 0, 0}));
  // Two blocks of three positions (two sequence shards): capacity
  // ceil(3 / 2 x 0.6) = 1 in each, so each block's first choice of 0.
  s.capacityBlocks = 2;
  keepWithinCapacity(s, one, idx, w, kept);
  EXPECT_EQ(kept, (std::vector<uint8_t>{1, 0, 1, 1, 0, 0}));
  // Dropless keeps every choice.
  s.capacityFactor = 0;
  keepWithinCapacity(s, one, idx, w, kept);
  EXPECT_EQ(kept, (std::vector<uint8_t>(6, 1)));
}

/// Over an expert grid's replicas a packed microbatch padded to the
/// group's most rows keeps the capacity blocks it has on its own (its real
/// tokens to a multiple of the blocks, cut in sequence shards), not the
/// padded group's: each replica keeps what it keeps alone.
TEST(MoeCapacity, PaddedReplicasKeepTheirOwnBlocks) {
  MoeShape s{4, 4, 2, 1, Activation::Gelu, 0.0};
  s.capacityFactor = 0.6; // a block of two tokens: ceil(2 / 2 x 0.6) = 1
  s.capacityBlocks = 2;
  // Replica 0: 4 real tokens of 8 rows; replica 1: 8. Top-1.
  const int32_t idx[] = {0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0};
  const float w[] = {0.9f, 0.8f, 0.6f, 0.7f, 1, 1, 1,    1,
                     0.2f, 0.3f, 0.4f, 0.5f, 1, 1, 0.9f, 0.8f};
  auto alone = [&](const int32_t *i, const float *ww, int64_t rows) {
    MoeShape one = s;
    one.groupReplicas = 1;
    const int32_t cu[] = {0, int32_t(rows)};
    std::vector<uint8_t> kept;
    keepWithinCapacity(one, packedTokens(TokenShape{1, rows}, cu, 1), i, ww,
                       kept);
    return kept;
  };
  std::vector<uint8_t> want = alone(idx, w, 4);
  want.resize(8, 0); // the padding goes nowhere
  const std::vector<uint8_t> second = alone(idx + 8, w + 8, 8);
  want.insert(want.end(), second.begin(), second.end());
  // Alone, replica 0 keeps token 0 of [0, 2) and token 3 of [2, 4) (in
  // one block of the padded 8 rows it would keep tokens 0 and 1).
  EXPECT_EQ(std::vector<uint8_t>(want.begin(), want.begin() + 4),
            (std::vector<uint8_t>{1, 0, 0, 1}));
  s.groupReplicas = 2;
  const int32_t cu[] = {0, 4, 8};
  const int64_t real[] = {4, 8};
  TokenShape group = s.group(packedTokens(TokenShape{1, 8}, cu, 2, true));
  group.replicaTokens = real;
  std::vector<uint8_t> kept;
  keepWithinCapacity(s, group, idx, w, kept);
  EXPECT_EQ(kept, want);
}

/// The rows a rank's saved tensors keep room for (MoeShape::heldRows) bound
/// what any routing gives its experts. Hand-worked: 12 tokens, top-2 of 8
/// experts; dropless a rank of 2 experts may take every choice (24 rows),
/// one of 1 expert every token (12); with a capacity factor of 0.5 in 2
/// blocks each expert keeps at most ceil(12 x 2 / 8 x 0.5) = 2 rows plus
/// one a block and one for the rounding (5), so 2 experts 10. Then random
/// and skewed routings (most tokens to rank 0's experts) over blocks,
/// replicas and factors: every rank's kept rows within the bound, which
/// the skewed dropless routing meets exactly.
TEST(MoeCapacity, HeldRowsBoundEveryRouting) {
  MoeShape s{4, 4, 8, 2, Activation::Gelu, 0.0};
  const TokenShape twelve{1, 12};
  s.expertRanks = 4;
  EXPECT_EQ(s.heldRows(twelve), 24);
  s.expertRanks = 8;
  EXPECT_EQ(s.heldRows(twelve), 12);
  s.allToAll = true; // every expert's rows: all the choices
  EXPECT_EQ(s.heldRows(twelve), 24);
  s.allToAll = false;
  s.expertRanks = 4;
  s.capacityFactor = 0.5;
  s.capacityBlocks = 2;
  EXPECT_EQ(s.heldRows(twelve), 10);

  std::mt19937 rng(11);
  for (int trial = 0; trial < 400; ++trial) {
    MoeShape t{
        4, 4, int64_t(2) << (trial % 3), 1 + trial % 3, Activation::Gelu, 0.0};
    t.expertRanks = int64_t(1) << (trial / 3 % 3);
    t.groupReplicas = 1 + trial / 9 % 2;
    t.capacityBlocks = 1 + trial / 18 % 3;
    const double factors[] = {0.0, 0.3, 0.5, 1.0, 1.7};
    t.capacityFactor = factors[trial / 54 % 5];
    t.dropByPosition = trial % 2;
    if (t.topk > t.experts || t.expertRanks > t.experts)
      continue;
    const TokenShape group = t.group(TokenShape{1 + trial % 2, 5 + trial % 7});
    const int64_t T = group.tokens(), k = t.topk, local = t.localExperts();
    const bool skewed = trial % 4 == 0;
    std::vector<int32_t> idx(size_t(T * k));
    std::vector<float> w(idx.size());
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    for (int64_t tok = 0; tok < T; ++tok) {
      std::vector<int32_t> order(size_t(t.experts));
      std::iota(order.begin(), order.end(), 0);
      if (!skewed) // skewed: experts 0, 1, ... (rank 0's first)
        std::shuffle(order.begin(), order.end(), rng);
      for (int64_t j = 0; j < k; ++j) {
        idx[size_t(tok * k + j)] = order[size_t(j)];
        w[size_t(tok * k + j)] = u(rng);
      }
    }
    std::vector<uint8_t> kept;
    keepWithinCapacity(t, group, idx.data(), w.data(), kept);
    for (int64_t rank = 0; rank < t.expertRanks; ++rank) {
      int64_t rows = 0;
      for (size_t slot = 0; slot < idx.size(); ++slot)
        rows += kept[slot] && idx[slot] / local == rank;
      EXPECT_LE(rows, t.heldRows(group)) << "trial " << trial;
      if (skewed && t.capacityFactor == 0 && rank == 0)
        EXPECT_EQ(rows, t.heldRows(group)) << "trial " << trial;
    }
  }
}

/// Held rows past the room MoeShape::heldRows gives are a bug, said as
/// one, not an overflow: experts 0 and 1 of 4 holding rows [0, 5) fit a
/// room of 5 rows, not of 4 (which leaves the window as it was). And a MoE
/// layer of an expert grid run without its group (every expert on one
/// rank, more than the shape's room is for) is refused the same way.
TEST(MoeHeldRows, MoreRowsThanTheRoomIsABug) {
  MoeSaved m;
  m.expertFrom = 0;
  m.expertTo = 2;
  m.rowRoom = 5;
  const std::vector<int64_t> off = {0, 2, 5, 6, 8};
  recipes::holdRowsOf(m, off);
  EXPECT_EQ(m.rowFrom, 0);
  EXPECT_EQ(m.rowTo, 5);
  EXPECT_TRUE(m.holds(4));
  EXPECT_FALSE(m.holds(5));
  m.rowRoom = 4;
  m.rowTo = 0;
  try {
    recipes::holdRowsOf(m, off);
    ADD_FAILURE() << "no error";
  } catch (const RuntimeError &e) {
    EXPECT_NE(std::string(e.what()).find("took 5 routed rows, more than the 4"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("this is a bug"), std::string::npos);
  }
  EXPECT_EQ(m.rowTo, 0);

  MoeShape s{6, 8, 4, 2, Activation::Gelu, 0.1};
  s.expertRanks = 2;
  const int64_t T = kTokens.tokens();
  std::vector<float> p(countParams(s)), x(T * s.hidden, 0.1f), y(x.size()),
      saved(s.savedFloats(kTokens)), ws(s.workspaceFloats(kTokens));
  RouterCheck check;
  EXPECT_THROW(moeForward(DType::F32, s, kTokens, p.data(), x.data(), y.data(),
                          saved.data(), ws.data(), &check),
               RuntimeError);
}

/// A NaN or infinite router logit is recorded, with its value, for the
/// trainer to stop the run on; the routing meanwhile stays in range (experts
/// are picked by position, so no id or row leaves its buffer).
TEST(MoeRouter, RecordsANonFiniteLogitAndStaysInRange) {
  const MoeShape s{6, 8, 4, 2, Activation::Gelu, 0.1};
  const int64_t T = kTokens.tokens(), E = s.experts, k = s.topk;
  std::vector<float> p(countParams(s)), x(T * s.hidden), y(x.size()),
      saved(s.savedFloats(kTokens)), ws(s.workspaceFloats(kTokens));
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  fillRandom(rng, u, p, x);
  auto route = [&](RouterCheck &check) {
    moeForward(DType::F32, s, kTokens, p.data(), x.data(), y.data(),
               saved.data(), ws.data(), &check);
  };
  RouterCheck clean;
  route(clean);
  EXPECT_EQ(clean.nonFinite, 0);

  x[3 * s.hidden] = std::nanf(""); // token 3's normed input, so its logits
  RouterCheck nan;
  route(nan);
  EXPECT_EQ(nan.nonFinite, 1);
  EXPECT_TRUE(std::isnan(nan.logit));
  MoeSaved m = moeSaved(s, kTokens, saved.data());
  int64_t routed = 0;
  for (int64_t e = 0; e < E; ++e)
    routed += m.counts[e];
  EXPECT_EQ(routed, T * k);
  for (int64_t i = 0; i < T * k; ++i) {
    EXPECT_GE(m.topIdx[i], 0);
    EXPECT_LT(m.topIdx[i], E);
    EXPECT_GE(m.rowMap[i], 0);
    EXPECT_LT(m.rowMap[i], T * k);
  }

  // Finite inputs, a router of the largest weights: every logit overflows.
  MoeParams<float> params = moeParams(s, p.data());
  std::fill(params.norm, params.norm + s.hidden, 1.0f);
  std::fill(params.router, params.router + E * s.hidden, 3e38f);
  std::fill(x.begin(), x.end(), 1.0f);
  RouterCheck inf;
  route(inf);
  EXPECT_EQ(inf.nonFinite, 1);
  EXPECT_EQ(inf.logit, INFINITY);
}

/// Samples of 5, 70, 1 and 9 tokens packed into one microbatch of at most
/// 96 (THD): the 70-token sample crosses the scan's checkpoint at row 64.
const int32_t kCuSeqlens[] = {0, 5, 75, 76, 85};
TokenShape packedTokens() {
  TokenShape t{1, 96};
  t.cuSeqlens = kCuSeqlens;
  t.numSeqs = 4;
  return t;
}

TEST(KernelGradient, MambaPacked) {
  checkGradients(makeLayer(MambaShape{4, 2, 2, 3, 1, 4}, packedTokens(),
                           mambaForward, mambaBackwardInput,
                           mambaBackwardWeight),
                 6);
}

TEST(KernelGradient, MambaConvAndNormWeightsEveryEntry) {
  // Every conv weight and bias and every gated-norm weight, by finite
  // differences: 56 conv channels (three full 16-channel blocks and a
  // partial one), 10 taps (two passes of the weight gradient's 8), groups
  // of 20 columns (a full norm block and a partial one), and packed samples
  // of 5, 70, 1 and 9 tokens, shorter than the conv but one.
  const MambaShape s{8, 4, 10, 4, 2, 10};
  ASSERT_EQ(s.convChannels(), 56);
  std::vector<float> base(size_t(countParams(s)));
  MambaParams<float> at = mambaParams(s, base.data());
  const auto offset = [&](const float *q) { return int64_t(q - base.data()); };
  std::vector<int64_t> every;
  for (int64_t i = 0; i < s.convChannels() * s.convWidth; ++i)
    every.push_back(offset(at.convW) + i);
  for (int64_t i = 0; i < s.convChannels(); ++i)
    every.push_back(offset(at.convB) + i);
  for (int64_t i = 0; i < s.inner(); ++i)
    every.push_back(offset(at.gnorm) + i);
  checkGradients(makeLayer(s, packedTokens(), mambaForward, mambaBackwardInput,
                           mambaBackwardWeight),
                 7, every);
}

TEST(KernelGradient, Gdn) {
  // Two value heads on one key head, a sequence shorter than one chunk.
  checkGradients(makeLayer(GdnShape{8, 1, 2, 4, 3, 3}, kTokens, gdnForward,
                           gdnBackwardInput, gdnBackwardWeight),
                 8);
}

TEST(KernelGradient, GdnPackedEverySmallParameter) {
  // Packed samples of 5, 70, 1 and 9 tokens (the 70 crosses the chunk at
  // row 64): every conv weight, dt_bias, A_log and out-norm weight.
  const GdnShape s{6, 2, 2, 3, 4, 3};
  std::vector<float> base(size_t(countParams(s)));
  GdnParams<float> at = gdnParams(s, base.data());
  const auto offset = [&](const float *q) { return int64_t(q - base.data()); };
  std::vector<int64_t> every;
  for (int64_t i = 0; i < s.convChannels() * s.convWidth; ++i)
    every.push_back(offset(at.convW) + i);
  for (int64_t i = 0; i < s.valueHeads; ++i) {
    every.push_back(offset(at.dtBias) + i);
    every.push_back(offset(at.aLog) + i);
  }
  for (int64_t i = 0; i < s.valueHeadDim; ++i)
    every.push_back(offset(at.outNorm) + i);
  checkGradients(makeLayer(s, packedTokens(), gdnForward, gdnBackwardInput,
                           gdnBackwardWeight),
                 9, every);
}

/// gemm() cuts a large GEMM into tiles fixed by its shape and shares them
/// over the threads: the same bits at 1, 2 and 3 threads, and the right
/// product (against double dot products at sampled entries), for every
/// transpose, by rows and by columns, with alpha and beta.
TEST(SplitGemm, SameBitsAtAnyThreadCountAndRight) {
  struct Case {
    bool ta, tb;
    int64_t M, N, K;
  };
  const Case cases[] = {{false, true, 1024, 1168, 256}, // a forward, by rows
                        {true, false, 1168, 256, 1024}, // a weight gradient
                        {true, false, 256, 520, 1024},  // by columns, a rest
                        {false, false, 1000, 256, 300}, // rows not whole
                        {false, true, 256, 600, 64},    // columns, op(B) = B^T
                        {false, false, 1600, 1100, 64}, // 3 x 2 tiles
                        {true, false, 1536, 300, 64},   // 3 rows made 4
                        {true, true, 200, 150, 96}};    // below the split
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (const Case &c : cases) {
    SCOPED_TRACE(::testing::Message() << c.M << "x" << c.N << "x" << c.K
                                      << " ta " << c.ta << " tb " << c.tb);
    const int64_t lda = c.ta ? c.M : c.K, ldb = c.tb ? c.K : c.N;
    std::vector<float> A(size_t(c.M * c.K)), B(size_t(c.K * c.N)),
        C0(size_t(c.M * c.N));
    fillRandom(rng, u, A, B, C0);
    std::vector<std::vector<float>> out;
    for (int threads : {1, 2, 3}) {
      setNumThreads(threads);
      std::vector<float> C = C0;
      gemm(c.ta, c.tb, c.M, c.N, c.K, 0.5f, A.data(), lda, B.data(), ldb, 1.0f,
           C.data(), c.N);
      out.push_back(C);
    }
    setNumThreads(1);
    EXPECT_EQ(out[0], out[1]);
    EXPECT_EQ(out[0], out[2]);
    std::uniform_int_distribution<int64_t> row(0, c.M - 1), col(0, c.N - 1);
    for (int k = 0; k < 200; ++k) {
      const int64_t i = row(rng), j = col(rng);
      double want = C0[size_t(i * c.N + j)];
      for (int64_t l = 0; l < c.K; ++l)
        want += 0.5 *
                double(c.ta ? A[size_t(l * lda + i)] : A[size_t(i * lda + l)]) *
                double(c.tb ? B[size_t(j * ldb + l)] : B[size_t(l * ldb + j)]);
      ASSERT_NEAR(out[0][size_t(i * c.N + j)], want, 1e-4 * c.K)
          << "C[" << i << "][" << j << "]";
    }
  }
}

TEST(KernelGradient, AttentionAcrossKeyBlocks) {
  // 150 rows: three query and key blocks of 64, the last partial; the
  // online softmax rescales across blocks and backward recomputes each.
  checkGradients(makeLayer(AttentionShape{8, 4, 2, 2, true}, TokenShape{1, 150},
                           attentionForward, attentionBackwardInput,
                           attentionBackwardWeight),
                 11);
}

TEST(KernelGradient, AttentionWithRopePacked) {
  checkGradients(makeLayer(AttentionShape{8, 4, 2, 2, true}, packedTokens(),
                           attentionForward, attentionBackwardInput,
                           attentionBackwardWeight),
                 7);
}

/// Runs `layer` on the packed microbatch and on each of its samples alone
/// (its own microbatch of exactly its length): outputs, input gradients and
/// the summed parameter gradients must agree, so no sample sees another.
template <typename Shape, typename Fwd, typename BwdI, typename BwdW>
void checkPackedEqualsSeparate(const Shape &s, Fwd fwd, BwdI bwdI, BwdW bwdW) {
  const TokenShape packed = packedTokens();
  const int64_t T = packed.tokens(), Hd = s.hidden, P = countParams(s);
  // Buffers planned for the capacity hold any packing of it.
  const TokenShape capacity{packed.batch, packed.seq};
  EXPECT_LE(s.savedFloats(packed), s.savedFloats(capacity));
  EXPECT_LE(s.workspaceFloats(packed), s.workspaceFloats(capacity));

  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  std::vector<float> p(P), x(T * Hd), dy(T * Hd);
  for (auto *v : {&p, &x, &dy})
    for (float &f : *v)
      f = u(rng);

  std::vector<float> saved(s.savedFloats(capacity)),
      ws(s.workspaceFloats(capacity)), y(T * Hd), dx(T * Hd), g(P, 0.0f);
  fwd(DType::F32, s, packed, p.data(), x.data(), y.data(), saved.data(),
      ws.data());
  bwdI(DType::F32, s, packed, p.data(), g.data(), saved.data(), dy.data(),
       dx.data(), ws.data());
  bwdW(DType::F32, s, packed, saved.data(), g.data());

  std::vector<float> gAlone(P, 0.0f);
  for (int64_t q = 0; q < packed.numSeqs; ++q) {
    const TokenShape alone{1, packed.length(q)};
    const int64_t at = packed.start(q) * Hd, n = alone.tokens() * Hd;
    std::vector<float> sv(s.savedFloats(alone)), w(s.workspaceFloats(alone)),
        yq(n), dxq(n);
    fwd(DType::F32, s, alone, p.data(), x.data() + at, yq.data(), sv.data(),
        w.data());
    bwdI(DType::F32, s, alone, p.data(), gAlone.data(), sv.data(),
         dy.data() + at, dxq.data(), w.data());
    bwdW(DType::F32, s, alone, sv.data(), gAlone.data());
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(y[at + i], yq[i], 1e-5 * (1 + std::abs(yq[i])))
          << "sample " << q << " y[" << i << "]";
      EXPECT_NEAR(dx[at + i], dxq[i], 1e-5 * (1 + std::abs(dxq[i])))
          << "sample " << q << " dx[" << i << "]";
    }
  }
  for (int64_t j = 0; j < P; ++j)
    EXPECT_NEAR(g[j], gAlone[j], 1e-4 * (1 + std::abs(gAlone[j])))
        << "dparam[" << j << "]";
}

TEST(PackedKernels, MambaSamplesDoNotSeeEachOther) {
  checkPackedEqualsSeparate(MambaShape{8, 4, 3, 5, 2, 3}, mambaForward,
                            mambaBackwardInput, mambaBackwardWeight);
}

TEST(PackedKernels, AttentionSamplesDoNotSeeEachOther) {
  checkPackedEqualsSeparate(AttentionShape{8, 4, 2, 2, true}, attentionForward,
                            attentionBackwardInput, attentionBackwardWeight);
}

} // namespace

namespace {

/// An MTP depth's input as a Layer: its parameters followed by the
/// embedding table (whose rows' gradient W adds), x the previous depth's
/// normed output, y the projection.
Layer mtpInputLayer(const MtpInputShape &s, TokenShape t,
                    const std::vector<int32_t> &tokens) {
  int64_t own = 0;
  for (const ParamSpec &p : s.params())
    own += p.numel();
  Layer l = sized(s, t, own + s.vocab * s.hidden);
  l.forward = [=](const float *p, const float *x, float *y, float *sv,
                  float *ws) {
    mtpInputForward(DType::F32, s, t, p, p + own, tokens.data(), x, y, sv, ws);
    return 0.0f;
  };
  l.backwardInput = [=](const float *p, float *g, float *sv, const float *dy,
                        float *dx, float *ws) {
    mtpInputBackwardInput(DType::F32, s, t, p, g, sv, dy, dx, ws);
  };
  l.backwardWeight = [=](const float *, const float *sv, float *g, float *) {
    mtpInputBackwardWeight(DType::F32, s, t, sv, g, g + own);
  };
  return l;
}

/// An MTP depth's output as a Layer: [final norm | output weight], x the
/// depth's last hidden states, y its normed output (what the next depth
/// reads, so dy is that depth's gradient) plus the weighted loss.
Layer mtpOutputLayer(const MtpOutputShape &s, TokenShape t,
                     const std::vector<int32_t> &labels,
                     const std::vector<float> &mask) {
  Layer l = sized(s, t, s.hidden + s.vocab * s.hidden);
  l.forward = [=](const float *p, const float *x, float *y, float *sv,
                  float *ws) {
    float loss = mtpOutputForward(DType::F32, s, t, p, p + s.hidden, x,
                                  labels.data(), mask.data(), sv, ws);
    std::copy_n(mtpNormed(s, t, sv), t.tokens() * s.hidden, y);
    return float(loss * s.lossWeight);
  };
  l.backwardInput = [=](const float *p, float *g, float *sv, const float *dy,
                        float *dx, float *ws) {
    mtpOutputBackwardInput(DType::F32, s, t, p, g, p + s.hidden, g + s.hidden,
                           sv, 1.0f, dy, dx, ws);
  };
  l.backwardWeight = [=](const float *, const float *sv, float *g, float *) {
    mtpOutputBackwardWeight(DType::F32, s, t, sv, g + s.hidden);
  };
  return l;
}

std::vector<int32_t> randomTokens(int64_t n, int32_t vocab, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> pick(0, vocab - 1);
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (int32_t &v : out)
    v = pick(rng);
  return out;
}

} // namespace

TEST(KernelGradient, MtpInputAtTwoDepths) {
  for (int64_t depth : {1, 2}) {
    MtpInputShape s{11, 6, depth};
    checkGradients(mtpInputLayer(s, kTokens, randomTokens(14, 11, 3)),
                   unsigned(20 + depth));
  }
}

TEST(KernelGradient, MtpOutputWithMaskAndNextDepth) {
  MtpOutputShape s{11, 6, 2, 0.7};
  std::vector<float> mask(14, 1.0f);
  mask[3] = 0.0f;
  checkGradients(mtpOutputLayer(s, kTokens, randomTokens(14, 11, 4), mask), 31);
}

TEST(KernelGradient, ChunkedLossMatchesFiniteDifferences) {
  // The fused linear cross-entropy, 3 rows at a time over 14 (the last
  // chunk shorter), with a masked row: the input gradient makes the logits
  // again and takes the output layer's weight gradient from them too.
  MtpOutputShape s{11, 6, 1, 0.7};
  s.lossChunk = 3;
  std::vector<float> mask(14, 1.0f);
  mask[5] = 0.0f;
  checkGradients(mtpOutputLayer(s, kTokens, randomTokens(14, 11, 7), mask), 33);
}

TEST(KernelGradient, ChunkedLossIsTheWholeLoss) {
  // The same loss and gradients as the kept-logits loss, chunk by chunk
  // (any chunk, packed samples): the statistics are per row, so only the
  // output layer's weight-gradient sums regroup.
  static const int32_t cu[] = {0, 3, 7, 14};
  const TokenShape t = packedTokens(kTokens, cu, 3);
  const std::vector<int32_t> labels = randomTokens(14, 11, 8);
  std::vector<float> mask(14, 1.0f);
  mask[2] = 0.0f;
  struct Result {
    float loss;
    std::vector<float> dx, g, gAfterInput;
  };
  auto run = [&](int64_t chunk) {
    MtpOutputShape s{11, 6, 1, 0.5};
    s.lossChunk = chunk;
    Layer L = mtpOutputLayer(s, t, labels, mask);
    std::mt19937 rng(9);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const int64_t act = 14 * 6;
    std::vector<float> p(L.params), x(act), dy(act);
    fillRandom(rng, u, p, x, dy);
    std::vector<float> saved(L.saved), ws(L.workspace), y(act);
    Result r{L.forward(p.data(), x.data(), y.data(), saved.data(), ws.data()),
             std::vector<float>(act), std::vector<float>(L.params, 0.0f)};
    L.backwardInput(p.data(), r.g.data(), saved.data(), dy.data(), r.dx.data(),
                    ws.data());
    r.gAfterInput = r.g;
    L.backwardWeight(p.data(), saved.data(), r.g.data(), ws.data());
    return r;
  };
  const Result whole = run(0);
  for (int64_t chunk : {1, 4, 14}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    const Result c = run(chunk);
    // The input gradient took the output layer's weight gradient too: W
    // leaves every gradient as it was.
    EXPECT_EQ(c.g, c.gAfterInput);
    EXPECT_NEAR(c.loss, whole.loss, 1e-6f * std::abs(whole.loss));
    for (size_t i = 0; i < whole.dx.size(); ++i)
      EXPECT_NEAR(c.dx[i], whole.dx[i], 1e-6f) << i;
    for (size_t i = 0; i < whole.g.size(); ++i)
      EXPECT_NEAR(c.g[i], whole.g[i], 1e-6f) << i;
  }
  // A chunked loss keeps no logits: 14 x 11 floats fewer.
  MtpOutputShape whole0{11, 6, 1, 0.5}, chunked{11, 6, 1, 0.5};
  chunked.lossChunk = 4;
  EXPECT_EQ(whole0.savedFloats(t) - chunked.savedFloats(t), 14 * 11);
}

TEST(KernelGradient, MtpPacked) {
  // Three samples of 3, 4 and 7 tokens: the shifts stop at each boundary.
  static const int32_t cu[] = {0, 3, 7, 14};
  TokenShape t = packedTokens(kTokens, cu, 3);
  checkGradients(mtpInputLayer({11, 6, 2}, t, randomTokens(14, 11, 5)), 41);
  std::vector<float> mask(14, 1.0f);
  checkGradients(
      mtpOutputLayer({11, 6, 1, 0.5}, t, randomTokens(14, 11, 6), mask), 42);
}

TEST(MtpShift, LabelsAndTokensStayInsideTheirSequence) {
  // Depth 2 over samples [0, 3) and [3, 7): row i reads row i + 2 of its
  // own sample; the last two rows of each read nothing (label 0, mask 0).
  static const int32_t cu[] = {0, 3, 7};
  TokenShape t = packedTokens(TokenShape{1, 7}, cu, 2);
  MtpOutputShape out{16, 2, 2, 1.0};
  std::vector<int32_t> labels = {10, 11, 12, 13, 14, 15, 9};
  std::vector<float> saved(out.savedFloats(t)), ws(out.workspaceFloats(t));
  std::vector<float> params(2 + 16 * 2, 0.1f), x(7 * 2, 0.3f);
  mtpOutputForward(DType::F32, out, t, params.data(), params.data() + 2,
                   x.data(), labels.data(), nullptr, saved.data(), ws.data());
  HeadSaved h = headSaved(out, t, saved.data());
  EXPECT_EQ(std::vector<int32_t>(h.labels, h.labels + 7),
            (std::vector<int32_t>{12, 0, 0, 15, 9, 0, 0}));
  EXPECT_EQ(std::vector<float>(h.mask, h.mask + 7),
            (std::vector<float>{1, 0, 0, 1, 1, 0, 0}));

  MtpInputShape in{16, 2, 2};
  std::vector<float> inSaved(in.savedFloats(t)), inWs(in.workspaceFloats(t)),
      y(7 * 2);
  std::vector<float> inParams(2 + 2 + 2 * 4, 0.1f), table(16 * 2, 0.2f);
  mtpInputForward(DType::F32, in, t, inParams.data(), table.data(),
                  labels.data(), x.data(), y.data(), inSaved.data(),
                  inWs.data());
  MtpInputSaved m = mtpInputSaved(in, t, inSaved.data());
  EXPECT_EQ(std::vector<int32_t>(m.ids, m.ids + 7),
            (std::vector<int32_t>{12, 0, 0, 15, 9, 0, 0}));
}

//===----------------------------------------------------------------------===//
// No allocation inside a step
//===----------------------------------------------------------------------===//

// Every operator new of this test binary is counted while `countingNew` is
// set. A kernel may size its per-thread scratch on its first call; from the
// second call on, with the same shapes, it must allocate nothing.
namespace {
std::atomic<bool> countingNew{false};
std::atomic<int64_t> newCalls{0};
} // namespace

void *operator new(std::size_t bytes) {
  if (countingNew.load(std::memory_order_relaxed))
    newCalls.fetch_add(1, std::memory_order_relaxed);
  if (void *p = std::malloc(bytes ? bytes : 1))
    return p;
  throw std::bad_alloc();
}
void *operator new[](std::size_t bytes) { return operator new(bytes); }
void operator delete(void *p) noexcept { std::free(p); }
void operator delete[](void *p) noexcept { std::free(p); }
void operator delete(void *p, std::size_t) noexcept { std::free(p); }
void operator delete[](void *p, std::size_t) noexcept { std::free(p); }

namespace {

/// The operator new calls of `work` run three more times after a first run
/// (which sizes the scratch), at 1 and 2 threads. (Three: loops that share
/// their items out dynamically may give a thread items in a later run that
/// it had none of in the first; a CI run caught the scan's per-thread
/// scratch sized late that way.)
int64_t allocationsOnceWarm(const std::function<void()> &work) {
  int64_t worst = 0;
  for (int threads : {1, 2}) {
    setNumThreads(threads);
    work();
    newCalls = 0;
    countingNew = true;
    for (int run = 0; run < 3; ++run)
      work();
    countingNew = false;
    worst = std::max<int64_t>(worst, newCalls.load());
  }
  setNumThreads(1);
  return worst;
}

/// One forward, input-gradient and weight-gradient pass of `L` on buffers
/// the caller owns (as the runtime's planned buffers are).
std::function<void()> layerStep(const Layer &L) {
  const int64_t act = L.tokens.tokens() * L.hidden;
  auto p = std::make_shared<std::vector<float>>(L.params, 0.05f);
  auto g = std::make_shared<std::vector<float>>(L.params, 0.0f);
  auto x = std::make_shared<std::vector<float>>(act, 0.3f);
  auto y = std::make_shared<std::vector<float>>(act);
  auto dx = std::make_shared<std::vector<float>>(act);
  auto saved = std::make_shared<std::vector<float>>(L.saved);
  auto ws = std::make_shared<std::vector<float>>(L.workspace);
  for (int64_t i = 0; i < act; ++i)
    (*x)[size_t(i)] = float(std::sin(double(i)));
  return [=] {
    L.forward(p->data(), x->data(), y->data(), saved->data(), ws->data());
    L.backwardInput(p->data(), g->data(), saved->data(), y->data(), dx->data(),
                    ws->data());
    L.backwardWeight(p->data(), saved->data(), g->data(), ws->data());
  };
}

} // namespace

TEST(NoAllocationInAStep, EveryLayerKind) {
  const TokenShape packed = packedTokens();
  auto moeBwdI = [](DType activations, const MoeShape &s, const TokenShape &t,
                    const float *p, float *g, float *sv, const float *dy,
                    float *dx, float *ws) {
    moeBackwardInput(activations, s, t, p, g, sv, dy, dx, ws, 1.0f);
  };
  const std::pair<const char *, Layer> layers[] = {
      {"mamba", makeLayer(MambaShape{8, 4, 3, 5, 2, 3}, packed, mambaForward,
                          mambaBackwardInput, mambaBackwardWeight)},
      {"attention",
       makeLayer(AttentionShape{8, 4, 2, 2, true}, packed, attentionForward,
                 attentionBackwardInput, attentionBackwardWeight)},
      {"mlp", makeLayer(MlpShape{6, 10, Activation::Swiglu}, packed, mlpForward,
                        mlpBackwardInput, mlpBackwardWeight)},
      {"moe", makeLayer(MoeShape{6, 8, 4, 2, Activation::Gelu, 0.1}, packed,
                        moeForwardFinite, moeBwdI, moeBackwardWeight)},
      {"mtp input",
       mtpInputLayer({11, 6, 2}, packed, randomTokens(packed.tokens(), 11, 5))},
      {"mtp output (the head's loss)",
       mtpOutputLayer({11, 6, 1, 0.5}, packed,
                      randomTokens(packed.tokens(), 11, 6),
                      std::vector<float>(size_t(packed.tokens()), 1.0f))},
  };
  for (const auto &[name, layer] : layers)
    EXPECT_EQ(allocationsOnceWarm(layerStep(layer)), 0) << name;

  // The optimizer over a stage's segments, and the gradient norm.
  const std::vector<ParamSegment> segments = {
      {0, 1000, true}, {1000, 1010, false}, {1010, 70000, true}};
  std::vector<float> w(70000, 0.1f), gr(70000, 0.01f), m(70000), v(70000);
  const AdamWStep step{1e-3, 0.9, 0.999, 1e-8, 0.1, 0.001, 0.99f, 1.0};
  EXPECT_EQ(allocationsOnceWarm([&] {
              adamwUpdate(step, segments, w.data(), gr.data(), m.data(),
                          v.data(), 0);
              (void)sumOfSquares(gr.data(), segments, 0.0);
            }),
            0);
}

// The counter sees an allocation: the check above can fail.
TEST(NoAllocationInAStep, TheCounterCounts) {
  EXPECT_GT(allocationsOnceWarm([] {
              std::vector<int64_t> fresh(100);
              EXPECT_EQ(fresh.size(), 100u);
            }),
            0);
}
