//===- SavedStashTest.cpp - typed saved tensors and their packed copies
//----===//
//
// Every layer kind's layout cuts exactly the floats its shape saves, with
// each statistic and index four bytes; a bf16 stage's saved buffer packs in
// place and widens back bit for bit; the stash keeps every microbatch's
// tensors through any order of F, I and W, in one float buffer and a slot
// for each other microbatch in flight.
//
//===----------------------------------------------------------------------===//

#include "core/model/BufferLayouts.h"
#include "core/numeric/Bf16.h"
#include "runtime/exec/SavedBuffers.h"
#include "runtime/formats/StageProgram.h"
#include "runtime/kernels/Target.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

using namespace hypipe;
using namespace hypipe::rt;

namespace {

ModelDims everyKindDims() {
  ModelDims d;
  d.hidden = 16;
  d.ffnHidden = 24;
  d.numHeads = 2;
  d.numQueryGroups = 1;
  d.mambaNumHeads = 2;
  d.mambaHeadDim = 8;
  d.mambaState = 4;
  d.gdnNumKeyHeads = 1;
  d.gdnNumValueHeads = 2;
  d.gdnKeyHeadDim = 4;
  d.gdnValueHeadDim = 4;
  d.numExperts = 4;
  d.moeTopK = 2;
  d.vocab = 40;
  d.kvLoraRank = 8;
  d.qLoraRank = 6;
  d.qkHeadDim = 4;
  d.qkPosEmbHeadDim = 2;
  d.vHeadDim = 4;
  d.qkLayernorm = true;
  d.dsaIndexerNHeads = 2;
  d.dsaIndexerHeadDim = 4;
  d.dsaIndexerTopk = 2;
  d.activation = "swiglu";
  return d;
}

std::vector<LayerShape> everyKind(const ModelDims &d, int64_t seq) {
  DsaShape dsa = dsaShape(d);
  dsa.seq = seq;
  ModelDims noLatent = d;
  noLatent.qLoraRank = 0;
  noLatent.qkLayernorm = false;
  return {embeddingShape(d),
          mambaShape(d),
          gdnShape(d),
          attentionShape(d, true),
          mlaShape(d),
          mlaShape(noLatent),
          dsa,
          mlpShape(d),
          moeShape(d),
          headShape(d),
          MtpInputShape{d.vocab, d.hidden, 1, false},
          MtpOutputShape{d.vocab, d.hidden, 1}};
}

/// Floats of `spans` in one buffer, checking they follow each other from
/// its start.
int64_t contiguousFloats(const std::vector<SavedSpan> &spans, bool again) {
  int64_t end = 0;
  for (const SavedSpan &s : spans)
    if (s.again == again) {
      EXPECT_EQ(s.offset, end);
      end = s.offset + s.floats;
    }
  return end;
}

} // namespace

// Also with sequence parallelism's shards (a rank of 2 keeping its half of
// the layer's input and rstd), which every kind but the embedding saves
// less with.
TEST(SavedLayouts, EveryKindCutsExactlyTheFloatsItsShapeSaves) {
  const ModelDims d = everyKindDims();
  static const int32_t cu[] = {0, 3, 10};
  const TokenShape plain{2, 5}, packed = packedTokens(plain, cu, 2);
  auto sharded = [](LayerShape shape) {
    std::visit(
        [](auto &s) {
          if constexpr (!std::is_same_v<std::decay_t<decltype(s)>,
                                        EmbeddingShape>)
            s.sequenceShards = 2;
        },
        shape);
    return shape;
  };
  for (const TokenShape &t : {plain, packed})
    for (const LayerShape &whole : everyKind(d, 5)) {
      for (bool split : {false, true}) {
        const LayerShape shape = split ? sharded(whole) : whole;
        const RecomputeModuleSet all = selectiveModulesOf(kindOf(shape));
        for (RecomputeModuleSet modules : {RecomputeModuleSet(0), all}) {
          SCOPED_TRACE(std::string(layerKindName(kindOf(shape))) +
                       (t.cuSeqlens ? " packed" : "") +
                       (modules ? " selective" : "") +
                       (split ? " sharded" : ""));
          const std::vector<SavedSpan> spans = savedSpansOf(shape, t, modules);
          const int64_t again = recomputedFloatsOf(shape, t, modules);
          EXPECT_EQ(contiguousFloats(spans, false),
                    savedFloatsOf(shape, t, Target::Cpu) - again);
          EXPECT_EQ(contiguousFloats(spans, true), again);
        }
      }
      if (kindOf(whole) != LayerKind::Embedding)
        EXPECT_LT(savedFloatsOf(sharded(whole), t, Target::Cpu),
                  savedFloatsOf(whole, t, Target::Cpu))
            << layerKindName(kindOf(whole));
    }
}

