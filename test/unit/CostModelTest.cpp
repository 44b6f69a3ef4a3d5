//===- CostModelTest.cpp - cost model against hand-computed values --------===//
//
// Small dimensions so every expected number below can be checked by hand;
// the arithmetic is spelled out next to each.
//
//===----------------------------------------------------------------------===//
#include "core/model/CostModel.h"
#include "core/Saturating.h"
#include "core/schedule/Schedule.h"
#include "core/schedule/Simulate.h"

#include <gtest/gtest.h>

namespace hypipe {
namespace {

ModelDims smallDims() {
  ModelDims d;
  d.hidden = 8;
  d.ffnHidden = 16;
  d.numHeads = 2; // k = 4
  d.numQueryGroups = 1;
  d.mambaNumHeads = 2;
  d.mambaHeadDim = 4; // inner = 8
  d.mambaState = 3;
  d.mambaNumGroups = 1;
  d.mambaConvWidth = 4;
  d.numExperts = 4;
  d.moeTopK = 2;
  d.vocab = 32;
  d.tieEmbeddings = true;
  d.activation = "squared_relu";
  return d;
}

CostSettings settings() {
  CostSettings s;
  s.seqLength = 5;
  s.microBatchSize = 2; // T = 10 tokens
  return s;
}

TEST(CostModel, Mlp) {
  ItemCost c = *layerCost('-', smallDims(), settings());
  // norm 8 + fc1 8*16 + fc2 16*8
  EXPECT_EQ(c.params, 8 + 128 + 128);
  // 2*T*in*out per GEMM: 2*10*8*16 twice
  EXPECT_EQ(c.forwardFlops, 2 * 2560);
  EXPECT_EQ(c.backwardInputFlops, 2 * 2560);
  EXPECT_EQ(c.backwardWeightFlops, 2 * 2560);
  // T*(2H + F + F)*4 bytes = 10*(16+16+16)*4
  EXPECT_EQ(c.activationBytes, 1920);
  EXPECT_EQ(c.sendBytes, 10 * 8 * 4);
}

TEST(CostModel, SwigluDoublesTheUpProjection) {
  ModelDims d = smallDims();
  d.activation = "swiglu";
  EXPECT_EQ(layerCost('-', d, settings())->params, 8 + 8 * 32 + 16 * 8);
}

TEST(CostModel, Attention) {
  ItemCost c = *layerCost('*', smallDims(), settings());
  // norm 8 + QKV 8*(2*4 + 2*1*4) + out (2*4)*8
  EXPECT_EQ(c.params, 8 + 128 + 64);
  // QKV 2*10*8*16 = 2560, out 2*10*8*8 = 1280, core 2*b*heads*s*s*k =
  // 2*2*2*25*4 = 800
  EXPECT_EQ(c.forwardFlops, 2560 + 1280 + 800);
  EXPECT_EQ(c.backwardInputFlops, 2560 + 1280 + 1600);
  EXPECT_EQ(c.backwardWeightFlops, 2560 + 1280);
  // T*(2H + q + 2kv + q)*4 + T*heads*4 = 10*(16+8+8+8)*4 + 80
  EXPECT_EQ(c.activationBytes, 1600 + 80);
}

TEST(CostModel, Mamba) {
  ItemCost c = *layerCost('M', smallDims(), settings());
  // in_proj width 2*8 + 2*1*3 + 2 = 24; conv channels 8 + 6 = 14
  // norm 8 + in_proj 8*24 + conv 14*4 + 14 + A_log/D/dt_bias 6 + gated norm 8 +
  // out 8*8
  EXPECT_EQ(c.params, 8 + 192 + 56 + 14 + 6 + 8 + 64);
  // in 2*10*8*24 = 3840, conv 2*10*14*4 = 1120, scan 4*10*8*3 = 960, out
  // 2*10*8*8 = 1280
  EXPECT_EQ(c.forwardFlops, 3840 + 1120 + 960 + 1280);
  EXPECT_EQ(c.backwardInputFlops, 3840 + 1120 + 1920 + 1280);
  EXPECT_EQ(c.backwardWeightFlops, 3840 + 1120 + 1280);
  // T*(2H + 24 + 14 + 2*8)*4 = 10*70*4
  EXPECT_EQ(c.activationBytes, 2800);
}

TEST(CostModel, Moe) {
  ItemCost c = *layerCost('E', smallDims(), settings());
  // norm 8 + router 8*4 + 4 experts * (8*16 + 16*8)
  EXPECT_EQ(c.params, 8 + 32 + 4 * 256);
  // router 2*10*8*4 = 640; experts over T*k = 20 tokens: 2*20*8*16*2 = 10240
  EXPECT_EQ(c.forwardFlops, 640 + 10240);
  EXPECT_EQ(c.backwardWeightFlops, 640 + 10240);
  // T*(2H + E)*4 + T*k*(H + F + F)*4 = 10*20*4 + 20*40*4
  EXPECT_EQ(c.activationBytes, 800 + 3200);
}

TEST(CostModel, EmbeddingHeadAndMtp) {
  ModelDims d = smallDims();
  EXPECT_EQ(embeddingCost(d, settings()).params, 32 * 8);
  ItemCost head = headCost(d, settings());
  EXPECT_EQ(head.params, 8); // tied: only the final norm
  EXPECT_EQ(head.forwardFlops, 2 * 10 * 8 * 32);
  // T*2H*4 + T*V*4 (logits)
  EXPECT_EQ(head.activationBytes, 640 + 1280);
  d.tieEmbeddings = false;
  EXPECT_EQ(headCost(d, settings()).params, 8 + 256);
  // two norms + 2H*H projection + final norm
  EXPECT_EQ(mtpDepthCost(d, settings()).params, 16 + 128 + 8);
}

ModelDims gdnDims() {
  ModelDims d = smallDims();
  d.activation = "swiglu";
  d.gdnNumKeyHeads = 1;
  d.gdnNumValueHeads = 2;
  d.gdnKeyHeadDim = 4;   // q and k 4 wide each
  d.gdnValueHeadDim = 2; // v and z 4 wide each
  d.gdnConvWidth = 3;
  return d;
}

TEST(CostModel, GatedDeltaNet) {
  ItemCost c = *layerCost('G', gdnDims(), settings());
  // conv channels [q k v] 4+4+4 = 12; in_proj rows 12 + z 4 + beta 2 +
  // alpha 2 = 20. norm 8 + in_proj 20*8 + conv 12*3 + dt_bias 2 + A_log 2
  // + out_norm 2 (dv) + out_proj 8*4
  EXPECT_EQ(c.params, 8 + 160 + 36 + 2 + 2 + 2 + 32);
  // in_proj 2*10*8*20 = 3200, conv 2*10*12*3 = 720, out_proj 2*10*4*8 =
  // 640; the rule: two sequences of 5 tokens, one chunk of 5 each, per
  // value head 2*(25*(12+4) + 125/6 + 3*5*4*2) = 2*(400+20+120) = 1080,
  // times 2 sequences and 2 value heads.
  EXPECT_EQ(c.forwardFlops, 3200 + 720 + 640 + 4 * 1080);
  EXPECT_EQ(c.backwardInputFlops, 3200 + 720 + 640 + 2 * 4 * 1080);
  EXPECT_EQ(c.backwardWeightFlops, 3200 + 720 + 640);
  // Two stream tensors 2*10*8*4, then T*(in_proj 20 + conv 12 + output 4 +
  // gated 4)*4 bytes, and one 4x2 float state per chunk (2) and value head
  // (2).
  EXPECT_EQ(c.activationBytes, 640 + 10 * 40 * 4 + 2 * 2 * 8 * 4);

  // 130 tokens: two whole chunks of 64 and one of 2, per value head
  // 2*(2*(4096*16 + 262144/6 + 3*64*8) + (4*16 + 8/6 + 3*2*8)).
  CostSettings s;
  s.seqLength = 130;
  s.microBatchSize = 1;
  ItemCost longer = *layerCost('G', gdnDims(), s);
  const int64_t perHead = 2 * (2 * (65536 + 43690 + 1536) + (64 + 1 + 48));
  EXPECT_EQ(longer.forwardFlops, 2 * 130 * 8 * 20 + 2 * 130 * 12 * 3 +
                                     2 * 130 * 4 * 8 + 2 * perHead);
}

TEST(CostModel, UnknownKindsAreNotCosted) {
  EXPECT_FALSE(layerCost('?', smallDims(), settings()).has_value());
  auto items = modelItems(smallDims(), settings(), "M?", "", 0);
  ASSERT_EQ(items.size(), 4u);
  EXPECT_FALSE(items[2].modelled);
}

/// MLA with every part: heads 2, q_lora 6, kv_lora 4, qk 3 + pe 2, v 5.
ModelDims mlaDims() {
  ModelDims d = smallDims();
  d.qLoraRank = 6;
  d.kvLoraRank = 4;
  d.qkHeadDim = 3;
  d.qkPosEmbHeadDim = 2;
  d.vHeadDim = 5;
  d.qkLayernorm = true;
  return d;
}

TEST(CostModel, MultiLatentAttention) {
  ItemCost c = *layerCost('+', mlaDims(), settings());
  // input norm 8, q_down 6*8, q_up norm 6, q_up 2*(3+2)*6, kv_down
  // (4+2)*8, kv_up norm 4, kv_up 2*(3+5)*4, linear_proj 8*(2*5)
  EXPECT_EQ(c.params, 8 + 48 + 6 + 60 + 48 + 4 + 64 + 80);
  // GEMMs 2*T*in*out: 2*10*(8*6 + 6*10 + 8*6 + 4*16 + 10*8) = 6000; the
  // core b*heads*s*s*((qk+pe) + v) = 2*2*25*10 over the lower triangle.
  EXPECT_EQ(c.forwardFlops, 6000 + 1000);
  EXPECT_EQ(c.backwardInputFlops, 6000 + 2000);
  EXPECT_EQ(c.backwardWeightFlops, 6000);
  // T*4 bytes * (2H + latents (6 + 6) and normed (6 + 4) + q and k 2*10 +
  // v and context 2*10) + T*heads*4 (log-sum-exp)
  EXPECT_EQ(c.activationBytes, 10 * 4 * (16 + 22 + 20 + 20) + 10 * 2 * 4);
  EXPECT_EQ(c.sendBytes, 10 * 8 * 4);
  EXPECT_TRUE(c.modelled);
}

TEST(CostModel, MultiLatentAttentionWithoutQueryLatent) {
  ModelDims d = mlaDims();
  d.qLoraRank = 0;
  d.qkLayernorm = false;
  ItemCost c = *layerCost('+', d, settings());
  // input norm 8, linear_q_proj 10*8, kv_down 6*8, kv_up 16*4, proj 8*10
  EXPECT_EQ(c.params, 8 + 80 + 48 + 64 + 80);
  EXPECT_EQ(c.forwardFlops, 20 * (8 * 10 + 8 * 6 + 4 * 16 + 10 * 8) + 1000);
}

TEST(CostModel, MultiLatentAttentionSplitsHeadsOverTensorParallelRanks) {
  CostSettings s = settings();
  s.tp = 2;
  ItemCost c = *layerCost('+', mlaDims(), s);
  // Whole on every rank: the norms (8, 6, 4) and the down-projections
  // (48, 48); halved: q_up 60, kv_up 64 and linear_proj 80.
  EXPECT_EQ(c.params, 8 + 6 + 4 + 48 + 48 + (60 + 64 + 80) / 2);
  // One head per rank: 2*10*(8*6 + 6*5 + 8*6 + 4*8 + 5*8) + 1*2*25*10.
  EXPECT_EQ(c.forwardFlops, 20 * (48 + 30 + 48 + 32 + 40) + 500);
}

/// DSA over mlaDims' MLA: 2 indexer heads of 4, the top 3 keys.
ModelDims dsaDims() {
  ModelDims d = mlaDims();
  d.dsaIndexerNHeads = 2;
  d.dsaIndexerHeadDim = 4;
  d.dsaIndexerTopk = 3;
  return d;
}

TEST(CostModel, SparseAttention) {
  ItemCost c = *layerCost('D', dsaDims(), settings());
  // MLA's 318, and the indexer's linear_wq_b 8*6, linear_wk 4*8, k_norm
  // weight and bias 4+4, linear_weights_proj 2*8.
  EXPECT_EQ(c.params, 318 + 48 + 32 + 8 + 16);
  // MLA's GEMMs 6000; its core over 1+2+3+3+3 = 12 pairs a sample (the top
  // 3 of each causal prefix of 5): 2*2*(2*12)*10 = 960; the indexer's
  // GEMMs forward and weight-gradient only (its inputs are detached)
  // 2*10*(6*8 + 8*4 + 8*2) = 1920; its dense scores b*nI*dI*s*s = 400
  // (their gradient 800); the KL target's scores b*heads*(qk+pe)*s*s = 500.
  EXPECT_EQ(c.forwardFlops, 6000 + 960 + 1920 + 400 + 500);
  EXPECT_EQ(c.backwardInputFlops, 6000 + 2 * 960 + 800);
  EXPECT_EQ(c.backwardWeightFlops, 6000 + 1920);
  // MLA's 3200 bytes; the indexer's q, k before and after its norm and
  // weights 10*(8+8+2)*4, the dense score gradient 2*25*4 and the top-k
  // indices 10*3*4.
  EXPECT_EQ(c.activationBytes, 3200 + 720 + 200 + 120);
  EXPECT_TRUE(c.modelled);

  // With top-k at least the sample length every key is kept: MLA's core.
  ModelDims dense = dsaDims();
  dense.dsaIndexerTopk = 8;
  EXPECT_EQ(layerCost('D', dense, settings())->forwardFlops,
            layerCost('+', dense, settings())->forwardFlops + 1920 + 400 + 500);
}

TEST(CostModel, ModelItemsCarryMtpOnTheHead) {
  ModelDims d = smallDims();
  auto items = modelItems(d, settings(), "M-", "*", 2);
  ASSERT_EQ(items.size(), 4u);
  EXPECT_EQ(items.front().name, "embedding");
  EXPECT_EQ(items.back().name, "head");
  EXPECT_EQ(items.back().params,
            headCost(d, settings()).params +
                2 * (mtpDepthCost(d, settings()).params +
                     layerCost('*', d, settings())->params));
  EXPECT_EQ(items.back().sendBytes, 0);
}

TEST(CostModel, MicrobatchesInFlight) {
  EXPECT_EQ(
      peakMicrobatchesInFlight(schedule::ScheduleKind::OneFOneB, 4, 1, 8, 0),
      4);
  EXPECT_EQ(
      peakMicrobatchesInFlight(schedule::ScheduleKind::OneFOneB, 4, 1, 8, 3),
      1);
  EXPECT_EQ(
      peakMicrobatchesInFlight(schedule::ScheduleKind::OneFOneB, 4, 1, 2, 0),
      2);
  EXPECT_EQ(peakMicrobatchesInFlight(schedule::ScheduleKind::GPipe, 4, 1, 8, 3),
            8);
  // Megatron's interleaved warm-up on rank 0 of pp=4, vpp=2: 3*2 + 1*4 = 10
  // chunks, +1 in steady state = 11 chunks = 5.5 microbatches.
  EXPECT_EQ(peakMicrobatchesInFlight(schedule::ScheduleKind::Interleaved1F1B, 4,
                                     2, 8, 0),
            5.5);
  EXPECT_EQ(trainingBytesPerParameter(false), 16);
  EXPECT_EQ(trainingBytesPerParameter(true), 18);
  // Megatron's distributed optimizer: the optimizer's part over dp ranks.
  EXPECT_EQ(trainingBytesPerParameter(false, 2), 12);
  EXPECT_EQ(trainingBytesPerParameter(false, 8), 9);
  EXPECT_EQ(trainingBytesPerParameter(true, 4), 9);
}

// The closed form the partitioner and `hypipe explain` use (fast, no
// schedule built) against the simulator running the schedule's programs
// (the reference): the same peak in-flight microbatches on every rank, for
// every schedule over a grid of shapes.
TEST(CostModel, InFlightClosedFormEqualsTheSimulator) {
  int checked = 0;
  for (const std::string &name : schedule::scheduleNames())
    for (int64_t pp : {1, 2, 3, 4})
      for (int64_t vpp : {1, 2, 3})
        for (int64_t m : {1, 2, 4, 5, 8, 12}) {
          schedule::ScheduleRequest request{*schedule::parseScheduleKind(name),
                                            pp, vpp, m};
          auto built = schedule::buildSchedule(request);
          if (!built)
            continue; // a shape this schedule refuses
          auto sim = hypipe::schedule::simulate(*built);
          ASSERT_TRUE(static_cast<bool>(sim)) << toString(sim.takeError());
          for (int64_t r = 0; r < pp; ++r) {
            double simulated =
                static_cast<double>(sim->peakActivations[r]) / vpp;
            EXPECT_DOUBLE_EQ(
                peakMicrobatchesInFlight(*schedule::parseScheduleKind(name), pp,
                                         vpp, m, r),
                simulated)
                << name << " pp=" << pp << " vpp=" << vpp << " m=" << m
                << " rank " << r;
            ++checked;
          }
        }
  EXPECT_GT(checked, 300);
}

// Tests that sums of the cost model and the memory estimate stop at
// INT64_MAX instead of wrapping into a negative estimate that would pass
// every bound.
TEST(CostModel, SumsStopAtTheTopInsteadOfWrapping) {
  ItemCost big, more;
  big.forwardFlops = kInt64Max - 1;
  big.activationBytes = kInt64Max / 2 + 1;
  more.forwardFlops = 5;
  more.activationBytes = kInt64Max / 2 + 1;
  big += more;
  EXPECT_EQ(big.forwardFlops, kInt64Max);
  EXPECT_EQ(big.activationBytes, kInt64Max);
  EXPECT_EQ(big.totalFlops(), kInt64Max);
  EXPECT_EQ(rankMemoryEstimate(kInt64Max / 2, 16, 0, 1, 0), kInt64Max);
  EXPECT_EQ(rankMemoryEstimate(1, 16, 1e30, 2, 0), kInt64Max);
  RankMemory memory = rankMemory(1, 16, 1e30, 2, 7);
  EXPECT_EQ(memory.parameters, 16);
  EXPECT_EQ(memory.activations, kInt64Max);
  EXPECT_EQ(memory.buffers, 7);
  EXPECT_EQ(memory.total(), kInt64Max);
}

// Tests that at the size bounds (SizeBounds.h: widths, Mamba inner width,
// 2^36-element weights, 2^22 tokens of sequences of 2^20) every count of
// one item fits an int64, and a model's sums past it stop at INT64_MAX.
TEST(CostModel, CountsAtTheSizeBoundsDoNotWrap) {
  ModelDims d;
  d.hidden = 1 << 16;
  d.ffnHidden = 1 << 18;
  d.vocab = 1 << 20;    // V x H = 2^36
  d.numHeads = 1 << 16; // k = 1
  d.numQueryGroups = 1 << 16;
  d.mambaNumHeads = 1 << 10; // inner = 2^18
  d.mambaHeadDim = 1 << 8;
  d.mambaState = 1 << 10;
  d.mambaNumGroups = 1 << 10; // G x N x H = 2^36
  d.mambaConvWidth = 64;
  d.numExperts = 1 << 12;
  d.moeTopK = 1 << 12;
  d.moeFfnHidden = 1 << 8; // X x F_e x H = 2^36
  d.activation = "swiglu";
  ASSERT_FALSE(checkModelDims(d).has_value());
  CostSettings s;
  s.seqLength = 1 << 20;
  s.microBatchSize = 4;
  auto fits = [](const ItemCost &c) {
    for (int64_t count :
         {c.params, c.forwardFlops, c.backwardInputFlops, c.backwardWeightFlops,
          c.activationBytes, c.sendBytes, c.totalFlops()})
      EXPECT_TRUE(count >= 0 && count < kInt64Max) << c.name << " " << count;
  };
  for (char symbol : std::string("M*-E"))
    fits(*layerCost(symbol, d, s));
  fits(embeddingCost(d, s));
  fits(headCost(d, s));
  fits(mtpDepthCost(d, s));

  ItemCost sum;
  for (const ItemCost &item : modelItems(d, s, std::string(64, 'E'), "", 0))
    sum += item;
  EXPECT_EQ(sum.forwardFlops, kInt64Max);
  EXPECT_EQ(sum.totalFlops(), kInt64Max);
}

} // namespace
} // namespace hypipe

// DualPipeV's closed form is read off its generated order; the simulator,
// which tracks every rank's stage activations itself, must agree (in
// chunks: two per microbatch on a V).
TEST(CostModel, DualPipeVInFlightMatchesTheSimulator) {
  for (auto [pp, m] : {std::pair<int64_t, int64_t>{2, 4}, {4, 8}, {4, 11}}) {
    auto built = hypipe::schedule::buildSchedule(
        {hypipe::schedule::ScheduleKind::DualPipeV, pp, 2, m});
    ASSERT_TRUE(static_cast<bool>(built));
    hypipe::schedule::insertCommunication(*built);
    auto sim = hypipe::schedule::simulate(*built);
    ASSERT_TRUE(static_cast<bool>(sim));
    for (int64_t r = 0; r < pp; ++r)
      EXPECT_EQ(2 * hypipe::peakMicrobatchesInFlight(
                        hypipe::schedule::ScheduleKind::DualPipeV, pp, 2, m, r),
                double(sim->peakActivations[size_t(r)]))
          << "pp " << pp << " m " << m << " rank " << r;
  }
}
