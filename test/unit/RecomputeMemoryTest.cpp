//===- RecomputeMemoryTest.cpp - what activation recompute keeps ----------===//
//
// The buffers hypipe-run allocates under full recompute (runtime/exec/
// Stage.cpp): the walk of a rank's program for its recompute buffers, a
// stage's saved and recompute floats, and the time recompute adds to a
// stage's input gradient. Expected values are derived here from the layer
// shapes and the runtime's rules, not from the code under test.
//
//===----------------------------------------------------------------------===//
#include "core/model/LayerShapes.h"
#include "core/partition/AutoPartition.h"
#include "core/schedule/Buffers.h"
#include "frontend/SpecCosts.h"
#include "test/unit/SmallSpec.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace hypipe {
namespace {

using schedule::Action;
using schedule::Op;

/// Eight layers, one rank; four microbatches of 2 x 32 tokens, hidden 64.
const std::string kSpec =
    smallSpec("M*M-M*M-", "  microbatches: 4\n  schedule: gpipe\n",
              "  seq_length: 32\n  micro_batch_size: 2\n");
constexpr int64_t kActivation = 2 * 32 * 64;

ModelSpec load(const std::string &text, const char *method = nullptr,
               int64_t numLayers = 0) {
  SpecOverrides o;
  if (method) {
    o.recomputeGranularity = "full";
    o.recomputeMethod = method;
    o.recomputeNumLayers = numLayers;
  }
  auto spec = parseSpec(text, "spec.yaml", o);
  EXPECT_TRUE(static_cast<bool>(spec))
      << (spec ? "" : llvm::toString(spec.takeError()));
  return std::move(*spec);
}

/// One main layer's saved floats, from its shape.
int64_t layerSaved(const ModelSpec &spec, char symbol) {
  const ModelDims &d = spec.dims;
  const rt::TokenShape t{spec.training.microBatchSize, spec.training.seqLength};
  switch (symbol) {
  case 'M':
    return rt::mambaShape(d).savedFloats(t);
  case '*':
    return rt::attentionShape(d, spec.positionEmbedding == "rope")
        .savedFloats(t);
  default:
    return rt::mlpShape(d).savedFloats(t);
  }
}

// A recompute buffer is taken at the start of an I or B and given back at
// the end of the W or B; each F borrows one for its length. GPipe's four
// forwards then four backwards need one; a split W that lets two I run
// before their W needs two, and so does an F between an I and its W.
TEST(RecomputeMemory, TheWalkCountsRecomputeBuffers) {
  std::vector<Action> gpipe;
  for (Op op : {Op::F, Op::B})
    for (int32_t mb = 0; mb < 4; ++mb)
      gpipe.push_back({op, 0, mb});
  schedule::RankBuffers g = schedule::rankBuffers(gpipe, 1);
  EXPECT_EQ(g.savedSlots.at(0), 4);
  EXPECT_EQ(g.recomputeSlots.at(0), 1);

  std::vector<Action> split = {{Op::F, 0, 0}, {Op::F, 0, 1}, {Op::I, 0, 0},
                               {Op::I, 0, 1}, {Op::W, 0, 0}, {Op::W, 0, 1}};
  EXPECT_EQ(schedule::rankBuffers(split, 1).recomputeSlots.at(0), 2);

  std::vector<Action> between = {{Op::F, 0, 0}, {Op::I, 0, 0}, {Op::F, 0, 1},
                                 {Op::W, 0, 0}, {Op::I, 0, 1}, {Op::W, 0, 1}};
  schedule::RankBuffers b = schedule::rankBuffers(between, 1);
  EXPECT_EQ(b.recomputeSlots.at(0), 2);
  EXPECT_EQ(b.savedSlots.at(0), 2);
}

// The peak adds the most recompute buffers times one buffer's floats.
TEST(RecomputeMemory, PeakBytesCountRecomputeBuffers) {
  schedule::RankBuffers walked;
  walked.savedSlots[0] = 3;
  walked.recomputeSlots[0] = 2;
  walked.activationBuffers = 1;
  schedule::StageBuffers stage{0, 10, 100, 1000, 7};
  // 10 params at 16 bytes, floats 1000 + 3 x 100 + 2 x 7 + 1 x 5.
  EXPECT_EQ(schedule::peakTensorBytes({stage}, walked, 5, 16.0),
            10 * 16 + 4 * (1000 + 300 + 14 + 5));
}

// Uniform chunks of 1: every main layer's saved floats move to the recompute
// buffer, eight checkpoints stay, rc0 and rc1 join the workspace.
TEST(RecomputeMemory, UniformMovesEveryLayerAndKeepsAChunkInput) {
  ModelSpec none = load(kSpec), full = load(kSpec, "uniform", 1);
  auto b0 = stageBuffers(none, none.placement.stages[0]);
  auto b1 = stageBuffers(full, full.placement.stages[0]);
  ASSERT_TRUE(b0 && b1);
  int64_t layers = 0;
  for (char symbol : std::string("M*M-M*M-"))
    layers += layerSaved(none, symbol);
  EXPECT_EQ(b0->recomputeFloats, 0);
  EXPECT_EQ(b1->recomputeFloats, layers);
  EXPECT_EQ(b1->savedFloats, b0->savedFloats - layers + 8 * kActivation);
  EXPECT_EQ(b1->workspaceFloats, b0->workspaceFloats + 2 * kActivation);
  EXPECT_EQ(b1->params, b0->params);
  // Chunks of 8: the same layers, one checkpoint.
  auto b8 = stageBuffers(load(kSpec, "uniform", 8), full.placement.stages[0]);
  EXPECT_EQ(b8->recomputeFloats, layers);
  EXPECT_EQ(b8->savedFloats, b0->savedFloats - layers + kActivation);
}

// Block 2: the first two layers (M, *) recomputed, each its own chunk.
TEST(RecomputeMemory, BlockRecomputesTheFirstLayers) {
  ModelSpec none = load(kSpec), block = load(kSpec, "block", 2);
  auto b0 = stageBuffers(none, none.placement.stages[0]);
  auto b2 = stageBuffers(block, block.placement.stages[0]);
  const int64_t first = layerSaved(none, 'M') + layerSaved(none, '*');
  EXPECT_EQ(b2->recomputeFloats, first);
  EXPECT_EQ(b2->savedFloats, b0->savedFloats - first + 2 * kActivation);
}

// An MTP depth is one chunk with no checkpoint: its input projection and
// layers are recomputed, its output (the logits' pass) is kept.
TEST(RecomputeMemory, AnMtpDepthIsRecomputedWholeWithoutACheckpoint) {
  std::string text = kSpec;
  text.replace(text.find("M*M-M*M-"), 8, "M*M-/*-");
  ModelSpec none = load(text), full = load(text, "uniform", 4);
  auto b0 = stageBuffers(none, none.placement.stages[0]);
  auto b1 = stageBuffers(full, full.placement.stages[0]);
  const ModelDims &d = none.dims;
  const rt::TokenShape t{2, 32};
  const int64_t depth =
      rt::MtpInputShape{d.vocab, d.hidden, 1, false}.savedFloats(t) +
      layerSaved(none, '*') + layerSaved(none, '-');
  const int64_t mains =
      layerSaved(none, 'M') * 2 + layerSaved(none, '*') + layerSaved(none, '-');
  EXPECT_EQ(b1->recomputeFloats, mains + depth);
  EXPECT_EQ(b1->savedFloats, b0->savedFloats - mains - depth + kActivation);
}

// The rank's estimate: GPipe holds four saved buffers and one recompute
// buffer, so recompute lowers it by more than what it adds.
TEST(RecomputeMemory, RuntimeMemoryOfGpipeDrops) {
  ModelSpec none = load(kSpec), full = load(kSpec, "uniform", 8);
  SpecCosts c0 = specCosts(none), c1 = specCosts(full);
  ASSERT_TRUE(c0.runtime && c1.runtime);
  const schedule::StageBuffers &b0 = c0.runtime->stages[0],
                               &b1 = c1.runtime->stages[0];
  EXPECT_EQ(c1.runtime->peaks[0].savedSlots.at(0), 4);
  EXPECT_EQ(c1.runtime->peaks[0].recomputeSlots.at(0), 1);
  // Parameters and the pooled activations are the same.
  EXPECT_EQ(c0.rankRuntimeMemory[0] - c1.rankRuntimeMemory[0],
            4 * (4 * (b0.savedFloats - b1.savedFloats) - b1.recomputeFloats -
                 2 * kActivation));
  EXPECT_LT(c1.rankRuntimeMemory[0], c0.rankRuntimeMemory[0]);
}

// The simulator charges recompute's forward again to the input gradient
// (and so to B): in GFLOP, every recomputed layer's forward FLOPs.
TEST(RecomputeMemory, RecomputeAddsTheLayersForwardToTheInputGradient) {
  ModelSpec none = load(kSpec), block = load(kSpec, "block", 2);
  auto s0 = stepCosts(none, specCosts(none).stageCost);
  auto s2 = stepCosts(block, specCosts(block).stageCost);
  ASSERT_TRUE(s0 && s2);
  const CostSettings settings = none.partitionRequest().settings;
  const double again =
      double(layerCost('M', none.dims, settings)->forwardFlops +
             layerCost('*', none.dims, settings)->forwardFlops) /
      1e9;
  EXPECT_DOUBLE_EQ(s2->stageI[0], s0->stageI[0] + again);
  EXPECT_DOUBLE_EQ(s2->stageB[0], s0->stageB[0] + again);
  EXPECT_EQ(s2->stageF, s0->stageF);
  EXPECT_EQ(s2->stageW, s0->stageW);
}

// The cost model's Megatron-style memory (explain's memory_bytes, the
// partitioner's cap): with uniform chunks of 2, each of GPipe's four
// microbatches keeps the embedding's and the head's activations and one
// activation per chunk (four), and the largest chunk's activations come back
// once, beside the two p2p buffers.
TEST(RecomputeMemory, MegatronMemoryKeepsChunkInputs) {
  ModelSpec none = load(kSpec), full = load(kSpec, "uniform", 2);
  const AutoPartitionRequest r = full.partitionRequest();
  const CostSettings &s = r.settings;
  const int64_t activation =
      s.tokens() * r.dims.hidden * s.activationBytesPerElement();
  std::vector<int64_t> layer;
  for (char symbol : std::string("M*M-M*M-"))
    layer.push_back(layerCost(symbol, r.dims, s)->activationBytes);
  const int64_t ends = embeddingCost(r.dims, s).activationBytes +
                       headCost(r.dims, s).activationBytes;
  int64_t largest = 0;
  for (size_t i = 0; i < layer.size(); i += 2)
    largest = std::max(largest, layer[i] + layer[i + 1]);
  auto items = modelItems(r.dims, s, r.layers, r.mtpLayers, r.mtpDepths);
  RankMemory m = rankMemories(items, full.placement, r)[0];
  EXPECT_EQ(m.activations, 4 * (ends + 4 * activation));
  EXPECT_EQ(m.buffers, 2 * activation + largest);
  RankMemory m0 =
      rankMemories(items, none.placement, none.partitionRequest())[0];
  EXPECT_EQ(m0.parameters, m.parameters);
  EXPECT_EQ(m0.buffers, 2 * activation);
}

// parallel.max_memory_gib holds the automatic split to that memory with
// recompute: on two ranks with GPipe (four microbatches in flight) and 256
// tokens a sequence, the cap the balanced split needs with one chunk a
// stage is met by no split without recompute, where every microbatch in
// flight keeps a stage's activations.
TEST(RecomputeMemory, TheLoadersCapCountsRecompute) {
  std::string text = kSpec;
  text.replace(text.find("seq_length: 32"), 14, "seq_length: 256");
  text.replace(text.find("  microbatches"), 0, "  pp: 2\n");
  auto full = parseSpec(text, "spec.yaml", [] {
    SpecOverrides o;
    o.recomputeGranularity = "full";
    o.recomputeMethod = "uniform";
    o.recomputeNumLayers = 8;
    return o;
  }());
  ASSERT_TRUE(static_cast<bool>(full));
  const AutoPartitionRequest r = full->partitionRequest();
  int64_t need = 0;
  for (const RankMemory &m : rankMemories(
           modelItems(r.dims, r.settings, r.layers, r.mtpLayers, r.mtpDepths),
           full->placement, r))
    need = std::max(need, m.total());
  text.replace(text.find("  schedule: gpipe"), 0,
               fmt::format("  max_memory_gib: {:.9f}\n",
                           double(need) * 1.001 / (1 << 30)));
  auto none = parseSpec(text, "spec.yaml");
  ASSERT_FALSE(static_cast<bool>(none));
  EXPECT_NE(llvm::toString(none.takeError()).find("cannot fit"),
            std::string::npos);
  text.replace(text.find("  seq_length"), 0,
               "  recompute:\n    granularity: full\n    method: uniform\n"
               "    num_layers: 8\n");
  auto spec = parseSpec(text, "spec.yaml");
  EXPECT_TRUE(static_cast<bool>(spec))
      << (spec ? "" : llvm::toString(spec.takeError()));
}

} // namespace
} // namespace hypipe
