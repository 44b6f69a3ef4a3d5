//===- SpecTest.cpp - the YAML spec loader --------------------------------===//
#include "frontend/Spec.h"
#include "core/model/SizeBounds.h"

#include "llvm/ADT/STLExtras.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <tuple>

namespace hypipe {
namespace {

/// Loads `text` as "spec.yaml" and returns the rendered error ("" if none).
std::string errorOf(llvm::StringRef text) {
  auto spec = parseSpec(text, "spec.yaml");
  if (spec)
    return "";
  return toString(spec.takeError());
}

ModelSpec load(llvm::StringRef text) {
  auto spec = parseSpec(text, "spec.yaml");
  EXPECT_TRUE(static_cast<bool>(spec)) << toString(spec.takeError());
  return spec ? std::move(*spec) : ModelSpec{};
}

TEST(Spec, DefaultsAndPlacement) {
  ModelSpec s = load("model:\n  pattern: \"M*|M-|ME|*M\"\n  num_experts: 4\n"
                     "  moe_router_topk: 2\nparallel:\n  pp: 2\n  schedule: "
                     "interleaved-1f1b\n");
  EXPECT_EQ(s.parallel.vpp, 2);
  EXPECT_EQ(s.parallel.microbatches, 2); // defaults to pp
  EXPECT_EQ(s.parallel.groupSize, 2);
  EXPECT_EQ(s.placement.stages.size(), 4u);
  EXPECT_EQ(s.placement.stages[3].layers, "*M");
  EXPECT_EQ(s.placement.stages[3].ppRank, 1);
  EXPECT_EQ(s.dims.hidden, 256);
  EXPECT_EQ(s.training.dtype, TrainingPrecision::Fp32);
}

TEST(Spec, UnknownKeySuggestsTheClosest) {
  std::string e = errorOf("model:\n  pattern: M*\n  hiden_size: 64\n");
  EXPECT_NE(
      e.find(
          "spec.yaml:3:3: error: unknown key 'hiden_size' in section 'model'"),
      std::string::npos)
      << e;
  EXPECT_NE(e.find("help: did you mean 'hidden_size'?"), std::string::npos)
      << e;
}

TEST(Spec, KeyInTheWrongSectionIsNamed) {
  std::string e = errorOf("model:\n  pattern: M*\n  pp: 2\n");
  EXPECT_NE(e.find("'pp' belongs in the 'parallel' section"), std::string::npos)
      << e;
  e = errorOf("pp: 2\n");
  EXPECT_NE(e.find("indent it under 'parallel:'"), std::string::npos) << e;
}

TEST(Spec, WrongTypeNamesTheField) {
  std::string e = errorOf("model:\n  pattern: M*\n  hidden_size: big\n");
  EXPECT_NE(e.find("spec.yaml:3:16: error: model.hidden_size must be an "
                   "integer, got 'big'"),
            std::string::npos)
      << e;
  e = errorOf("model:\n  pattern: M*\n  tie_embeddings: maybe\n");
  EXPECT_NE(e.find("must be true or false"), std::string::npos) << e;
}

TEST(Spec, CaretPointsIntoTheQuotedPattern) {
  std::string e = errorOf("model:\n  pattern: \"M*Mx\"\n");
  EXPECT_NE(e.find("spec.yaml:2:16: error: 'x' is not a layer symbol"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("  pattern: \"M*Mx\"\n               ^"), std::string::npos)
      << e;
}

TEST(Spec, HeadsMustDivideHidden) {
  std::string e = errorOf("model:\n  pattern: M*\n  hidden_size: 100\n"
                          "  num_attention_heads: 8\n");
  EXPECT_NE(
      e.find("spec.yaml:4:24: error: num_attention_heads (8) does not divide "
             "hidden_size (100)"),
      std::string::npos)
      << e;
}

TEST(Spec, SegmentsMustBePpTimesVpp) {
  std::string e = errorOf("model:\n  pattern: \"M|M|M\"\nparallel:\n  pp: 2\n");
  EXPECT_NE(e.find("spec.yaml:2:13: error: the pattern has 3 segments"),
            std::string::npos)
      << e;
}

TEST(Spec, LayerKindNeedsItsDimensions) {
  std::string e = errorOf("model:\n  pattern: \"MME\"\n");
  EXPECT_NE(
      e.find("spec.yaml:2:15: error: MoE layers ('E') need num_experts > 0"),
      std::string::npos)
      << e;
}

/// MLA's settings of a loaded spec, in the order of its keys.
std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, bool, MlaRopeType,
           double, double, double>
mlaSettings(const ModelSpec &s) {
  const ModelDims &d = s.dims;
  return {d.qLoraRank,      d.kvLoraRank,
          d.qkHeadDim,      d.qkPosEmbHeadDim,
          d.vHeadDim,       d.qkLayernorm,
          s.mlaRope.type,   s.mlaRope.rotaryScalingFactor,
          s.mlaRope.mscale, s.mlaRope.mscaleAllDim};
}

// MLA's keys under model: Megatron's command-line defaults when left out,
// q_lora_rank's null as Megatron's None, the rest as written.
TEST(Spec, MultiLatentAttentionKeys) {
  EXPECT_EQ(mlaSettings(load("model:\n  pattern: \"M+-\"\n")),
            std::make_tuple(0, 32, 128, 64, 128, false, MlaRopeType::Yarn, 1.0,
                            1.0, 0.0));
  EXPECT_EQ(mlaSettings(load("model:\n  pattern: \"M+-\"\n  q_lora_rank: 24\n"
                             "  kv_lora_rank: 16\n  qk_head_dim: 8\n"
                             "  qk_pos_emb_head_dim: 4\n  v_head_dim: 12\n"
                             "  qk_layernorm: true\n  rope_type: rope\n"
                             "  rotary_scaling_factor: 40\n  mscale: 0.707\n"
                             "  mscale_all_dim: 0.5\n")),
            std::make_tuple(24, 16, 8, 4, 12, true, MlaRopeType::Rope, 40.0,
                            0.707, 0.5));
  EXPECT_EQ(
      load("model:\n  pattern: \"M+\"\n  q_lora_rank: null\n").dims.qLoraRank,
      0);
  EXPECT_EQ(load("model:\n  pattern: \"M+\"\n  q_lora_rank:\n").dims.qLoraRank,
            0);
  EXPECT_EQ(
      load("model:\n  pattern: \"M+\"\n  q_lora_rank: ~\n").dims.qLoraRank, 0);
  // Only q_lora_rank takes null.
  EXPECT_NE(errorOf("model:\n  pattern: \"M+\"\n  kv_lora_rank: null\n")
                .find("model.kv_lora_rank must be an integer, got 'null'"),
            std::string::npos);
}

TEST(Spec, YamlSyntaxErrorIsReported) {
  std::string e = errorOf("model:\n  pattern: *M\n");
  EXPECT_NE(
      e.find(
          "spec.yaml:2:3: error: the value of model.pattern starts with '*'"),
      std::string::npos)
      << e;
  EXPECT_NE(e.find("quote the value"), std::string::npos) << e;
  e = errorOf("model:\n  pattern: [M\n");
  EXPECT_NE(e.find("spec.yaml:2:14: error: Could not find closing ]"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("YAML syntax error"), std::string::npos) << e;
}

TEST(Spec, DuplicateKey) {
  std::string e = errorOf("model:\n  pattern: M\n  pattern: MM\n");
  EXPECT_NE(e.find("spec.yaml:3:3: error: duplicate key 'model.pattern'"),
            std::string::npos)
      << e;
}

TEST(Spec, RatiosAllocateAPattern) {
  ModelSpec s = load(
      "model:\n  num_layers: 10\n  attention_ratio: 0.3\n  mlp_ratio: 0.3\n");
  EXPECT_EQ(s.pattern.text, "M-*MM*-*M-");
}

TEST(Spec, LayoutStringPlacesAPlainPattern) {
  ModelSpec s = load("model:\n  pattern: \"MMMM\"\nparallel:\n  pp: 2\n  "
                     "layout: \"Et|tt|t|L\"\n"
                     "  schedule: interleaved-1f1b\n");
  ASSERT_EQ(s.placement.stages.size(), 4u);
  EXPECT_EQ(s.placement.stages[1].layerNumbers, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(s.placement.stages[3].layers, "");
  std::string e = errorOf("model:\n  pattern: \"MMMM\"\nparallel:\n  pp: 2\n"
                          "  layout: \"Et|tt|tx|L\"\n");
  EXPECT_NE(e.find("spec.yaml:5:19: error: 'x' is not a layout letter"),
            std::string::npos)
      << e;
}

TEST(Spec, ScheduleMustFitVirtualStages) {
  std::string e =
      errorOf("model:\n  pattern: \"M|M|M|M\"\nparallel:\n  pp: 2\n");
  EXPECT_NE(e.find("schedule '1f1b' runs one stage per rank"),
            std::string::npos)
      << e;
  e = errorOf("model:\n  pattern: \"MM\"\nparallel:\n  schedule: 1f1c\n");
  EXPECT_NE(e.find("did you mean '1f1b'?"), std::string::npos) << e;
}

TEST(Spec, EmptyAndNonMappingSpecs) {
  EXPECT_NE(errorOf("").find("the spec is empty"), std::string::npos);
  EXPECT_NE(errorOf("- a\n- b\n").find("must be a mapping"), std::string::npos);
  EXPECT_NE(errorOf("model: 3\n").find("'model' must be a mapping"),
            std::string::npos);
}

TEST(Spec, HugeLayerCountIsRefusedNotAllocated) {
  std::string e =
      errorOf("model:\n  num_layers: 139999999999\n  mlp_ratio: 0.2\n");
  EXPECT_NE(e.find("spec.yaml:2:15: error: model.num_layers is 139999999999, "
                   "more than the 4096 (2^12) hypipe accepts"),
            std::string::npos)
      << e;
}

TEST(Spec, BrokenEntriesAreErrorsNotCrashes) {
  // Inputs the spec fuzzer found crashing an earlier loader (null and
  // range-less nodes).
  for (const char *text :
       {"model:\n  ? [a\n", "model:\n  pattern: \"M*\"\n  :\n",
        "model: {pattern: M, : x}\n", "model:\n  pattern: !!str\n"}) {
    std::string e = errorOf(text);
    EXPECT_EQ(e.rfind("spec.yaml:", 0), 0u)
        << "input: " << text << "\nerror: " << e;
  }
}

TEST(Spec, PatternWithoutPipesIsBalanced) {
  ModelSpec s =
      load("model:\n  pattern: \"MMMMMMMM\"\n  vocab_size: 100000\n"
           "parallel:\n  pp: 2\n  vpp: 2\n  schedule: interleaved-1f1b\n");
  EXPECT_TRUE(s.autoPartitioned);
  ASSERT_EQ(s.placement.stages.size(), 4u);
  // The output layer over a 100,000-token vocabulary costs more FLOPs than any
  // layer: the last stage holds the head alone, the others share the layers
  // as evenly as they can, the embedding's small cost tipping rank 0 to 2.
  EXPECT_EQ(s.placement.stages[3].layers, "");
  EXPECT_EQ(s.placement.stages[0].layers.size(), 2u);
  EXPECT_EQ(s.placement.stages[1].layers.size(), 3u);
  EXPECT_EQ(s.placement.stages[2].layers.size(), 3u);
  size_t placed = 0;
  for (const PatternStage &stage : s.placement.stages)
    placed += stage.layers.size();
  EXPECT_EQ(placed, 8u);
}

TEST(Spec, PartitionKnobsAreChecked) {
  std::string e = errorOf(
      "model:\n  pattern: \"MM\"\nparallel:\n  pp: 2\n  objective: speed\n");
  EXPECT_NE(
      e.find("spec.yaml:5:14: error: unknown partition objective 'speed'"),
      std::string::npos)
      << e;
  e = errorOf(
      "model:\n  pattern: \"M|M\"\nparallel:\n  pp: 2\n  max_memory_gib: 80\n");
  EXPECT_NE(e.find("objective and max_memory_gib steer the automatic split"),
            std::string::npos)
      << e;
  e = errorOf("model:\n  pattern: \"MM\"\nparallel:\n  pp: 2\n  "
              "max_memory_gib: 0.000001\n");
  EXPECT_NE(e.find("spec.yaml:5:19: error: pp_rank 0 cannot fit"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("help: raise max_memory_gib"), std::string::npos) << e;
}

TEST(Spec, MissingFileIsAClearError) {
  auto spec = loadSpec("/nonexistent/spec.yaml");
  ASSERT_FALSE(static_cast<bool>(spec));
  EXPECT_NE(toString(spec.takeError())
                .find("cannot read spec '/nonexistent/spec.yaml'"),
            std::string::npos);
}

/// A spec with packing on (so that its fields count) whose `section` says
/// `key: value` in place of the base's; `line` is where that entry is.
std::string specWith(llvm::StringRef section, llvm::StringRef key,
                     int64_t value, int &line) {
  std::vector<std::pair<std::string, std::vector<std::string>>> sections = {
      {"model", {"pattern: \"M*-E\"", "num_experts: 4", "moe_router_topk: 2"}},
      {"parallel", {"pp: 1"}},
      {"training", {"seq_length: 16"}},
      {"data", {"format: jsonl", "packing: true"}}};
  std::string text;
  line = 0;
  for (auto &[name, entries] : sections) {
    text += name + ":\n";
    llvm::erase_if(entries, [&](const std::string &entry) {
      return llvm::StringRef(entry).starts_with((key + ":").str());
    });
    if (name == section)
      entries.push_back(fmt::format("{}: {}", key.str(), value));
    for (const std::string &entry : entries) {
      text += "  " + entry + "\n";
      if (llvm::StringRef(entry).starts_with((key + ":").str()))
        line = int(llvm::StringRef(text).count('\n'));
    }
  }
  return text;
}

// Tests that every size of the table (SizeBounds.h) is refused one past its
// bound, at its value, naming itself, the value and the bound, and that the
// bound itself passes its check.
TEST(Spec, EverySizePastItsBoundIsRefusedAtItsValue) {
  for (const SizeBound &bound : sizeBounds()) {
    auto [section, key] =
        llvm::StringRef(bound.field.data(), bound.field.size()).split('.');
    // The model's widths are dims_c0's, which names them without section.
    std::string name = section == "model" && key != "num_layers"
                           ? key.str()
                           : std::string(bound.field);
    int line = 0;
    std::string past = errorOf(specWith(section, key, bound.max + 1, line));
    std::string refusal =
        fmt::format("spec.yaml:{}:{}: error: {} is {}, more than the {}", line,
                    key.size() + 5, name, bound.max + 1, bound.max);
    EXPECT_NE(past.find(refusal), std::string::npos) << refusal << "\n" << past;
    std::string at = errorOf(specWith(section, key, bound.max, line));
    EXPECT_EQ(at.find(fmt::format("{} is {}, more than", name, bound.max)),
              std::string::npos)
        << at;
  }
}

// training.recompute reaches the spec as the struct the compiler reads:
// modules in the order given, Megatron's core_attn when none are.
TEST(Spec, RecomputeIsLoadedAsWritten) {
  const char *model = "model:\n  pattern: \"M*-E\"\n  num_experts: 4\n"
                      "  moe_router_topk: 2\n";
  ModelSpec s = load(std::string(model) +
                     "training:\n  recompute:\n    granularity: selective\n"
                     "    modules: \"mlp core_attn\"\n");
  EXPECT_EQ(s.training.recompute.granularity, RecomputeGranularity::Selective);
  EXPECT_EQ(s.training.recompute.modules,
            (std::vector<RecomputeModule>{RecomputeModule::Mlp,
                                          RecomputeModule::CoreAttn}));
  s = load(std::string(model) +
           "training:\n  recompute:\n    granularity: selective\n");
  EXPECT_EQ(s.training.recompute.modules,
            std::vector<RecomputeModule>{RecomputeModule::CoreAttn});
  EXPECT_EQ(load(model).training.recompute, RecomputeSpec{});

  // The flags replace the file's keys one by one.
  SpecOverrides flags;
  flags.recomputeMethod = "block";
  flags.recomputeNumLayers = 3;
  auto full = parseSpec(std::string(model) +
                            "training:\n  recompute:\n    granularity: full\n"
                            "    method: uniform\n    num_layers: 1\n",
                        "spec.yaml", flags);
  ASSERT_TRUE(static_cast<bool>(full)) << toString(full.takeError());
  EXPECT_TRUE(full->training.recompute.full());
  EXPECT_EQ(full->training.recompute.method, RecomputeMethod::Block);
  EXPECT_EQ(full->training.recompute.numLayers, 3);
  EXPECT_TRUE(full->training.recompute.modules.empty());
}

} // namespace
} // namespace hypipe