TEST(SavedLayouts, StatisticsAndIndicesKeepFourBytes) {
  const ModelDims d = everyKindDims();
  const TokenShape t{2, 5};
  const int64_t T = t.tokens();
  auto typesOf = [&](const LayerShape &s) {
    std::vector<std::pair<int64_t, SavedType>> out;
    for (const SavedSpan &span : savedSpansOf(s, t))
      out.push_back({span.floats, span.type});
    return out;
  };
  const SavedType act = SavedType::Activation, f32 = SavedType::F32,
                  i32 = SavedType::I32;
  // x, xn, rstd, qkv, log-sum-exp, context, dqkv, dout.
  const AttentionShape a = attentionShape(d, true);
  EXPECT_EQ(typesOf(a), (std::vector<std::pair<int64_t, SavedType>>{
                            {T * a.hidden, act},
                            {T * a.hidden, act},
                            {T, f32},
                            {T * a.qkvWidth(), act},
                            {T * a.heads, f32},
                            {T * a.contextWidth(), act},
                            {T * a.qkvWidth(), act},
                            {T * a.hidden, act}}));
  // The head keeps the logits as activations (its largest tensor: two
  // bytes a value packed), each row's max and scale and the mask in fp32,
  // the labels in int32.
  const int64_t H = d.hidden;
  EXPECT_EQ(typesOf(headShape(d)),
            (std::vector<std::pair<int64_t, SavedType>>{{T * H, act},
                                                        {T * H, act},
                                                        {T, f32},
                                                        {T * d.vocab, act},
                                                        {T, f32},
                                                        {T, f32},
                                                        {T, f32},
                                                        {T, i32}}));
  // MoE: expert ids, counts, the row map and the routed counts are int32;
  // probabilities, top-k weights and the aux loss fp32.
  int indices = 0, stats = 0;
  for (const auto &[floats, type] : typesOf(moeShape(d))) {
    indices += type == i32;
    stats += type == f32;
  }
  EXPECT_EQ(indices, 4);
  EXPECT_EQ(stats, 4); // rstd, probs, top-k weights, aux
}

namespace {

/// A bf16 stage of an attention, a MoE and an MLP layer, their saved
/// ranges one after another, a full-recompute checkpoint between them.
StageProgram bf16Program() {
  const ModelDims d = everyKindDims();
  StageProgram p;
  p.activations = DType::BF16;
  p.tokens = {2, 5};
  p.hidden = d.hidden;
  int64_t at = 0;
  for (const LayerShape &s :
       {LayerShape(attentionShape(d, true)), LayerShape(moeShape(d)),
        LayerShape(mlpShape(d))}) {
    ProgramLayer l;
    l.kind = kindOf(s);
    l.shape = l.shard = s;
    const int64_t bytes = 4 * savedFloatsOf(s, p.tokens, Target::Cpu);
    l.saved = {at, bytes, DType::F32};
    at += bytes;
    p.layers.push_back(l);
  }
  KernelCall save;
  save.op = CallOp::Save;
  save.range = {at, activationBytes(p), DType::F32};
  p.forward.push_back(save);
  p.savedBytes = at + save.range.bytes;
  return p;
}

/// Floats of the program's saved buffer: its bf16 runs bf16 values drawn
/// from `seed`, the rest any floats.
std::vector<float> savedValues(const StageProgram &p, const TokenShape &t,
                               uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(size_t(p.savedBytes / 4), 0.0f);
  for (const StashRun &r : stashRuns(p, t))
    for (int64_t i = 0; i < r.floats; ++i) {
      const float x = normal(rng) * 3.0f;
      v[size_t(r.offset + i)] = r.bf16 ? bf16::round(x) : x;
    }
  return v;
}

/// The floats of `runs` of a and b are the same bits.
void expectSameRuns(const std::vector<StashRun> &runs, const float *a,
                    const float *b) {
  for (const StashRun &r : runs)
    ASSERT_EQ(std::memcmp(a + r.offset, b + r.offset, size_t(r.floats) * 4), 0)
        << "run at " << r.offset;
}

} // namespace

