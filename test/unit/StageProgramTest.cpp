//===- StageProgramTest.cpp - stages lowered to kernel programs -----------===//
//
// The kernel programs `hypipe compile` writes for real specs (every layer
// kind, MTP, empty stages, both targets) pass the runtime's checks and chain
// their activations as the stage composition requires; and every way a
// manifest could make the interpreter read or write out of place is
// refused by checkStageProgram, each by its own rule.
//
//===----------------------------------------------------------------------===//
#include "runtime/formats/StageProgram.h"
#include "conversion/SpecToHybrid.h"
#include "passes/Passes.h"
#include "targets/Artifact.h"
#include "targets/StageProgram.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <tuple>

namespace hypipe {
namespace {

using rt::KernelCall;
using rt::LayerKind;
using rt::Slot;

struct Lowered {
  rt::StageProgram program;
  bool hasEmbedding, hasHead;
};

std::vector<Lowered> lower(const std::string &pattern, int64_t pp,
                           const std::string &schedule,
                           rt::Target target = rt::Target::Cpu,
                           const RecomputeSpec &recompute = {},
                           const std::string &moreModel = "") {
  std::string text =
      "model:\n  pattern: \"" + pattern +
      "\"\n  hidden_size: 16\n  num_attention_heads: 2\n"
      "  num_query_groups: 1\n  mamba_num_heads: 2\n  mamba_head_dim: 8\n"
      "  num_experts: 2\n  moe_router_topk: 1\n  vocab_size: 64\n"
      "  tie_embeddings: false\n" +
      moreModel + "parallel:\n  pp: " + std::to_string(pp) +
      "\n  schedule: " + schedule +
      "\n  microbatches: 4\ntraining:\n  seq_length: 8\n";
  auto spec = parseSpec(text, "program.yaml");
  EXPECT_TRUE(static_cast<bool>(spec)) << toString(spec.takeError());
  mlir::MLIRContext context;
  context.loadDialect<pipe::PipeDialect>();
  auto module = buildModel(context, *spec);
  auto model = *module->getOps<hybrid::ModelOp>().begin();
  model->setAttr(pipe::kTargetAttr, pipe::targetAttr(&context, target));
  EXPECT_TRUE(succeeded(lowerForArtifact(*module, "", recompute)));
  std::vector<Lowered> out;
  for (auto stage : model.getBody().front().getOps<pipe::StageOp>()) {
    auto entry = translateStage(stage, target);
    EXPECT_TRUE(succeeded(entry));
    out.push_back({entry->program, entry->hasEmbedding, entry->hasHead});
  }
  return out;
}

/// A program as the manifest reader leaves it (each layer's shard set),
/// then checked.
std::string check(const Lowered &l) {
  rt::StageProgram p = l.program;
  if (std::string why = rt::shardLayers(p); !why.empty())
    return why;
  return rt::checkStageProgram(p, l.hasEmbedding, l.hasHead);
}

// Tests that every stage of specs covering each layer kind, MTP depths,
// empty stages, interleaved and V placements, and the cuda target lowers to
// a program the runtime accepts.
TEST(StageProgram, RealSpecsPassTheRuntimesChecks) {
  struct Case {
    const char *pattern;
    int64_t pp;
    const char *schedule;
    rt::Target target;
  } cases[] = {
      {"M*-E", 1, "1f1b", rt::Target::Cpu},
      {"M*|-E", 2, "1f1b", rt::Target::Cpu},
      {"M||*-|E", 2, "interleaved-1f1b", rt::Target::Cpu},
      {"M*|-|E|", 2, "zbv", rt::Target::Cpu},
      {"M*-E/M-/M-", 1, "1f1b", rt::Target::Cpu},
      {"M*|-E/*E", 2, "1f1b", rt::Target::Cpu},
      {"M*-E/M-", 1, "1f1b", rt::Target::Cuda},
  };
  int stages = 0;
  for (const Case &c : cases) {
    SCOPED_TRACE(std::string(c.pattern) + " on " + rt::targetName(c.target));
    for (const Lowered &l : lower(c.pattern, c.pp, c.schedule, c.target)) {
      EXPECT_EQ(check(l), "");
      EXPECT_EQ(l.program.target, c.target);
      ++stages;
    }
  }
  EXPECT_EQ(stages, 1 + 2 + 4 + 4 + 1 + 2 + 1);
}

// Tests that the programs of full and selective recompute pass the
// runtime's checks on every layout of the test above, and that each
// recomputes something.
TEST(StageProgram, RecomputedProgramsPassTheRuntimesChecks) {
  const RecomputeSpec kinds[] = {
      fullRecompute(RecomputeMethod::Uniform, 1),
      fullRecompute(RecomputeMethod::Uniform, 2),
      fullRecompute(RecomputeMethod::Block, 1),
      selectiveRecompute({RecomputeModule::CoreAttn, RecomputeModule::Mlp,
                          RecomputeModule::MoeAct, RecomputeModule::LayerNorm}),
      selectiveRecompute({RecomputeModule::Moe, RecomputeModule::Mlp})};
  for (const RecomputeSpec &r : kinds)
    for (auto [pattern, pp, schedule] : {std::tuple{"M*-E", 1, "1f1b"},
                                         {"M*|-E", 2, "1f1b"},
                                         {"M||*-|E", 2, "interleaved-1f1b"},
                                         {"M*|-|E|", 2, "zbv"},
                                         {"M*|-E/*E", 2, "1f1b"}}) {
      SCOPED_TRACE(std::string(pattern) + " " + recomputeFlags(r));
      for (const Lowered &l :
           lower(pattern, pp, schedule, rt::Target::Cpu, r)) {
        EXPECT_EQ(check(l), "");
        // Full recompute recomputes any stage with a layer of the pattern;
        // selective one with a layer holding a named module.
        RecomputeModuleSet named = 0;
        for (RecomputeModule m : r.modules)
          named |= moduleBit(m);
        bool recomputes = false;
        for (const rt::ProgramLayer &layer : l.program.layers)
          recomputes |= r.full()
                            ? layer.layer > 0
                            : (rt::selectiveModulesOf(layer.kind) & named) != 0;
        EXPECT_EQ(l.program.recomputeBytes > 0, recomputes);
      }
    }
}

// Tests that every way a recomputing manifest could make the interpreter
// read or write out of place, or recompute from something it never kept, is
// refused by its own rule.
TEST(StageProgram, EveryRecomputeRuleRefusesItsCase) {
  auto full = lower("M*-E/M-", 1, "1f1b", rt::Target::Cpu,
                    fullRecompute(RecomputeMethod::Uniform, 2));
  auto selective = lower(
      "M*-E", 1, "1f1b", rt::Target::Cpu,
      selectiveRecompute({RecomputeModule::CoreAttn, RecomputeModule::Mlp}));
  ASSERT_EQ(full.size(), 1u);
  ASSERT_EQ(selective.size(), 1u);
  ASSERT_EQ(check(full[0]), "");
  ASSERT_EQ(check(selective[0]), "");
  auto firstOf = [](std::vector<KernelCall> &calls, rt::CallOp op) {
    return std::find_if(calls.begin(), calls.end(),
                        [&](const KernelCall &c) { return c.op == op; });
  };
  auto layerOf = [](rt::StageProgram &p, LayerKind kind) {
    for (size_t i = 0; i < p.layers.size(); ++i)
      if (p.layers[i].kind == kind)
        return i;
    return p.layers.size();
  };
  struct Mutation {
    const char *what;
    bool selective;
    std::function<void(rt::StageProgram &)> apply;
    const char *expect;
  } mutations[] = {
      {"a load of what no save kept", false,
       [&](rt::StageProgram &p) {
         firstOf(p.backwardInput, rt::CallOp::Load)->range.offset += 4;
       },
       "did not keep"},
      {"a checkpoint of another size", false,
       [&](rt::StageProgram &p) {
         firstOf(p.forward, rt::CallOp::Save)->range.bytes -= 4;
       },
       "not one activation"},
      {"a save in the input-gradient pass", false,
       [&](rt::StageProgram &p) {
         p.backwardInput.push_back(*firstOf(p.forward, rt::CallOp::Save));
       },
       "only the forward"},
      {"a recompute of a layer that is not recomputed", false,
       [&](rt::StageProgram &p) {
         firstOf(p.backwardInput, rt::CallOp::Recompute)->layer = 0;
       },
       "not a recomputed layer"},
      {"an input gradient before the layer ran again", true,
       [&](rt::StageProgram &p) {
         auto rc = firstOf(p.backwardInput, rt::CallOp::Recompute);
         KernelCall again = *rc;
         p.backwardInput.erase(rc);
         p.backwardInput.push_back(again);
       },
       "before its forward ran again"},
      {"a recomputed layer past the recompute buffer", false,
       [](rt::StageProgram &p) { p.recomputeBytes -= 4; },
       "recomputed tensors"},
      {"a recompute slot past the workspace", false,
       [](rt::StageProgram &p) { p.rc1.offset = p.workspaceBytes; },
       "recompute slot"},
      {"a recompute slot over the scratch", false,
       [](rt::StageProgram &p) { p.rc0.offset = p.scratch.offset; }, "overlap"},
      {"a recomputed head", false,
       [&](rt::StageProgram &p) {
         p.layers[layerOf(p, LayerKind::Head)].recomputed = true;
       },
       "ends in a loss"},
      {"full recompute without its slots", false,
       [](rt::StageProgram &p) { p.rc0 = p.rc1 = {}; }, "recompute slot"},
      {"a Mamba layer dropping attention's core", true,
       [&](rt::StageProgram &p) {
         size_t m = layerOf(p, LayerKind::Mamba);
         p.layers[m].modules = moduleBit(RecomputeModule::CoreAttn);
         p.layers[m].again = p.layers[layerOf(p, LayerKind::Attention)].again;
       },
       "does not drop"},
      {"modules' range of another size", true,
       [&](rt::StageProgram &p) {
         p.layers[layerOf(p, LayerKind::Attention)].again.bytes -= 4;
       },
       "recomputed modules"},
      {"a selective recompute through a slot", true,
       [&](rt::StageProgram &p) {
         firstOf(p.backwardInput, rt::CallOp::Recompute)->out = Slot::Act0;
       },
       "through a slot"},
  };
  for (const Mutation &m : mutations) {
    Lowered bad = m.selective ? selective[0] : full[0];
    m.apply(bad.program);
    std::string why = check(bad);
    EXPECT_NE(why.find(m.expect), std::string::npos)
        << m.what << ": got '" << why << "'";
  }
}

// Tests that activations chain from the stage input through the two
// workspace slots to the output, and gradients back, as a stage of
// embedding, Mamba and attention (and one of MLP, MoE and the head) runs
// them; the weight pass runs every layer once, last layer first.
TEST(StageProgram, CallsChainTheActivations) {
  auto stages = lower("M*|-E", 2, "1f1b");
  ASSERT_EQ(stages.size(), 2u);
  const rt::StageProgram &first = stages[0].program;
  ASSERT_EQ(first.layers.size(), 3u);
  EXPECT_EQ(first.layers[0].kind, LayerKind::Embedding);
  std::vector<KernelCall> forward = {{0, Slot::None, Slot::Act0},
                                     {1, Slot::Act0, Slot::Act1},
                                     {2, Slot::Act1, Slot::Output}};
  EXPECT_EQ(first.forward, forward);
  std::vector<KernelCall> backward = {{2, Slot::GradOutput, Slot::Act0},
                                      {1, Slot::Act0, Slot::Act1},
                                      {0, Slot::Act1, Slot::None}};
  EXPECT_EQ(first.backwardInput, backward);

  const rt::StageProgram &last = stages[1].program;
  ASSERT_EQ(last.layers.size(), 3u);
  EXPECT_EQ(last.layers[2].kind, LayerKind::Head);
  forward = {{0, Slot::Input, Slot::Act0},
             {1, Slot::Act0, Slot::Act1},
             {2, Slot::Act1, Slot::None}};
  EXPECT_EQ(last.forward, forward);
  backward = {{2, Slot::None, Slot::Act0},
              {1, Slot::Act0, Slot::Act1},
              {0, Slot::Act1, Slot::GradInput}};
  EXPECT_EQ(last.backwardInput, backward);
  std::vector<KernelCall> weight = {{2, Slot::None, Slot::None},
                                    {1, Slot::None, Slot::None},
                                    {0, Slot::None, Slot::None}};
  EXPECT_EQ(last.backwardWeight, weight);
}

// Tests that Gated DeltaNet layers lower on both targets to programs the
// runtime accepts, and that a program whose value heads are no whole groups
// of its key heads (a hand-edited manifest) is refused by name.
TEST(StageProgram, GdnLayersLowerAndTheirHeadsAreChecked) {
  const std::string gdn = "  activation: swiglu\n  linear_num_key_heads: 2\n"
                          "  linear_num_value_heads: 4\n"
                          "  linear_key_head_dim: 4\n"
                          "  linear_value_head_dim: 4\n";
  for (rt::Target target : {rt::Target::Cpu, rt::Target::Cuda}) {
    auto stages = lower("G*|G-", 2, "1f1b", target, {}, gdn);
    ASSERT_EQ(stages.size(), 2u);
    EXPECT_EQ(stages[0].program.layers[1].kind, LayerKind::Gdn);
    EXPECT_EQ(stages[1].program.layers[0].kind, LayerKind::Gdn);
    for (const Lowered &l : stages)
      EXPECT_EQ(check(l), "");
  }
  Lowered bad = lower("G-", 1, "1f1b", rt::Target::Cpu, {}, gdn)[0];
  std::get<rt::GdnShape>(bad.program.layers[1].shape).valueHeads = 3;
  EXPECT_NE(check(bad).find("3 value heads, not whole groups of its 2 key "
                            "heads"),
            std::string::npos)
      << check(bad);
}

// Tests that a stage without layers copies its input to its output and its
// output gradient back.
TEST(StageProgram, AnEmptyStageCopies) {
  auto stages = lower("M||*-|E", 2, "interleaved-1f1b");
  const rt::StageProgram &empty = stages[1].program;
  ASSERT_TRUE(empty.layers.empty());
  EXPECT_EQ(empty.forward,
            (std::vector<KernelCall>{{-1, Slot::Input, Slot::Output}}));
  EXPECT_EQ(empty.backwardInput,
            (std::vector<KernelCall>{{-1, Slot::GradOutput, Slot::GradInput}}));
}

// Tests that a MoE layer's routed rows (tokens x top-k) must fit the int32
// ids its kernels keep (they were floats, exact to 2^24 and unchecked).
TEST(StageProgram, RoutedRowsFitTheirInt32Ids) {
  auto stages = lower("M*|E-", 2, "1f1b");
  ASSERT_EQ(stages.size(), 2u);
  Lowered moeFirst = stages[1];
  ASSERT_EQ(moeFirst.program.layers[0].kind, LayerKind::Moe);
  ASSERT_EQ(check(moeFirst), "");
  rt::StageProgram &p = moeFirst.program;
  p.tokens.batch = 1;
  p.tokens.seq = int64_t(1) << 24;
  auto &moe = std::get<rt::MoeShape>(p.layers[0].shape);
  moe.experts = moe.topk = 128; // 2^31 rows, one more than int32 holds
  EXPECT_NE(check(moeFirst).find("more routed rows than its int32 row map "
                                 "holds"),
            std::string::npos)
      << check(moeFirst);
}

// Tests that each rule of checkStageProgram refuses what it is for, and
// names it: one mutation of a valid program per rule.
TEST(StageProgram, EveryRuleRefusesItsCase) {
  auto stages = lower("M*-E/M-", 1, "1f1b");
  ASSERT_EQ(stages.size(), 1u);
  const Lowered good = stages[0];
  ASSERT_EQ(check(good), "");
  struct Mutation {
    const char *what;
    std::function<void(rt::StageProgram &)> apply;
    const char *expect;
  } mutations[] = {
      {"parameters a float short",
       [](rt::StageProgram &p) { p.layers[1].params.bytes -= 4; },
       "parameters"},
      {"parameters past the buffer",
       [](rt::StageProgram &p) {
         p.layers[1].params.offset = p.paramBytes - 4;
       },
       "parameters"},
      {"a misaligned range",
       [](rt::StageProgram &p) { p.layers[1].saved.offset += 2; },
       "saved tensors"},
      {"saved tensors smaller than the shape keeps",
       [](rt::StageProgram &p) { p.layers[2].saved.bytes -= 4; },
       "saved tensors"},
      {"a bf16 tensor",
       [](rt::StageProgram &p) { p.layers[1].params.dtype = rt::DType::BF16; },
       "f32 only"},
      {"a zero dimension",
       [](rt::StageProgram &p) {
         std::get<rt::MambaShape>(p.layers[1].shape).heads = 0;
       },
       "dimension"},
      {"a negative loss chunk",
       [](rt::StageProgram &p) {
         for (rt::ProgramLayer &l : p.layers)
           if (auto *head = std::get_if<rt::HeadShape>(&l.shape))
             head->lossChunk = -1;
       },
       "dimension"},
      {"a dimension that overflows the sizes",
       [](rt::StageProgram &p) {
         std::get<rt::MambaShape>(p.layers[1].shape).state = int64_t(1) << 40;
       },
       "dimension"},
      {"a layer wider than the activations",
       [](rt::StageProgram &p) {
         std::get<rt::MlpShape>(p.layers[3].shape).hidden = 32;
       },
       "width"},
      {"a shape of another kind",
       [](rt::StageProgram &p) { p.layers[1].kind = LayerKind::Attention; },
       "another kind"},
      {"overlapping activation slots",
       [](rt::StageProgram &p) { p.act1.offset = p.act0.offset + 4; },
       "overlap"},
      {"scratch too small", [](rt::StageProgram &p) { p.scratch.bytes = 4; },
       "scratch"},
      {"an activation slot past the workspace",
       [](rt::StageProgram &p) { p.act1.offset = p.workspaceBytes; },
       "activation slot"},
      {"no shared output layer for the MTP depth",
       [](rt::StageProgram &p) { p.sharedOutput = {}; }, "shared"},
      {"a call of a layer that does not exist",
       [](rt::StageProgram &p) { p.forward[1].layer = 99; }, "no such layer"},
      {"a layer run twice",
       [](rt::StageProgram &p) { p.backwardWeight[1] = p.backwardWeight[0]; },
       " times"},
      {"a read of a slot nothing wrote",
       [](rt::StageProgram &p) {
         p.forward[1].in = Slot::Act1;
         p.forward[1].out = Slot::Act0;
       },
       "before anything wrote it"},
      {"a call writing where it reads",
       [](rt::StageProgram &p) { p.forward[1].out = p.forward[1].in; },
       "reads"},
      {"a forward call writing the input gradient",
       [](rt::StageProgram &p) { p.forward[1].out = Slot::GradInput; },
       "reads"},
      {"the stage input read in a stage that embeds",
       [](rt::StageProgram &p) {
         p.forward.insert(p.forward.begin(), {-1, Slot::Input, Slot::Act1});
       },
       "'input'"},
      {"a copy in the weight pass",
       [](rt::StageProgram &p) {
         p.backwardWeight.push_back({-1, Slot::None, Slot::None});
       },
       "no such layer"},
  };
  for (const Mutation &m : mutations) {
    Lowered bad = good;
    m.apply(bad.program);
    std::string why = check(bad);
    EXPECT_NE(why.find(m.expect), std::string::npos)
        << m.what << ": got '" << why << "'";
  }
  // The last stage's output is the loss: a program writing 'output' there
  // is refused too.
  Lowered bad = good;
  bad.program.forward.back().out = Slot::Output;
  EXPECT_NE(check(bad), "");
}

} // namespace
} // namespace hypipe
