//===- PlanTest.cpp - `hypipe plan`'s search ------------------------------===//
#include "frontend/Plan.h"

#include "core/lang/HybridPattern.h"
#include "test/unit/SmallSpec.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>

#include <regex>
#include <set>

namespace hypipe {
namespace {

/// Eight layers the partitioner splits (no `|`), a global batch of 8.
const std::string kSpec =
    smallSpec("M-M*M-M-", "  microbatches: 8\n", "  seq_length: 32\n");

Plan planned(int64_t ranks, std::optional<double> memoryGiB = std::nullopt,
             const std::string &text = kSpec) {
  auto p = plan(text, {"spec.yaml", ranks, memoryGiB, std::nullopt});
  EXPECT_TRUE(static_cast<bool>(p)) << (p ? "" : p.problem().message);
  return p ? std::move(*p) : Plan{};
}

std::string problemOf(int64_t ranks, std::optional<double> memoryGiB,
                      const std::string &text = kSpec) {
  auto p = plan(text, {"spec.yaml", ranks, memoryGiB, std::nullopt});
  EXPECT_FALSE(static_cast<bool>(p));
  return p ? "" : p.problem().message + "\nhelp: " + p.problem().help;
}

int64_t smallestPeak(const Plan &p, bool onePipelineRank) {
  int64_t least = INT64_MAX;
  for (const PlanCandidate &c : p.candidates)
    if ((c.layout.pp == 1) == onePipelineRank)
      least = std::min(least, c.peakMemory());
  return least;
}

std::string layoutKey(const PlanLayout &l) {
  return fmt::format("{} {} {} {} {} {} {} {} {}", l.tp, l.sequenceParallel,
                     l.pp, l.vpp, l.dp, schedule::scheduleName(l.schedule),
                     l.microbatches, l.microBatchSize, l.distributedOptimizer);
}

/// The value after `flag` in Megatron-LM arguments ("" if absent).
std::string flagValue(const std::string &args, const std::string &flag) {
  std::smatch m;
  std::regex value(flag + R"( '?([^' ]+)'?)");
  return std::regex_search(args, m, value) ? m[1].str() : "";
}

// One rank has one layout: pp 1, dp 1, the whole batch in its microbatches
// (of 1, 2, 4 or 8 samples).
TEST(Plan, OneRankIsOnePipelineRank) {
  Plan p = planned(1);
  ASSERT_FALSE(p.candidates.empty());
  for (const PlanCandidate &c : p.candidates) {
    EXPECT_EQ(c.layout.pp * c.layout.vpp, 1);
    EXPECT_EQ(c.layout.dp, 1);
    EXPECT_EQ(c.layout.microbatches * c.layout.microBatchSize, 8);
    EXPECT_EQ(c.spec.training.microBatchSize, c.layout.microBatchSize);
    EXPECT_EQ(c.bytesSentPerStep, 0); // nothing crosses a rank boundary
  }
  EXPECT_EQ(p.simulated, static_cast<int64_t>(p.candidates.size()));
}

// Candidates come fastest first and keep the global batch.
TEST(Plan, RankedByStepAndBatchKept) {
  Plan p = planned(4);
  ASSERT_GT(p.candidates.size(), 1u);
  for (size_t i = 0; i < p.candidates.size(); ++i) {
    const PlanLayout &l = p.candidates[i].layout;
    EXPECT_EQ(l.pp * l.dp, 4);
    EXPECT_EQ(l.microbatches * l.microBatchSize * l.dp, 8);
    if (i > 0)
      EXPECT_LE(p.candidates[i - 1].makespan, p.candidates[i].makespan);
  }
}

// Every micro batch size of 1, 2, 4 and 8 that divides a replica's share
// of the batch is tried.
TEST(Plan, MicroBatchSizesAreSearched) {
  Plan p = planned(2);
  std::set<int64_t> sizes;
  for (const PlanCandidate &c : p.candidates)
    sizes.insert(c.layout.microBatchSize);
  EXPECT_EQ(sizes, (std::set<int64_t>{1, 2, 4, 8}));
}

// Asking for the top 3 simulates fewer layouts (a layout whose busiest rank
// alone takes longer than the third fastest step is not simulated) and
// finds the same three, in the same order.
TEST(Plan, TheBoundPrunesOnlyWhatCannotReachTheTop) {
  for (int64_t ranks : {2, 4, 8}) {
    Plan all = planned(ranks);
    PlanRequest request{"spec.yaml", ranks, std::nullopt, std::nullopt};
    request.top = 3;
    auto top = plan(kSpec, request);
    ASSERT_TRUE(static_cast<bool>(top));
    EXPECT_GT(top->prunedByBound, 0) << ranks;
    EXPECT_EQ(top->simulated + top->prunedByBound, all.simulated) << ranks;
    ASSERT_GE(top->candidates.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(top->candidates[i].makespan, all.candidates[i].makespan);
      EXPECT_EQ(layoutKey(top->candidates[i].layout),
                layoutKey(all.candidates[i].layout));
    }
  }
}

// On a device the step is in seconds with its communication: a layout's
// share of it is in [0, 1), and dp over a slow link costs more of the step
// than over a fast one.
TEST(Plan, OnADeviceCommunicationIsInTheStep) {
  PlanRequest request{"spec.yaml", 4, std::nullopt, std::nullopt};
  Expected<Cluster> fast = makeCluster("cpu");
  ClusterOverrides slowLinks;
  slowLinks.intraNode = "0.01,100";
  slowLinks.interNode = "0.01,100";
  Expected<Cluster> slow = makeCluster("cpu", slowLinks);
  ASSERT_TRUE(fast && slow);
  request.cluster = *fast;
  auto onFast = plan(kSpec, request);
  request.cluster = *slow;
  auto onSlow = plan(kSpec, request);
  ASSERT_TRUE(onFast && onSlow);
  for (const PlanCandidate &c : onFast->candidates) {
    EXPECT_GE(c.communication, 0);
    EXPECT_LT(c.communication, 1);
  }
  // On links a thousand times slower communication is most of the step.
  const PlanCandidate &best = onSlow->candidates[0];
  EXPECT_GT(onSlow->candidates[0].makespan, onFast->candidates[0].makespan);
  EXPECT_EQ(best.layout.dp * best.layout.pp, 4);
  EXPECT_GT(best.communication, 0.5);
}

// A cap between the least memory of pp > 1 and of pp 1 leaves no pp 1
// layout, and every candidate left is under it.
TEST(Plan, MemoryCapPrunesOnePipelineRank) {
  Plan all = planned(4);
  const int64_t split = smallestPeak(all, false);
  const int64_t whole = smallestPeak(all, true);
  ASSERT_LT(split, whole);
  const double cap = (split + whole) / 2.0 / (1024.0 * 1024.0 * 1024.0);
  Plan capped = planned(4, cap);
  ASSERT_FALSE(capped.candidates.empty());
  EXPECT_GT(capped.prunedByMemory, 0);
  for (const PlanCandidate &c : capped.candidates) {
    EXPECT_GT(c.layout.pp, 1);
    for (int64_t bytes : c.costs.rankPeakMemory())
      EXPECT_LE(bytes, cap * 1024.0 * 1024.0 * 1024.0);
  }
  EXPECT_EQ(capped.simulated + capped.prunedByMemory,
            all.simulated); // pruned before simulating
}

// Megatron's flags, parsed back with hypipe's Megatron-exact pattern
// language, place every layer where the candidate does.
TEST(Plan, MegatronArgumentsPlaceAsTheCandidate) {
  Plan p = planned(4);
  ASSERT_FALSE(p.candidates.empty());
  for (const PlanCandidate &c : p.candidates) {
    std::string args = megatronArgs(c);
    auto pattern =
        parseHybridPattern(flagValue(args, "--hybrid-override-pattern"));
    ASSERT_TRUE(static_cast<bool>(pattern)) << args;
    std::string vpp = flagValue(args, "--virtual-pipeline-model-parallel-size");
    PlacementOptions options{
        std::stoll(flagValue(args, "--pipeline-model-parallel-size")),
        vpp.empty() ? 1 : std::stoll(vpp), std::nullopt, std::nullopt,
        schedule::placementOf(c.layout.schedule)};
    auto placement = placeHybridPattern(*pattern, options);
    ASSERT_TRUE(static_cast<bool>(placement)) << args;
    const auto &want = c.spec.placement.stages;
    ASSERT_EQ(placement->stages.size(), want.size()) << args;
    for (size_t s = 0; s < want.size(); ++s) {
      EXPECT_EQ(placement->stages[s].ppRank, want[s].ppRank) << args;
      EXPECT_EQ(placement->stages[s].vpStage, want[s].vpStage) << args;
      EXPECT_EQ(placement->stages[s].layers, want[s].layers) << args;
    }
    EXPECT_EQ(std::stoll(flagValue(args, "--micro-batch-size")) *
                  c.layout.microbatches * c.layout.dp,
              std::stoll(flagValue(args, "--global-batch-size")));
    EXPECT_EQ(args.find("--use-distributed-optimizer") != std::string::npos,
              c.layout.distributedOptimizer);
  }
}

// The written spec loads with the candidate's parallel fields and pinned
// pattern, its data path made absolute.
TEST(Plan, WrittenSpecLoadsAsTheCandidate) {
  Plan p = planned(4);
  ASSERT_FALSE(p.candidates.empty());
  for (const PlanCandidate &c : p.candidates) {
    auto text = plannedSpecText(kSpec, "/somewhere", c);
    ASSERT_TRUE(static_cast<bool>(text)) << text.problem().message;
    auto spec = parseSpec(*text, "plan.yaml");
    ASSERT_TRUE(static_cast<bool>(spec));
    EXPECT_FALSE(spec->autoPartitioned);
    EXPECT_EQ(spec->parallel.pp, c.layout.pp);
    EXPECT_EQ(spec->parallel.vpp, c.layout.vpp);
    EXPECT_EQ(spec->parallel.dp, c.layout.dp);
    EXPECT_EQ(spec->parallel.schedule, c.layout.schedule);
    EXPECT_EQ(spec->parallel.distributedOptimizer,
              c.layout.distributedOptimizer);
    EXPECT_EQ(spec->training.microBatchSize, c.layout.microBatchSize);
    EXPECT_EQ(spec->data.path, "/somewhere/data/tokens.txt");
  }
}

// The micro batch size goes into a training section indented as the spec
// indents it (the spec does not write the key: it is added).
TEST(Plan, WrittenMicroBatchSizeKeepsTheSectionsIndent) {
  std::string text = kSpec;
  text.replace(text.find("training:\n  seq_length"),
               std::string("training:\n  seq_length").size(),
               "training:\n    seq_length");
  Plan p = planned(2, std::nullopt, text);
  ASSERT_FALSE(p.candidates.empty());
  for (const PlanCandidate &c : p.candidates) {
    auto written = plannedSpecText(text, "/somewhere", c);
    ASSERT_TRUE(static_cast<bool>(written)) << written.problem().message;
    EXPECT_NE(written->find(fmt::format("training:\n    micro_batch_size: {}\n"
                                        "    seq_length",
                                        c.layout.microBatchSize)),
              std::string::npos)
        << *written;
  }
}

// The tied embedding's gradient is summed between the first and the last
// pipeline rank after the reductions: a two-rank all-reduce of the table in
// fp32, on the link between them, charged to both ends' stages.
TEST(Plan, TiedEmbeddingSumIsInTheStep) {
  auto spec = parseSpec(kSpec, "spec.yaml", SpecOverrides{2, 1, 1});
  ASSERT_TRUE(static_cast<bool>(spec));
  ASSERT_TRUE(spec->dims.tieEmbeddings);
  Expected<Cluster> cpu = makeCluster("cpu");
  ASSERT_TRUE(static_cast<bool>(cpu));
  SpecCosts costs = specCosts(*spec);
  StepModel model{nullptr, &*cpu};
  auto step = stepCosts(*spec, costs.stageCost, model);
  ASSERT_TRUE(static_cast<bool>(step));
  const double table = 256.0 * 64 * 4; // vocab x hidden fp32
  const double expected = allReduceSeconds(2, table, cpu->device.intraNode);
  ASSERT_EQ(step->stageAfterStep.size(), 2u);
  EXPECT_DOUBLE_EQ(step->stageAfterStep[0], expected);
  EXPECT_DOUBLE_EQ(step->stageAfterStep[1], expected);
  // dp 1: nothing to reduce over data parallelism.
  EXPECT_EQ(step->stageReduce, (std::vector<double>{0, 0}));
}

// A cap under every layout's need names the least need and where it is.
TEST(Plan, NoLayoutFitsNamesTheLeastMemory) {
  Plan all = planned(4);
  int64_t least = std::min(smallestPeak(all, false), smallestPeak(all, true));
  std::string e = problemOf(4, 1e-6);
  EXPECT_NE(e.find("no layout fits"), std::string::npos) << e;
  EXPECT_NE(e.find(fmt::format("the least any needs is {:.2f} GiB",
                               least / (1024.0 * 1024.0 * 1024.0))),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("on pp rank"), std::string::npos) << e;
}

// A pinned split over 2 pipeline ranks cannot use 3 ranks; 2 and 4 can,
// and 2 is nearer (it is tried first at equal distance).
TEST(Plan, UnusableRankCountNamesTheNearest) {
  std::string pinned = std::regex_replace(
      std::regex_replace(std::string(kSpec), std::regex("M-M\\*M-M-"),
                         "M-M*|M-M-"),
      std::regex("parallel:\n"), "parallel:\n  pp: 2\n");
  std::string e = problemOf(3, std::nullopt, pinned);
  EXPECT_NE(e.find("no layout uses 3 ranks fully"), std::string::npos) << e;
  EXPECT_NE(e.find("nearest rank count that has one is 2"), std::string::npos)
      << e;
  Plan p = planned(4, std::nullopt, pinned);
  for (const PlanCandidate &c : p.candidates)
    EXPECT_EQ(c.layout.pp, 2); // only the spec's own split fits
}

/// kSpec pinned to two ranks of four layers each: only pp 2 layouts.
std::string pinnedToTwoRanks() {
  return std::regex_replace(std::regex_replace(std::string(kSpec),
                                               std::regex("M-M\\*M-M-"),
                                               "M-M*|M-M-"),
                            std::regex("parallel:\n"), "parallel:\n  pp: 2\n");
}

/// The peak memory of `c`'s layout loaded with `recompute`, and with the
/// linear cross-entropy where `linear`.
int64_t peakWith(const std::string &text, const PlanCandidate &c,
                 const RecomputeSpec &recompute, bool linear = false) {
  SpecOverrides o;
  if (linear)
    o.crossEntropyFusionImpl = "linear";
  o.schedule = schedule::scheduleName(c.layout.schedule);
  o.microbatches = c.layout.microbatches;
  o.microBatchSize = c.layout.microBatchSize;
  if (recompute.granularity != RecomputeGranularity::None)
    o.recomputeGranularity = recomputeGranularityName(recompute.granularity);
  if (recompute.full()) {
    o.recomputeMethod = recomputeMethodName(recompute.method);
    o.recomputeNumLayers = recompute.numLayers;
  }
  if (!recompute.modules.empty()) {
    std::vector<std::string> names;
    for (RecomputeModule m : recompute.modules)
      names.push_back(recomputeModuleName(m));
    o.recomputeModules = names;
  }
  auto spec = parseSpec(text, "spec.yaml", o);
  EXPECT_TRUE(static_cast<bool>(spec));
  const std::vector<int64_t> m = specCosts(*spec).rankPeakMemory();
  return *std::max_element(m.begin(), m.end());
}

// Without a cap nothing is recomputed: recompute only adds time.
TEST(Plan, NoCapNoRecompute) {
  Plan p = planned(4);
  EXPECT_EQ(p.fitByRecompute, 0);
  for (const PlanCandidate &c : p.candidates)
    EXPECT_FALSE(c.layout.recompute.full()) << megatronArgs(c);
}

// Under a cap no layout meets as it is but some meet with less kept,
// those are the candidates, each with the least that fits, in
// docs/plan.md's order: the linear cross-entropy alone, then selective
// recompute of the modules the model holds (the attention core, the MLPs,
// the norms), then full recompute of the first 1, 2, 3 layers of each stage
// (block), then of all four (uniform chunks of the four layers a stage
// holds: one checkpoint a stage), each with the native loss, then the
// linear one. Each is within the cap, slower than without, counted as
// fitting by recompute or by the linear loss, and carries Megatron's flags
// and a written spec that loads with the same recompute and loss.
TEST(Plan, RecomputeFitsWhatNoneDoesNot) {
  const std::string text = pinnedToTwoRanks();
  Plan all = planned(2, std::nullopt, text);
  ASSERT_FALSE(all.candidates.empty());
  const RecomputeSpec none;
  const std::vector<RecomputeSpec> recomputes = {
      selectiveRecompute({RecomputeModule::CoreAttn, RecomputeModule::Mlp,
                          RecomputeModule::LayerNorm}),
      fullRecompute(RecomputeMethod::Block, 1),
      fullRecompute(RecomputeMethod::Block, 2),
      fullRecompute(RecomputeMethod::Block, 3),
      fullRecompute(RecomputeMethod::Uniform, 4)};
  std::vector<std::pair<RecomputeSpec, bool>> tries = {{none, true}};
  for (const RecomputeSpec &r : recomputes)
    tries.insert(tries.end(), {{r, false}, {r, true}});
  int64_t leastNone = INT64_MAX, leastFull = INT64_MAX;
  for (const PlanCandidate &c : all.candidates) {
    leastNone = std::min(leastNone, peakWith(text, c, none));
    leastFull = std::min(leastFull, peakWith(text, c, recomputes.back()));
  }
  ASSERT_LT(leastFull, leastNone);
  const double cap = (leastFull + leastNone) / 2.0 / (1 << 30);
  // Each layout's first try within the cap.
  std::map<std::string, std::pair<RecomputeSpec, bool>> expected;
  int64_t byRecompute = 0, byLinear = 0;
  for (const PlanCandidate &c : all.candidates)
    for (const auto &[r, linear] : tries)
      if (peakWith(text, c, r, linear) <= cap * (1 << 30)) {
        expected.emplace(layoutKey(c.layout), std::pair{r, linear});
        byRecompute += r.granularity != RecomputeGranularity::None;
        byLinear += linear;
        break;
      }
  Plan capped = planned(2, cap, text);
  ASSERT_EQ(capped.candidates.size(), expected.size());
  EXPECT_GT(byRecompute, 0);
  EXPECT_EQ(capped.fitByRecompute, byRecompute);
  EXPECT_EQ(capped.fitByLinearLoss, byLinear);
  EXPECT_EQ(capped.simulated + capped.prunedByMemory, all.simulated);
  for (const PlanCandidate &c : capped.candidates) {
    ASSERT_EQ(expected.count(layoutKey(c.layout)), 1u);
    const auto &[want, linear] = expected.at(layoutKey(c.layout));
    EXPECT_EQ(c.layout.recompute, want);
    EXPECT_EQ(c.layout.linearCrossEntropy, linear);
    EXPECT_LE(c.peakMemory(), cap * (1 << 30));
    for (const PlanCandidate &free : all.candidates)
      if (layoutKey(free.layout) == layoutKey(c.layout))
        EXPECT_GT(c.makespan, free.makespan);
    EXPECT_NE(megatronArgs(c).find(recomputeFlags(want)), std::string::npos);
    EXPECT_EQ(megatronArgs(c).find("--cross-entropy-fusion-impl linear") !=
                  std::string::npos,
              linear);
    auto written = plannedSpecText(text, "/somewhere", c);
    ASSERT_TRUE(static_cast<bool>(written)) << written.problem().message;
    auto spec = parseSpec(*written, "plan.yaml");
    ASSERT_TRUE(static_cast<bool>(spec));
    EXPECT_EQ(spec->training.recompute, c.layout.recompute);
    EXPECT_EQ(spec->crossEntropyFusionImpl, linear ? "linear" : "native");
  }
}

/// kSpec's eight layers over two pipeline ranks with a vocabulary of 32,768:
/// the native loss's logits are the last rank's largest tensors.
std::string bigVocabOnTwoRanks() {
  return std::regex_replace(pinnedToTwoRanks(), std::regex("vocab_size: 256"),
                            "vocab_size: 32768");
}

// Where the head's logits are what does not fit, the linear cross-entropy
// alone fits it, before any recompute: the candidates keep every layer's
// tensors, each slower than its native twin by the loss's extra GEMM and
// no faster than any layout that fits natively, Megatron's flags and the
// written spec carry the loss. Without a cap the loss stays native.
TEST(Plan, TheLinearLossFitsTheHeadsLogits) {
  const std::string text = bigVocabOnTwoRanks();
  Plan all = planned(2, std::nullopt, text);
  ASSERT_FALSE(all.candidates.empty());
  EXPECT_EQ(all.fitByLinearLoss, 0);
  EXPECT_TRUE(all.searchedLoss);
  int64_t leastLinear = INT64_MAX, leastNative = INT64_MAX;
  for (const PlanCandidate &c : all.candidates) {
    EXPECT_FALSE(c.layout.linearCrossEntropy);
    EXPECT_EQ(megatronArgs(c).find("--cross-entropy"), std::string::npos);
    leastNative = std::min(leastNative, c.peakMemory());
    leastLinear = std::min(leastLinear, peakWith(text, c, {}, true));
  }
  ASSERT_LT(leastLinear, leastNative);
  const double cap = (leastLinear + leastNative) / 2.0 / (1 << 30);
  Plan capped = planned(2, cap, text);
  ASSERT_FALSE(capped.candidates.empty());
  EXPECT_EQ(capped.fitByLinearLoss, int64_t(capped.candidates.size()));
  EXPECT_EQ(capped.fitByRecompute, 0);
  for (const PlanCandidate &c : capped.candidates) {
    EXPECT_TRUE(c.layout.linearCrossEntropy);
    EXPECT_EQ(c.layout.recompute.granularity, RecomputeGranularity::None);
    EXPECT_EQ(c.spec.crossEntropyFusionImpl, "linear");
    EXPECT_LE(c.peakMemory(), cap * (1 << 30));
    for (const PlanCandidate &free : all.candidates)
      if (layoutKey(free.layout) == layoutKey(c.layout))
        EXPECT_GT(c.makespan, free.makespan);
    EXPECT_NE(megatronArgs(c).find("--cross-entropy-loss-fusion "
                                   "--cross-entropy-fusion-impl linear"),
              std::string::npos);
    auto written = plannedSpecText(text, "/somewhere", c);
    ASSERT_TRUE(static_cast<bool>(written)) << written.problem().message;
    EXPECT_NE(written->find("loss=linear"), std::string::npos);
    auto spec = parseSpec(*written, "plan.yaml");
    ASSERT_TRUE(static_cast<bool>(spec));
    EXPECT_EQ(spec->crossEntropyFusionImpl, "linear");
  }
  // A spec whose loss is linear keeps it everywhere, and no search of it.
  std::string linear = text;
  linear.replace(linear.find("  vocab_size"), 0,
                 "  cross_entropy_fusion_impl: linear\n");
  Plan own = planned(2, std::nullopt, linear);
  ASSERT_FALSE(own.candidates.empty());
  EXPECT_FALSE(own.searchedLoss);
  for (const PlanCandidate &c : own.candidates)
    EXPECT_NE(megatronArgs(c).find("--cross-entropy-fusion-impl linear"),
              std::string::npos);
}

// A measured pass scales by its FLOPs; one measured empty (a linear
// cross-entropy's weight pass, which its input gradient took) but asked
// for FLOPs (a native head's) runs at the kind's forward rate, not at the
// empty call's time; one asked for none, and a lookup, by the tokens.
TEST(MeasuredCosts, AnEmptyPassAskedForFlopsRunsAtTheForwardsRate) {
  MeasuredCosts c;
  c.tokens = 100;
  KindTimes head;
  head.seconds = {0.3, 0.9, 1e-6};
  head.flops = {3e9, 9e9, 0};
  c.kinds["head"] = head;
  EXPECT_DOUBLE_EQ(*measuredSeconds(c, "head", 2, 3e9, 100), 0.3);
  EXPECT_DOUBLE_EQ(*measuredSeconds(c, "head", 2, 0, 200), 2e-6);
  EXPECT_DOUBLE_EQ(*measuredSeconds(c, "head", 1, 3e9, 100), 0.3);
  KindTimes lookup;
  lookup.seconds = {0.01, 0.0, 0.02};
  lookup.flops = {0, 0, 5e6};
  c.kinds["embedding"] = lookup;
  EXPECT_DOUBLE_EQ(*measuredSeconds(c, "embedding", 0, 0, 50), 0.005);
  EXPECT_FALSE(measuredSeconds(c, "mamba", 0, 1e9, 100).has_value());
}

// A spec that sets its own recompute keeps it: plan does not search it.
TEST(Plan, TheSpecsOwnRecomputeStands) {
  std::string text = pinnedToTwoRanks();
  text.replace(text.find("  seq_length"), 0,
               "  recompute:\n    granularity: full\n    method: block\n"
               "    num_layers: 1\n");
  Plan p = planned(2, std::nullopt, text);
  ASSERT_FALSE(p.candidates.empty());
  for (const PlanCandidate &c : p.candidates) {
    EXPECT_EQ(recomputeText(c.spec.training.recompute), "full/block/1");
    EXPECT_NE(megatronArgs(c).find("--recompute-method block"),
              std::string::npos);
  }
}

/// kSpec's model with two Mamba groups, so that every layer kind splits
/// over tp 2 (one group, the default, does not).
std::string
tensorParallelSpec(const std::string &parallel = "  microbatches: 8\n") {
  std::string text = smallSpec("M-M*M-M-", parallel, "  seq_length: 32\n");
  text.replace(text.find("  vocab_size"), 0, "  mamba_num_groups: 2\n");
  return text;
}

ModelSpec loaded(const std::string &text, SpecOverrides o = {}) {
  auto spec = parseSpec(text, "spec.yaml", o);
  EXPECT_TRUE(static_cast<bool>(spec))
      << (spec ? "" : llvm::toString(spec.takeError()));
  return spec ? std::move(*spec) : ModelSpec{};
}

// One rank of tp 2 holds a half of each split parameter and all of each
// norm, and the activations between its collectives are its shard's: the
// MLP (hidden 64, ffn 128, squared ReLU) and attention (4 heads of 16, 2
// groups) layers worked out by hand, at 32 tokens of fp32.
TEST(PlanTensorParallel, LayerCostsAreTheShards) {
  const ModelDims d = loaded(tensorParallelSpec()).dims;
  CostSettings s;
  s.seqLength = 32;
  auto at = [&](char symbol, int64_t tp, bool sp) {
    s.tp = tp;
    s.sequenceParallel = sp;
    return *layerCost(symbol, d, s);
  };
  // MLP: norm 64 + fc1 128x64 + fc2 64x128.
  EXPECT_EQ(at('-', 1, false).params, 64 + 8192 + 8192);
  EXPECT_EQ(at('-', 2, false).params, 64 + 4096 + 4096);
  // Kept: input and normed input (64 each), fc1 output and activation.
  EXPECT_EQ(at('-', 1, false).activationBytes, 32 * (128 + 128 + 128) * 4);
  EXPECT_EQ(at('-', 2, false).activationBytes, 32 * (128 + 64 + 64) * 4);
  EXPECT_EQ(at('-', 2, true).activationBytes, 32 * (64 + 64 + 64) * 4);
  // Two GEMMs of 2 x 32 x 64 x ffn/tp each.
  EXPECT_EQ(at('-', 2, false).forwardFlops, 2 * (2 * 32 * 64 * 64));
  // Attention: norm 64 + qkv (4 + 2 x 2) x 16 rows x 64 + proj 64x64.
  EXPECT_EQ(at('*', 1, false).params, 64 + 8192 + 4096);
  EXPECT_EQ(at('*', 2, false).params, 64 + 4096 + 2048);
  // A stage boundary sends a tp-th of the activation with sequence
  // parallelism only.
  EXPECT_EQ(at('M', 2, false).sendBytes, 32 * 64 * 4);
  EXPECT_EQ(at('M', 2, true).sendBytes, 32 * 64 * 4 / 2);
}

// A rank's parameters at tp 2: the norms (one a layer and the final one,
// 64 each) whole, the rest halved; its memory falls with tp, and further
// with sequence parallelism: in the coarse model (Megatron-LM's layers keep
// their inputs' shards), and in hypipe-run's buffers, where each of the 8
// layers and the head keeps its input (64 floats a token) and its norm's
// rstd (1) for the rank's 16 of the 32 tokens, and full recompute's
// checkpoints are the rank's sequence shard (the activation slots stay
// whole: a row-parallel layer writes every token's partial output there
// before the reduce-scatter). The model's own count stays.
TEST(PlanTensorParallel, RankMemoryFallsWithTp) {
  const std::string text = tensorParallelSpec();
  SpecOverrides o;
  o.tp = 2;
  const SpecCosts one = specCosts(loaded(text));
  const SpecCosts two = specCosts(loaded(text, o));
  o.sequenceParallel = true;
  const SpecCosts sp = specCosts(loaded(text, o));
  const int64_t replicated = 8 * 64 + 64;
  ASSERT_EQ(one.rankParams.size(), 1u);
  EXPECT_EQ(two.rankParams[0],
            (one.rankParams[0] - replicated) / 2 + replicated);
  EXPECT_EQ(two.totalParams, one.totalParams);
  EXPECT_LT(two.rankMemory[0], one.rankMemory[0]);
  EXPECT_LT(sp.rankMemory[0], two.rankMemory[0]);
  ASSERT_FALSE(two.rankRuntimeMemory.empty());
  EXPECT_LT(two.rankRuntimeMemory[0], one.rankRuntimeMemory[0]);
  // One microbatch in flight at pp 1.
  const int64_t inputHalves = 9 * 16 * (64 + 1) * 4;
  EXPECT_EQ(two.rankRuntimeMemory[0] - sp.rankRuntimeMemory[0], inputHalves);
  o.recomputeGranularity = "full";
  o.recomputeMethod = "uniform";
  o.recomputeNumLayers = 1;
  const SpecCosts fullSp = specCosts(loaded(text, o));
  o.sequenceParallel = false;
  const SpecCosts full = specCosts(loaded(text, o));
  // 8 checkpoints of 32 x 64 floats, halved, and the inputs' halves again
  // (the recompute buffer holds every recomputed layer's tensors of the
  // microbatch whose input gradient runs).
  EXPECT_EQ(full.rankRuntimeMemory[0] - fullSp.rankRuntimeMemory[0],
            8 * 32 * 64 / 2 * 4 + inputHalves);
}

// The tensor-parallel collectives are in the step: at pp 1 and dp 1 a
// microbatch's F runs one all-reduce of the activation (32 x 64 fp32) in
// the embedding and in each of the 8 layers, and the cross-entropy's three
// of one float a token; its backward one in each layer and the head. The
// simulated step is the compute and those, microbatch after microbatch.
TEST(PlanTensorParallel, CollectivesAreInTheStep) {
  SpecOverrides o;
  o.tp = 2;
  const ModelSpec spec = loaded(tensorParallelSpec(), o);
  Expected<Cluster> cpu = makeCluster("cpu");
  ASSERT_TRUE(static_cast<bool>(cpu));
  const Link &link = cpu->device.intraNode; // 2 ranks a node: tp 2 fits
  auto step = stepCosts(spec, specCosts(spec).stageCost, {nullptr, &*cpu});
  ASSERT_TRUE(static_cast<bool>(step));
  const double activation = 32 * 64 * 4, perToken = 32 * 4;
  const double f = 9 * allReduceSeconds(2, activation, link) +
                   3 * allReduceSeconds(2, perToken, link);
  const double i = 9 * allReduceSeconds(2, activation, link);
  ASSERT_EQ(step->stageTensorF.size(), 1u);
  EXPECT_DOUBLE_EQ(step->stageTensorF[0], f);
  EXPECT_DOUBLE_EQ(step->stageTensorI[0], i);
  auto with = simulateSpec(spec, *step);
  auto without = simulateSpec(spec, step->withoutCommunication());
  ASSERT_TRUE(with && without);
  EXPECT_NEAR(with->makespan - without->makespan, 8 * (f + i), 1e-12);
  // With sequence parallelism each all-reduce of a layer is an all-gather
  // and a reduce-scatter: the same ring time.
  o.sequenceParallel = true;
  const ModelSpec sp = loaded(tensorParallelSpec(), o);
  auto spStep = stepCosts(sp, specCosts(sp).stageCost, {nullptr, &*cpu});
  ASSERT_TRUE(static_cast<bool>(spStep));
  const double gather = allGatherSeconds(2, activation, link);
  EXPECT_DOUBLE_EQ(spStep->stageTensorF[0],
                   2 * gather * 8 + gather /*embedding's reduce-scatter*/ +
                       gather /*head's all-gather*/ +
                       3 * allReduceSeconds(2, perToken, link));
}

PlanRequest onH100s(int64_t gpus) {
  PlanRequest request{"spec.yaml", gpus, std::nullopt, std::nullopt};
  Expected<Cluster> h100 = makeCluster("h100");
  EXPECT_TRUE(static_cast<bool>(h100));
  request.cluster = *h100;
  request.megatronMemory = true; // no recompute to search
  return request;
}

// On GPUs plan searches the tp that divide a node's 8 and that every
// layer splits over, with sequence parallelism (seq_length 32 divides by
// them), and prints Megatron-LM's flags for them.
TEST(PlanTensorParallel, SearchedOnGpus) {
  auto p = plan(tensorParallelSpec(), onH100s(4));
  ASSERT_TRUE(static_cast<bool>(p)) << p.problem().message;
  // 4 heads and 2 query and Mamba groups: tp 4 and 8 do not split them.
  EXPECT_EQ(p->tensorParallelSizes, (std::vector<int64_t>{1, 2}));
  EXPECT_NE(p->tensorParallelRefusal.find("tp 4: "), std::string::npos);
  std::set<std::pair<int64_t, bool>> seen;
  for (const PlanCandidate &c : p->candidates) {
    const PlanLayout &l = c.layout;
    EXPECT_EQ(l.tp * l.pp * l.dp, 4);
    EXPECT_EQ(c.spec.parallel.tp, l.tp);
    EXPECT_EQ(c.spec.parallel.sequenceParallel, l.sequenceParallel);
    seen.insert({l.tp, l.sequenceParallel});
    const std::string args = megatronArgs(c);
    EXPECT_EQ(flagValue(args, "--tensor-model-parallel-size"),
              l.tp > 1 ? std::to_string(l.tp) : "");
    EXPECT_EQ(args.find("--sequence-parallel") != std::string::npos,
              l.sequenceParallel);
    auto written = plannedSpecText(tensorParallelSpec(), "/somewhere", c);
    ASSERT_TRUE(static_cast<bool>(written)) << written.problem().message;
  }
  EXPECT_EQ(seen, (std::set<std::pair<int64_t, bool>>{{1, false}, {2, true}}));
}

// A cap between the least memory of tp 1 and of tp 2 leaves only tp 2.
TEST(PlanTensorParallel, TpFitsWhatPipelinesAloneDoNot) {
  const std::string text = tensorParallelSpec();
  auto all = plan(text, onH100s(2));
  ASSERT_TRUE(static_cast<bool>(all));
  int64_t leastOne = INT64_MAX, leastTwo = INT64_MAX;
  for (const PlanCandidate &c : all->candidates)
    (c.layout.tp == 1 ? leastOne : leastTwo) =
        std::min(c.layout.tp == 1 ? leastOne : leastTwo, c.peakMemory());
  ASSERT_LT(leastTwo, leastOne);
  PlanRequest capped = onH100s(2);
  capped.memoryGiB = (leastOne + leastTwo) / 2.0 / (1 << 30);
  auto p = plan(text, capped);
  ASSERT_TRUE(static_cast<bool>(p)) << p.problem().message;
  ASSERT_FALSE(p->candidates.empty());
  for (const PlanCandidate &c : p->candidates)
    EXPECT_EQ(c.layout.tp, 2);
}

// A model with MoE layers splits over tp only with sequence parallelism
// (Megatron-LM's rule): at seq_length 32 plan searches tp 2 with it; at 33,
// which tp 2 does not divide, tp 1 alone, and says why.
TEST(PlanTensorParallel, MoeSplitsOnlyWithSequenceParallelism) {
  std::string text = tensorParallelSpec();
  text.replace(text.find("M-M*M-M-"), 8, "M-M*MEM-");
  text.replace(text.find("  vocab_size"), 0,
               "  num_experts: 4\n  moe_router_topk: 2\n");
  auto p = plan(text, onH100s(2));
  ASSERT_TRUE(static_cast<bool>(p)) << p.problem().message;
  EXPECT_EQ(p->tensorParallelSizes, (std::vector<int64_t>{1, 2}));
  for (const PlanCandidate &c : p->candidates)
    EXPECT_TRUE(c.layout.tp == 1 || c.layout.sequenceParallel);

  text.replace(text.find("seq_length: 32"), 14, "seq_length: 33");
  p = plan(text, onH100s(2));
  ASSERT_TRUE(static_cast<bool>(p)) << p.problem().message;
  EXPECT_EQ(p->tensorParallelSizes, (std::vector<int64_t>{1}));
  EXPECT_NE(p->tensorParallelRefusal.find("MoE layers split only with "
                                          "sequence parallelism"),
            std::string::npos)
      << p->tensorParallelRefusal;
  for (const PlanCandidate &c : p->candidates)
    EXPECT_EQ(c.layout.tp, 1);
}

} // namespace
} // namespace hypipe