TEST(StashRuns, PackInPlaceAndWidenBackBitForBit) {
  const StageProgram p = bf16Program();
  const std::vector<StashRun> runs = stashRuns(p, p.tokens);
  int64_t covered = 0, bf16 = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    covered += runs[i].floats;
    bf16 += runs[i].bf16 ? runs[i].floats : 0;
    EXPECT_LE(runs[i].at, 4 * runs[i].offset); // what packing in place needs
    EXPECT_EQ(runs[i].at % 4, 0);
    if (i > 0) // sorted, apart, neighbours of a kind joined
      EXPECT_TRUE(runs[i].offset > runs[i - 1].offset + runs[i - 1].floats ||
                  runs[i].bf16 != runs[i - 1].bf16);
  }
  EXPECT_EQ(covered, p.savedBytes / 4);
  EXPECT_GT(bf16, covered / 2);
  EXPECT_EQ(stashBytes(runs), 4 * covered - 2 * bf16);

  std::unique_ptr<Device> cpu = makeHostDevice();
  const std::vector<float> before = savedValues(p, p.tokens, 7);
  std::vector<float> buffer = before;
  cpu->packSaved(buffer.data(), runs);
  EXPECT_NE(std::memcmp(buffer.data(), before.data(), size_t(stashBytes(runs))),
            0);
  cpu->unpackSaved(buffer.data(), runs);
  expectSameRuns(runs, buffer.data(), before.data());

  // fp32 programs pack nothing into two bytes.
  StageProgram f32 = p;
  f32.activations = DType::F32;
  for (const StashRun &r : stashRuns(f32, f32.tokens))
    EXPECT_FALSE(r.bf16);
}

TEST(SavedStash, KeepsEveryMicrobatchThroughAnyOrderOfPasses) {
  const StageProgram p = bf16Program();
  std::unique_ptr<Device> cpu = makeHostDevice();
  const int64_t floats = p.savedBytes / 4;
  // Microbatch 2 is packed (shorter): its runs differ from the others'.
  static const int32_t cu[] = {0, 4, 8};
  const TokenShape full = p.tokens, shorter = packedTokens(p.tokens, cu, 2);
  auto tokensOf = [&](int64_t mb) { return mb == 2 ? shorter : full; };
  std::map<int64_t, std::vector<float>> expected;
  const int64_t base = cpu->liveBytes();
  int64_t slotBytes = 0;
  {
    SavedStash stash(*cpu, p, floats);
    slotBytes = stash.slotBytes();
    EXPECT_LT(slotBytes, 4 * floats);
    auto forward = [&](int64_t mb) {
      float *open = stash.open(mb, tokensOf(mb), true);
      expected[mb] = savedValues(p, tokensOf(mb), uint32_t(100 + mb));
      std::memcpy(open, expected[mb].data(), size_t(floats) * 4);
    };
    // I finds what F left and writes new values (its gradients for W).
    auto inputGradient = [&](int64_t mb) {
      float *open = stash.open(mb, tokensOf(mb), false);
      expectSameRuns(stashRuns(p, tokensOf(mb)), open, expected[mb].data());
      expected[mb] = savedValues(p, tokensOf(mb), uint32_t(200 + mb));
      std::memcpy(open, expected[mb].data(), size_t(floats) * 4);
    };
    auto weightGradient = [&](int64_t mb) {
      float *open = stash.open(mb, tokensOf(mb), false);
      expectSameRuns(stashRuns(p, tokensOf(mb)), open, expected[mb].data());
      stash.release(mb);
    };
    // GPipe's warm-up, then zero-bubble's split passes out of order.
    forward(0);
    forward(1);
    forward(2);
    inputGradient(1);
    forward(3);
    weightGradient(0);
    inputGradient(2);
    inputGradient(3);
    weightGradient(1);
    weightGradient(3);
    inputGradient(2); // again: it finds the values I wrote
    weightGradient(2);
    // At most 4 in flight: the open buffer and 3 slots.
    EXPECT_LE(cpu->peakBytes() - base, 4 * floats + 3 * slotBytes);
  }
  EXPECT_EQ(cpu->liveBytes(), base);
}
