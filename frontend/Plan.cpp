//===- Plan.cpp - the layouts of a spec for a rank count, fastest first ---===//
#include "frontend/Plan.h"

#include "core/io/Files.h"
#include "core/model/SizeBounds.h"
#include "core/model/TensorParallel.h"
#include "core/partition/AutoPartition.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include <regex>
#include <sstream>

namespace hypipe {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
/// Virtual stages per rank tried for a pattern the partitioner splits.
constexpr int64_t kMaxVpp = 4;

/// Whether the spec fixes its own split (`|`, a layout string, or Megatron's
/// first/last stage layer counts): then only its pp x vpp fits.
bool splitIsFixed(const ModelSpec &spec) {
  const ParallelSpec &par = spec.parallel;
  return spec.pattern.hasPipes() || !par.layout.empty() ||
         par.firstStageLayers || par.lastStageLayers;
}

/// The (pp, vpp) shapes a rank count can use.
std::vector<std::pair<int64_t, int64_t>> shapes(const ModelSpec &spec,
                                                int64_t ranks) {
  std::vector<std::pair<int64_t, int64_t>> out;
  if (splitIsFixed(spec)) {
    if (ranks % spec.placement.pp == 0)
      out.push_back({spec.placement.pp, spec.placement.vpp});
    return out;
  }
  const int64_t layers = spec.pattern.numLayers();
  // vpp > 1 only with pp > 1: one rank's chunks in a row are one stage.
  for (int64_t pp = 1; pp <= std::min(ranks, layers); ++pp)
    for (int64_t vpp = 1; ranks % pp == 0 && vpp <= kMaxVpp; ++vpp)
      if (pp * vpp <= layers && (vpp == 1 || pp > 1))
        out.push_back({pp, vpp});
  return out;
}

bool scheduleRuns(schedule::ScheduleKind kind, int64_t pp, int64_t vpp,
                  int64_t microbatches) {
  return !schedule::checkScheduleShape(kind, vpp) &&
         !schedule::checkSchedule({kind, pp, vpp, microbatches, std::nullopt});
}

int64_t specGlobalBatch(const ModelSpec &spec) {
  return spec.training.microBatchSize * spec.parallel.microbatches *
         spec.parallel.dp;
}

std::string stageList(const std::vector<int64_t> &stages) {
  std::string out;
  for (int64_t s : stages)
    out += (out.empty() ? "" : ", ") + std::to_string(s);
  return out;
}

std::string layoutText(const PlanLayout &l) {
  return fmt::format(
      "{}pp={} vpp={} dp={} {} microbatches={} "
      "micro_batch_size={}{}{}{}",
      fmt::format(
          "{}{}",
          l.tp > 1 ? fmt::format("tp={}{} ", l.tp,
                                 l.sequenceParallel ? " sequence_parallel" : "")
                   : "",
          l.expertGrid()
              ? fmt::format("ep={} etp={} ", l.ep, l.expertTensorParallel())
              : ""),
      l.pp, l.vpp, l.dp, schedule::scheduleName(l.schedule), l.microbatches,
      l.microBatchSize, l.distributedOptimizer ? " distributed optimizer" : "",
      l.recompute.granularity != RecomputeGranularity::None
          ? " recompute=" + recomputeText(l.recompute)
          : "",
      l.linearCrossEntropy ? " loss=linear" : "");
}

/// The micro batch sizes tried: 1, 2, 4, 8 and the spec's own.
std::vector<int64_t> microBatchSizes(const ModelSpec &spec) {
  std::vector<int64_t> sizes{1, 2, 4, 8};
  if (std::find(sizes.begin(), sizes.end(), spec.training.microBatchSize) ==
      sizes.end())
    sizes.push_back(spec.training.microBatchSize);
  return sizes;
}

/// The rank count nearest `ranks` that some layout uses fully (the lower at
/// equal distance). None uses more than every layer on its own rank times
/// one microbatch per data-parallel rank.
std::optional<int64_t> nearestUsable(const ModelSpec &spec, int64_t ranks,
                                     int64_t globalBatch,
                                     const std::vector<int64_t> &tps) {
  const int64_t replicas = globalBatch; // at one sample a microbatch
  const int64_t widest = *std::max_element(tps.begin(), tps.end());
  const int64_t perReplica = std::max<int64_t>(1, spec.pattern.numLayers()) *
                             widest; // every layer its own rank, at most tp
  const int64_t most = std::min(kMaxRanks, replicas > kMaxRanks / perReplica
                                               ? kMaxRanks
                                               : perReplica * replicas);
  ranks = std::min(ranks, most + 1);
  for (int64_t d = 1; ranks - d >= 1 || ranks + d <= most; ++d) {
    if (ranks - d >= 1 &&
        !planLayouts(spec, ranks - d, globalBatch, tps).empty())
      return ranks - d;
    if (ranks + d <= most &&
        !planLayouts(spec, ranks + d, globalBatch, tps).empty())
      return ranks + d;
  }
  return std::nullopt;
}

Error noLayoutUses(const ModelSpec &spec, int64_t ranks, int64_t globalBatch,
                   const std::vector<int64_t> &tps) {
  std::optional<int64_t> nearest = nearestUsable(spec, ranks, globalBatch, tps);
  return Error(Problem{
      fmt::format("no layout uses {} ranks fully for a global batch of {}",
                  ranks, globalBatch),
      nearest
          ? fmt::format("the nearest rank count that has one is {}", *nearest)
          : std::string("no rank count has one: change the global batch "
                        "(--global-batch)")});
}

/// p2p bytes per step: each microbatch's activation forward and its gradient
/// back across every stage boundary between two ranks, in every pipeline
/// (each tensor-parallel rank sends its own: all of it without sequence
/// parallelism, a tp-th with it).
int64_t bytesSent(const ModelSpec &spec, const SpecCosts &costs) {
  const auto &stages = spec.placement.stages;
  int64_t perMicrobatch = 0;
  for (size_t s = 0; s + 1 < stages.size(); ++s)
    if (stages[s].ppRank != stages[s + 1].ppRank)
      perMicrobatch += 2 * costs.stageCost[s].sendBytes;
  return perMicrobatch * spec.parallel.microbatches * spec.parallel.dp *
         spec.parallel.tp;
}

LeastMemory leastMemoryOf(const PlanLayout &layout, const ModelSpec &spec,
                          const std::vector<int64_t> &memory) {
  LeastMemory m{layout};
  auto worst = std::max_element(memory.begin(), memory.end());
  m.bytes = *worst;
  m.ppRank = worst - memory.begin();
  for (const PatternStage &s : spec.placement.stages)
    if (s.ppRank == m.ppRank)
      m.stages.push_back(s.index);
  return m;
}

/// The first line of a rendered spec error ("FILE:L:C: error: WHAT"), as
/// WHAT (FILE:L:C): the plan's own "error: " heads the line it goes in.
std::string refusalLine(const std::string &rendered) {
  std::string line = rendered.substr(0, rendered.find('\n'));
  const size_t at = line.find("error: ");
  if (at == std::string::npos)
    return line;
  std::string what = line.substr(at + 7);
  if (at >= 2) // "FILE:L:C: "
    what += " (" + line.substr(0, at - 2) + ")";
  return what;
}

SpecOverrides overridesOf(const PlanLayout &l) {
  SpecOverrides o;
  o.tp = l.tp;
  o.sequenceParallel = l.sequenceParallel;
  o.ep = l.ep;
  if (l.etp)
    o.etp = l.etp;
  o.pp = l.pp;
  o.vpp = l.vpp;
  o.dp = l.dp;
  o.schedule = schedule::scheduleName(l.schedule);
  o.microbatches = l.microbatches;
  o.microBatchSize = l.microBatchSize;
  o.distributedOptimizer = l.distributedOptimizer;
  // The spec's own recompute stands unless the search chose one (it
  // searches only specs without).
  if (l.recompute.full()) {
    o.recomputeGranularity = recomputeGranularityName(l.recompute.granularity);
    o.recomputeMethod = recomputeMethodName(l.recompute.method);
    o.recomputeNumLayers = l.recompute.numLayers;
  } else if (l.recompute.granularity == RecomputeGranularity::Selective) {
    o.recomputeGranularity = recomputeGranularityName(l.recompute.granularity);
    std::vector<std::string> names;
    for (RecomputeModule m : l.recompute.modules)
      names.push_back(recomputeModuleName(m));
    o.recomputeModules = names;
  }
  // Likewise its loss (the search tries linear only where it is native).
  if (l.linearCrossEntropy)
    o.crossEntropyFusionImpl = "linear";
  o.givenBy = "the layout plan tried";
  return o;
}

/// Full uniform recompute in chunks of the most main layers any stage of
/// `spec` holds: every main layer recomputed, one checkpoint a stage. Every
/// chunk size recomputes the same layers, so costs the same time; this one
/// keeps the fewest checkpoints, and hypipe-run's recompute buffer holds a
/// microbatch's recomputed layers whatever the chunks, so it needs the
/// least memory of them.
RecomputeSpec fullestRecompute(const ModelSpec &spec) {
  RecomputeSpec r = fullRecompute(RecomputeMethod::Uniform, 1);
  for (const PatternStage &s : spec.placement.stages)
    r.numLayers = std::max(r.numLayers, int64_t(s.layers.size()));
  return r;
}

/// Selective recompute of every module `spec`'s layers hold that hypipe
/// recomputes (docs/recompute.md): the most selective recompute keeps off
/// the saved buffer, with less to run again than full recompute; none when
/// the layers hold none (Mamba alone).
RecomputeSpec widestSelective(const ModelSpec &spec) {
  const std::string layers = spec.pattern.layers() + spec.pattern.mtp;
  std::vector<RecomputeModule> modules;
  for (RecomputeModule m : {RecomputeModule::CoreAttn, RecomputeModule::Mlp,
                            RecomputeModule::Moe, RecomputeModule::LayerNorm})
    if (layers.find_first_of(recomputeModuleLayers(m)) != std::string::npos)
      modules.push_back(m);
  return modules.empty() ? RecomputeSpec{}
                         : selectiveRecompute(std::move(modules));
}

/// A layout loaded, costed and within the memory cap, not yet simulated.
struct Loaded {
  PlanLayout layout;
  ModelSpec spec;
  SpecCosts costs;
  std::vector<int64_t> memory; ///< PlanCandidate::memory
  schedule::Costs step;        ///< what its step is simulated with
  double bound = 0; ///< busiestRankCompute: no schedule of it is faster
};

/// The search's state: what it has seen so far.
struct Search {
  const PlanRequest &request;
  const std::string &text;
  int64_t globalBatch = 0;
  Plan plan;
  double fastestPrunedBound = -1; ///< least busiest-rank bound pruned
  std::string firstRefusal; ///< why the spec loader refused the first layout
  std::vector<Loaded> loaded;
  /// Whether recompute is a dimension of the search: the spec sets none,
  /// and memory is held as hypipe-run holds it (the cost model's Megatron
  /// estimate does not model recompute).
  bool searchRecompute = false;

  /// Loads and costs `layout`: keeps it where it is valid and within the
  /// memory cap; one over the cap waits in `overCap` for the linear loss
  /// or recompute where the search tries them (fitOverCap), else counts
  /// pruned by memory.
  void load(const PlanLayout &layout);
  /// Each layout of `overCap`, least bound first, with what holds less:
  /// the linear cross-entropy alone, then each recompute (selective, then
  /// full) with the native loss and with the linear one; the first that
  /// fits is simulated at once. One whose bound (as it was: these only add
  /// to it) cannot reach the top is not tried, nor any after it.
  void fitOverCap();
  /// A layout loaded and costed over the memory cap.
  struct OverCap {
    PlanLayout layout;
    ModelSpec spec;
    std::vector<int64_t> memory; ///< PlanCandidate::memory
    int64_t peak = 0;
    double bound = 0;
  };
  enum class Fit { Kept, Refused, Over };
  /// Over the cap, waiting for the linear loss or recompute.
  std::vector<OverCap> overCap;
  /// Whether a layout whose busiest rank alone needs `bound` cannot enter
  /// the top (--top) of the steps simulated so far.
  bool cannotReachTop(double bound) const;
  /// Counts `over` pruned by memory, and its need towards leastMemory.
  void prunedByMemory(const OverCap &over);
  /// One try of load: keeps `layout` where it is valid and within the cap,
  /// gives what it loaded in `over` where it is over; a refusal counts as
  /// invalid only with `countRefusal`.
  Fit loadOne(const PlanLayout &layout, bool countRefusal,
              std::optional<OverCap> &over);
  /// Simulates what was loaded, least bound first, skipping what cannot
  /// reach the top.
  void simulateLoaded();
  void refuse(std::string why) {
    if (firstRefusal.empty())
      firstRefusal = std::move(why);
    ++plan.invalid;
  }
  /// A layout over the cap whose busiest rank alone needs `bound`.
  void noteOverCap(double bound) {
    if (fastestPrunedBound < 0 || bound < fastestPrunedBound)
      fastestPrunedBound = bound;
  }
  void simulate(Loaded &l);
};

void Search::load(const PlanLayout &layout) {
  std::optional<OverCap> over;
  if (loadOne(layout, true, over) != Fit::Over)
    return;
  noteOverCap(over->bound);
  if (searchRecompute || plan.searchedLoss)
    overCap.push_back(std::move(*over));
  else
    prunedByMemory(*over);
}

void Search::prunedByMemory(const OverCap &over) {
  ++plan.prunedByMemory;
  LeastMemory m = leastMemoryOf(over.layout, over.spec, over.memory);
  if (!plan.leastMemory || m.bytes < plan.leastMemory->bytes)
    plan.leastMemory = m;
}

bool Search::cannotReachTop(double bound) const {
  const size_t top = request.top ? size_t(*request.top) : 0;
  if (!top || plan.candidates.size() < top)
    return false;
  std::vector<double> steps;
  for (const PlanCandidate &c : plan.candidates)
    steps.push_back(c.makespan);
  std::nth_element(steps.begin(), steps.begin() + (top - 1), steps.end());
  // A rank that never idles has a step equal to its bound up to the
  // rounding of the simulator's sums: such a tie may still enter.
  return bound > steps[top - 1] * (1 + 1e-9);
}

void Search::fitOverCap() {
  std::stable_sort(
      overCap.begin(), overCap.end(),
      [](const OverCap &a, const OverCap &b) { return a.bound < b.bound; });
  for (size_t i = 0; i < overCap.size(); ++i) {
    OverCap &over = overCap[i];
    // Bounds only grow from here, and the linear loss and recompute add
    // to them.
    if (cannotReachTop(over.bound)) {
      plan.prunedByBound += int64_t(overCap.size() - i);
      return;
    }
    // A layout that fits as it is keeps the native loss and no recompute:
    // both only cost time. One that does not is tried with the least
    // first: the linear cross-entropy alone (one output-layer GEMM more a
    // microbatch and loss, on the head's stage only), then selective
    // recompute of every module its layers hold, then full recompute of
    // the first N layers of each stage (block), N = 1, 2, ..., then of all
    // of them; each recompute with the native loss, then with the linear
    // one.
    std::vector<RecomputeSpec> recomputes;
    if (searchRecompute) {
      recomputes.push_back(widestSelective(over.spec));
      const RecomputeSpec fullest = fullestRecompute(over.spec);
      for (int64_t n = 1; n < fullest.numLayers; ++n)
        recomputes.push_back(fullRecompute(RecomputeMethod::Block, n));
      recomputes.push_back(fullest);
    }
    std::vector<PlanLayout> tries;
    auto tryWith = [&](const RecomputeSpec &r, bool linear) {
      if (linear && !plan.searchedLoss)
        return;
      PlanLayout l = over.layout;
      l.recompute = r;
      l.linearCrossEntropy = linear;
      tries.push_back(l);
    };
    tryWith(RecomputeSpec{}, true);
    for (const RecomputeSpec &r : recomputes)
      if (r.granularity != RecomputeGranularity::None) {
        tryWith(r, false);
        tryWith(r, true);
      }
    bool kept = false;
    OverCap least = over;
    for (const PlanLayout &layout : tries) {
      std::optional<OverCap> still;
      Fit fit = loadOne(layout, false, still);
      if ((kept = fit == Fit::Kept))
        break;
      // What the layout needs at the least, for noLayoutFits.
      if (fit == Fit::Over && still->peak < least.peak)
        least = std::move(*still);
    }
    if (kept)
      simulateLoaded();
    else
      prunedByMemory(least);
  }
}

Search::Fit Search::loadOne(const PlanLayout &layout, bool countRefusal,
                            std::optional<OverCap> &over) {
  auto refused = [&](std::string why) {
    if (countRefusal)
      refuse(std::move(why));
    return Fit::Refused;
  };
  auto spec = parseSpec(text, request.specPath, overridesOf(layout));
  if (!spec)
    return refused(refusalLine(llvm::toString(spec.takeError())));
  SpecCosts costs = specCosts(*spec);
  // A layer kind the measured costs lack fails here (the schedule itself
  // was checked when the spec loaded).
  Expected<schedule::Costs> step =
      stepCosts(*spec, costs.stageCost, request.stepModel());
  if (!step)
    return refused(step.takeError().message());
  const double bound = busiestRankCompute(*spec, *step);
  std::vector<int64_t> memory =
      request.megatronMemory ? costs.rankMemory : costs.rankPeakMemory();
  int64_t peak = *std::max_element(memory.begin(), memory.end());
  if (request.memoryGiB && peak > *request.memoryGiB * kGiB) {
    over = OverCap{layout, std::move(*spec), std::move(memory), peak, bound};
    return Fit::Over;
  }
  loaded.push_back({layout, std::move(*spec), std::move(costs),
                    std::move(memory), std::move(*step), bound});
  return Fit::Kept;
}

void Search::simulate(Loaded &l) {
  auto simulation = simulateSpec(l.spec, l.step);
  if (!simulation)
    return refuse(simulation.takeError().message());
  ++plan.simulated;
  PlanCandidate c{l.layout, std::move(l.spec), std::move(l.costs),
                  std::move(l.memory)};
  c.makespan = simulation->makespan;
  c.bubble = *std::max_element(simulation->bubbleFraction.begin(),
                               simulation->bubbleFraction.end());
  c.communication = communicationShare(c.spec, l.step, c.makespan);
  c.bytesSentPerStep = bytesSent(c.spec, c.costs);
  c.globalBatch = globalBatch;
  plan.fitByRecompute +=
      c.layout.recompute.granularity != RecomputeGranularity::None;
  plan.fitByLinearLoss += c.layout.linearCrossEntropy;
  plan.candidates.push_back(std::move(c));
}

void Search::simulateLoaded() {
  std::stable_sort(
      loaded.begin(), loaded.end(),
      [](const Loaded &a, const Loaded &b) { return a.bound < b.bound; });
  for (size_t i = 0; i < loaded.size(); ++i) {
    // Bounds only grow from here: none of the rest can enter the top.
    if (cannotReachTop(loaded[i].bound)) {
      plan.prunedByBound += int64_t(loaded.size() - i);
      break;
    }
    simulate(loaded[i]);
  }
  loaded.clear();
}

Error noLayoutFits(const LeastMemory &m, const PlanRequest &request,
                   const Plan &plan) {
  const double capGiB = *request.memoryGiB;
  const std::string problem =
      fmt::format("no layout fits {} GiB per rank: the least any needs is "
                  "{:.2f} GiB, on pp rank {} (stages {}) of {}",
                  capGiB, m.bytes / kGiB, m.ppRank, stageList(m.stages),
                  layoutText(m.layout));
  // A device's memory is what the GPU has: asking for more is no help.
  const bool deviceCap = request.cluster && request.cluster->device.gpu &&
                         capGiB == request.cluster->device.memoryGiB;
  std::vector<std::string> ways;
  if (!deviceCap)
    ways.push_back(fmt::format("give --memory-gib {:.2f} or more",
                               std::ceil(m.bytes / kGiB * 100) / 100));
  ways.push_back(fmt::format("more ranks (deeper pipelines hold fewer "
                             "layers a rank: --{} {})",
                             request.cluster ? "gpus" : "ranks",
                             2 * request.ranks));
  if (!request.megatronMemory)
    ways.push_back("--memory-of megatron to plan for what a Megatron-LM run "
                   "holds (hypipe-run keeps more: docs/plan.md)");
  ways.push_back(m.layout.microBatchSize > 1
                     ? "a smaller micro batch or sequence (training.seq_length)"
                     : "a shorter sequence (training.seq_length)");
  // Tensor parallelism makes a rank's share smaller: say how far it went.
  int64_t widest = 1; // of the sizes searched, the widest the ranks hold
  for (int64_t tp : plan.tensorParallelSizes)
    if (request.ranks % tp == 0)
      widest = std::max(widest, tp);
  if (request.tp || !request.cluster || !request.cluster->device.gpu)
    ways.push_back("tensor parallelism (--gpus, or a GPU --device, without "
                   "--tp searches it)");
  std::string help = ways[0];
  for (size_t i = 1; i < ways.size(); ++i)
    help += (i + 1 == ways.size() ? ", or " : ", ") + ways[i];
  std::string tried =
      widest > 1 ? fmt::format("tensor parallelism up to tp {}", widest) : "";
  if (!plan.tensorParallelRefusal.empty())
    tried += (tried.empty() ? "no tensor parallelism, " : ", not ") +
             plan.tensorParallelRefusal;
  if (plan.searchedLoss)
    tried +=
        (tried.empty() ? "" : "; ") + std::string("the linear cross-entropy");
  if (!request.megatronMemory)
    tried += (tried.empty() ? "" : "; ") +
             std::string("selective and full activation recompute");
  return Error(Problem{
      problem, help + (tried.empty() ? "" : "; tried: " + tried) +
                   (request.megatronMemory
                        ? "; plan does not try activation recompute against "
                          "Megatron-LM's memory"
                        : "")});
}

/// Where top-level section `name` starts and ends in `lines` ([begin, end),
/// `begin` the `name:` line; trailing blank lines not counted), or nullopt.
std::optional<std::pair<size_t, size_t>>
sectionLines(const std::vector<std::string> &lines, const std::string &name) {
  const std::regex header("^" + name + R"(:\s*(#.*)?$)");
  for (size_t begin = 0; begin < lines.size(); ++begin) {
    if (!std::regex_match(lines[begin], header))
      continue;
    size_t end = begin + 1;
    while (end < lines.size() &&
           (lines[end].empty() || lines[end][0] == ' ' || lines[end][0] == '#'))
      ++end;
    while (end > begin + 1 && lines[end - 1].empty())
      --end;
    return std::pair{begin, end};
  }
  return std::nullopt;
}

/// Sets `section.key`'s one-line value where the spec writes it; with
/// `add`, writes it (and the section) where the spec does not.
void setKey(std::vector<std::string> &lines, const std::string &section,
            const std::string &key, const std::string &value,
            bool add = false) {
  auto range = sectionLines(lines, section);
  const std::regex line(R"(^(\s+))" + key + R"(:(\s.*)?$)");
  std::smatch m;
  for (size_t i = range ? range->first + 1 : lines.size();
       range && i < range->second; ++i)
    if (std::regex_match(lines[i], m, line)) {
      lines[i] = m[1].str() + key + ": " + value;
      return;
    }
  if (!add)
    return;
  if (!range) {
    lines.push_back(section + ":");
    range = std::pair{lines.size() - 1, lines.size()};
  }
  // Indented as the section's first key is (two spaces in an empty one).
  std::string indent = "  ";
  const std::regex keyLine(R"(^(\s+)[^\s#].*$)");
  for (size_t i = range->first + 1; i < range->second; ++i)
    if (std::regex_match(lines[i], m, keyLine)) {
      indent = m[1].str();
      break;
    }
  lines.insert(lines.begin() + range->first + 1, indent + key + ": " + value);
}

/// The YAML value of a path relative to the spec's directory, made absolute.
std::string absolutePath(const std::string &specDir, const std::string &path) {
  llvm::SmallString<256> full(path);
  if (!llvm::sys::path::is_absolute(full)) {
    full = specDir;
    llvm::sys::path::append(full, path);
    llvm::sys::fs::make_absolute(full);
  }
  return nlohmann::json(std::string(full)).dump();
}

std::vector<std::string> parallelSection(const PlanCandidate &c) {
  const PlanLayout &l = c.layout;
  std::vector<std::string> lines = {"parallel:"};
  if (l.tp > 1) {
    lines.push_back(fmt::format("  tp: {}", l.tp));
    lines.push_back(fmt::format("  sequence_parallel: {}",
                                l.sequenceParallel ? "true" : "false"));
  }
  if (l.expertGrid()) {
    lines.push_back(fmt::format("  ep: {}", l.ep));
    lines.push_back(fmt::format("  etp: {}", l.expertTensorParallel()));
  }
  std::vector<std::string> rest = {
      fmt::format("  pp: {}", l.pp),
      fmt::format("  vpp: {}", l.vpp),
      fmt::format("  dp: {}", l.dp),
      fmt::format("  schedule: {}", schedule::scheduleName(l.schedule)),
      fmt::format("  microbatches: {}", l.microbatches),
      fmt::format("  distributed_optimizer: {}",
                  l.distributedOptimizer ? "true" : "false")};
  lines.insert(lines.end(), rest.begin(), rest.end());
  // A group size the spec gave (the default is pp) stays what it was.
  if (c.spec.parallel.groupSize != l.pp)
    lines.push_back(fmt::format("  microbatch_group_size_per_vp_stage: {}",
                                c.spec.parallel.groupSize));
  return lines;
}

/// Whether `written` places and schedules as the candidate does.
bool sameLayout(const ModelSpec &written, const PlanCandidate &c) {
  const ParallelSpec &a = written.parallel, &b = c.spec.parallel;
  const auto &x = written.placement.stages, &y = c.spec.placement.stages;
  bool stagesEqual = x.size() == y.size();
  for (size_t i = 0; stagesEqual && i < x.size(); ++i)
    stagesEqual = x[i].ppRank == y[i].ppRank && x[i].vpStage == y[i].vpStage &&
                  x[i].layers == y[i].layers;
  return stagesEqual &&
         written.training.microBatchSize == c.spec.training.microBatchSize &&
         a.tp == b.tp && a.sequenceParallel == b.sequenceParallel &&
         a.ep == b.ep && a.etp == b.etp && a.pp == b.pp && a.vpp == b.vpp &&
         a.dp == b.dp && a.schedule == b.schedule &&
         a.microbatches == b.microbatches && a.groupSize == b.groupSize &&
         a.distributedOptimizer == b.distributedOptimizer &&
         written.training.recompute == c.spec.training.recompute &&
         written.crossEntropyFusionImpl == c.spec.crossEntropyFusionImpl;
}

std::vector<std::string> splitLines(const std::string &text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

/// --ranks and --global-batch within the bounds every spec has
/// (core/model/SizeBounds.h).
Error checkRequest(const PlanRequest &r) {
  if (r.ranks < 1 || r.ranks > kMaxRanks)
    return Error(Problem{fmt::format("--ranks is {}; hypipe plans 1 to {} "
                                     "ranks (tp x pp x dp)",
                                     r.ranks, kMaxRanks),
                         "give a rank count in that range"});
  // A step holds at most kMaxStepTokens tokens, so at most that many samples.
  const int64_t most = kMaxStepTokens;
  if (r.globalBatch && (*r.globalBatch < 1 || *r.globalBatch > most))
    return Error(Problem{fmt::format("--global-batch is {}; at most {} samples "
                                     "a step",
                                     *r.globalBatch, most),
                         "give a global batch in that range"});
  return Error::success();
}

void sortFastestFirst(std::vector<PlanCandidate> &candidates) {
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const PlanCandidate &a, const PlanCandidate &b) {
                     // Equal steps: no recompute before recompute, then
                     // the one with memory to spare first.
                     if (a.makespan != b.makespan)
                       return a.makespan < b.makespan;
                     // none, then selective, then full: the least
                     // recompute first.
                     auto weight = [](const PlanCandidate &c) {
                       switch (c.layout.recompute.granularity) {
                       case RecomputeGranularity::None:
                         return 0;
                       case RecomputeGranularity::Selective:
                         return 1;
                       case RecomputeGranularity::Full:
                         break;
                       }
                       return 2;
                     };
                     if (weight(a) != weight(b))
                       return weight(a) < weight(b);
                     // The native loss before the linear one.
                     if (a.layout.linearCrossEntropy !=
                         b.layout.linearCrossEntropy)
                       return b.layout.linearCrossEntropy;
                     // Sequence parallelism holds less: it first.
                     if (a.layout.sequenceParallel != b.layout.sequenceParallel)
                       return a.layout.sequenceParallel;
                     return a.peakMemory() < b.peakMemory();
                   });
}

} // namespace

std::string recomputeText(const RecomputeSpec &r) {
  if (r.granularity == RecomputeGranularity::None)
    return "none";
  if (!r.full()) {
    std::string text = recomputeGranularityName(r.granularity);
    for (size_t i = 0; i < r.modules.size(); ++i)
      text += (i ? "+" : "/") + std::string(recomputeModuleName(r.modules[i]));
    return text;
  }
  return fmt::format("full/{}/{}", recomputeMethodName(r.method), r.numLayers);
}

int64_t PlanCandidate::peakMemory() const {
  return *std::max_element(memory.begin(), memory.end());
}

std::string tensorParallelRefusal(const ModelSpec &spec, int64_t tp) {
  if (tp == 1)
    return "";
  // The vocabulary as Megatron-LM pads it for this tp.
  ModelDims d = spec.dims;
  d.vocab = paddedVocabSize(spec.vocabSize, spec.vocabDivisor, tp);
  // One shape of every kind the spec's layers hold; a kind the cost model
  // has no shape for splits nowhere.
  std::vector<rt::LayerShape> kinds = {rt::embeddingShape(d), rt::headShape(d)};
  bool unshaped = false;
  for (char symbol : spec.pattern.layers() + spec.pattern.mtp) {
    if (std::optional<rt::LayerShape> shape = patternLayerShape(spec, symbol))
      kinds.push_back(*shape);
    else
      unshaped = true;
  }
  if (spec.pattern.mtpDepths > 0)
    kinds.push_back(rt::MtpInputShape{d.vocab, d.hidden, 1, false});
  if (unshaped)
    return "a layer kind hypipe does not cost has no split";
  for (const rt::LayerShape &shape : kinds)
    if (std::string why = rt::tensorParallelProblem(shape, tp); !why.empty())
      return why;
  // MoE layers split only with sequence parallelism (Megatron-LM's rule),
  // which needs the sequence to divide (planLayouts).
  const std::string used = spec.pattern.layers() + spec.pattern.mtp;
  if (used.find('E') != std::string::npos && spec.training.seqLength % tp != 0)
    return fmt::format("MoE layers split only with sequence parallelism, and "
                       "seq_length ({}) is not a multiple of {}",
                       spec.training.seqLength, tp);
  return "";
}

std::vector<int64_t> tensorParallelSizes(const ModelSpec &spec,
                                         const std::optional<Cluster> &cluster,
                                         std::string *refusal) {
  if (!cluster || !cluster->device.gpu)
    return {spec.parallel.tp};
  std::vector<int64_t> sizes;
  for (int64_t tp = 1; tp <= cluster->device.perNode; ++tp) {
    if (cluster->device.perNode % tp != 0)
      continue;
    const std::string why = tensorParallelRefusal(spec, tp);
    if (why.empty())
      sizes.push_back(tp);
    else if (refusal && refusal->empty())
      *refusal = fmt::format("tp {}: {}", tp, why);
  }
  return sizes;
}

/// The expert grids (ep, etp) tried on tp x dp ranks of each pipeline
/// stage: Megatron-LM's default (every expert on every rank, etp tp), the
/// grids hypipe-run runs -- inside the tensor-parallel group (ep dividing
/// tp and the experts, etp tp / ep) and, on the CPU target, over m
/// data-parallel replicas' (etp x ep = m x tp, m dividing dp:
/// docs/expert-parallel.md) -- and with `search` (a Megatron-LM run)
/// each ep dividing the experts, etp tp or 1, whose etp x ep divides
/// tp x dp.
std::vector<std::pair<int64_t, int64_t>>
expertGrids(const ModelSpec &spec, int64_t tp, int64_t dp, bool search) {
  std::vector<std::pair<int64_t, int64_t>> grids{{1, 0}};
  const std::string used = spec.pattern.layers() + spec.pattern.mtp;
  if (used.find('E') == std::string::npos)
    return grids;
  const int64_t experts = spec.dims.numExperts;
  const int64_t ffn = spec.dims.expertFfnHidden();
  if (!search) {
    const bool overReplicas = spec.training.target == rt::Target::Cpu;
    for (int64_t m = 1; m <= (overReplicas ? dp : 1); ++m)
      for (int64_t ep = 2; ep <= m * tp; ++ep) {
        const int64_t etp = m * tp / ep;
        if (dp % m == 0 && (m * tp) % ep == 0 && experts % ep == 0 &&
            ffn % etp == 0)
          grids.push_back({ep, etp});
      }
    return grids;
  }
  std::vector<int64_t> etps{tp};
  if (tp > 1)
    etps.push_back(1);
  for (int64_t etp : etps)
    for (int64_t ep = 1; ep <= std::min(experts, tp * dp); ++ep)
      if (experts % ep == 0 && (tp * dp) % (etp * ep) == 0 &&
          spec.dims.expertFfnHidden() % etp == 0 && (ep > 1 || etp != tp))
        grids.push_back({ep, etp == tp ? 0 : etp});
  return grids;
}

std::vector<PlanLayout> planLayouts(const ModelSpec &spec, int64_t ranks,
                                    int64_t globalBatch,
                                    const std::vector<int64_t> &tps,
                                    bool searchExperts) {
  std::vector<PlanLayout> out;
  for (int64_t tp : tps) {
    if (tp < 1 || ranks % tp != 0)
      continue;
    // Sequence parallelism where Megatron-LM can scatter the sequence over
    // the tp ranks: its collectives take the time of the all-reduces they
    // replace and its stage boundaries send a tp-th, so the layout without
    // it is never faster and holds more (docs/plan.md).
    const bool sp = tp > 1 && spec.training.seqLength % tp == 0;
    for (auto [pp, vpp] : shapes(spec, ranks / tp))
      for (int64_t mbs : microBatchSizes(spec)) {
        const int64_t dp = ranks / tp / pp;
        if (globalBatch % (mbs * dp) != 0)
          continue;
        const int64_t microbatches = globalBatch / (mbs * dp);
        for (auto [ep, etp] : expertGrids(spec, tp, dp, searchExperts))
          for (schedule::ScheduleKind kind : schedule::scheduleKinds())
            for (bool sharded : {false, true})
              if (scheduleRuns(kind, pp, vpp, microbatches) &&
                  (!sharded || dp > 1)) {
                PlanLayout l{tp, pp,  vpp,  dp,      microbatches,
                             sp, mbs, kind, sharded, {}};
                l.ep = ep;
                l.etp = etp;
                out.push_back(l);
              }
      }
  }
  return out;
}

Expected<Plan> plan(const PlanRequest &request) {
  Expected<std::string> text =
      files::readBounded(request.specPath, files::kSpec);
  if (!text)
    return text.takeError();
  return plan(*text, request);
}

Expected<Plan> plan(const std::string &text, const PlanRequest &request) {
  if (Error refused = checkRequest(request))
    return std::move(refused);
  auto original = parseSpec(text, request.specPath);
  if (!original)
    return makeError(llvm::toString(original.takeError()));
  // What plan cannot write back yet, at its key (ModelSpec::unplannable).
  if (!original->unplannable.empty())
    return makeError(original->unplannable);
  Search search{request, text,
                request.globalBatch.value_or(specGlobalBatch(*original))};
  search.searchRecompute =
      !request.megatronMemory &&
      original->training.recompute.granularity == RecomputeGranularity::None;
  Plan &p = search.plan;
  // The cost model prices the linear loss's memory for hypipe-run and for
  // Megatron-LM alike.
  p.searchedLoss = original->crossEntropyFusionImpl == "native";
  if (request.tp) {
    if (std::string why = tensorParallelRefusal(*original, *request.tp);
        !why.empty())
      return Error(Problem{fmt::format("--tp {}: {}", *request.tp, why),
                           "give a tp every layer splits over, or leave "
                           "--tp out to search them"});
    p.tensorParallelSizes = {*request.tp};
  } else {
    p.tensorParallelSizes = tensorParallelSizes(*original, request.cluster,
                                                &p.tensorParallelRefusal);
  }
  // hypipe-run runs expert grids inside the tensor-parallel group; the
  // others are searched for a Megatron-LM run only.
  std::vector<PlanLayout> layouts =
      planLayouts(*original, request.ranks, search.globalBatch,
                  p.tensorParallelSizes, request.megatronMemory);
  if (layouts.empty())
    return noLayoutUses(*original, request.ranks, search.globalBatch,
                        p.tensorParallelSizes);
  for (const PlanLayout &layout : layouts)
    search.load(layout);
  search.simulateLoaded();
  search.fitOverCap();
  if (p.candidates.empty() && p.leastMemory)
    return noLayoutFits(*p.leastMemory, request, p);
  if (p.candidates.empty())
    return Error(
        Problem{fmt::format("the spec refuses all {} layouts for {} ranks: {}",
                            p.invalid, request.ranks, search.firstRefusal),
                "change --ranks or --global-batch"});
  sortFastestFirst(p.candidates);
  p.memoryBound = search.fastestPrunedBound >= 0 &&
                  search.fastestPrunedBound < p.candidates[0].makespan;
  return std::move(p);
}

std::string megatronModelArgs(const ModelSpec &spec) {
  const ModelDims &d = spec.dims;
  const TrainingSpec &t = spec.training;
  const std::map<char, int64_t> counts = spec.pattern.layerCounts();
  auto has = [&](char symbol) {
    auto it = counts.find(symbol);
    return it != counts.end() && it->second > 0;
  };
  std::string out =
      fmt::format("--num-layers {} --hidden-size {} --ffn-hidden-size {} "
                  "--num-attention-heads {}",
                  spec.pattern.numLayers(), d.hidden, d.ffnHidden, d.numHeads);
  if (d.numQueryGroups != d.numHeads)
    out += fmt::format(" --group-query-attention --num-query-groups {}",
                       d.numQueryGroups);
  out += fmt::format(" --kv-channels {} --seq-length {} "
                     "--max-position-embeddings {}",
                     d.kvChannels(), t.seqLength, t.seqLength);
  if (has('M'))
    out += fmt::format(" --mamba-num-heads {} --mamba-head-dim {} "
                       "--mamba-state-dim {} --mamba-num-groups {}",
                       d.mambaNumHeads, d.mambaHeadDim, d.mambaState,
                       d.mambaNumGroups);
  if (has('G'))
    out += fmt::format(" --linear-num-key-heads {} --linear-num-value-heads {} "
                       "--linear-key-head-dim {} --linear-value-head-dim {} "
                       "--linear-conv-kernel-dim {}",
                       d.gdnNumKeyHeads, d.gdnNumValueHeads, d.gdnKeyHeadDim,
                       d.gdnValueHeadDim, d.gdnConvWidth);
  if (has('E'))
    out += fmt::format(" --num-experts {} --moe-router-topk {} "
                       "--moe-ffn-hidden-size {} --moe-router-load-balancing-"
                       "type aux_loss --moe-aux-loss-coeff {:g}",
                       d.numExperts, d.moeTopK, d.expertFfnHidden(),
                       spec.moeAuxLossCoeff);
  if (spec.moeDispatcher != MoeDispatcher::AllGather && has('E'))
    out += fmt::format(" --moe-token-dispatcher-type {}",
                       moeDispatcherName(spec.moeDispatcher));
  if (spec.moeExpertCapacityFactor && has('E')) {
    out += fmt::format(" --moe-expert-capacity-factor {:g}",
                       *spec.moeExpertCapacityFactor);
    if (spec.moeTokenDropPolicy != "probs")
      out += " --moe-token-drop-policy " + spec.moeTokenDropPolicy;
    if (spec.moePadExpertInputToCapacity)
      out += " --moe-pad-expert-input-to-capacity";
  }
  if (has('+') || has('D')) { // DSA is MLA with an indexer
    const MlaRopeSpec &rope = spec.mlaRope;
    out += " --multi-latent-attention";
    if (d.qLoraRank > 0)
      out += fmt::format(" --q-lora-rank {}", d.qLoraRank);
    out += fmt::format(" --kv-lora-rank {} --qk-head-dim {} "
                       "--qk-pos-emb-head-dim {} --v-head-dim {} "
                       "--rope-type {} --rotary-scaling-factor {:g} "
                       "--mscale {:g} --mscale-all-dim {:g}",
                       d.kvLoraRank, d.qkHeadDim, d.qkPosEmbHeadDim, d.vHeadDim,
                       mlaRopeTypeName(rope.type), rope.rotaryScalingFactor,
                       rope.mscale, rope.mscaleAllDim);
    if (d.qkLayernorm)
      out += " --qk-layernorm";
  }
  if (has('D')) {
    out += fmt::format(" --experimental-attention-variant dsa "
                       "--dsa-indexer-n-heads {} --dsa-indexer-head-dim {} "
                       "--dsa-indexer-topk {} --dsa-indexer-loss-coeff {:g}",
                       d.dsaIndexerNHeads, d.dsaIndexerHeadDim,
                       d.dsaIndexerTopk, spec.dsaIndexerLossCoeff);
    if (spec.dsaIndexerUseSparseLoss)
      out += " --dsa-indexer-use-sparse-loss";
  }
  if (spec.pattern.hasMtp())
    out += fmt::format(" --mtp-num-layers {} --mtp-loss-scaling-factor {:g}",
                       spec.pattern.mtpDepths, spec.mtpLossScalingFactor);
  out += fmt::format(" --position-embedding-type {}", spec.positionEmbedding);
  if (d.activation == "squared_relu")
    out += " --squared-relu";
  else if (d.activation == "swiglu")
    out += " --swiglu";
  out += " --normalization RMSNorm --disable-bias-linear";
  if (!d.tieEmbeddings)
    out += " --untie-embeddings-and-output-weights";
  out += fmt::format(
      " --tokenizer-type NullTokenizer --vocab-size {} --train-iters {} "
      "--lr {:g} --min-lr {:g} --lr-decay-style {} --weight-decay {:g} "
      "--clip-grad {:g} --adam-beta1 {:g} --adam-beta2 {:g} --adam-eps {:g} "
      "--seed {}",
      spec.vocabSize, t.steps, t.lr, t.minLr, lrDecayStyleName(t.lrDecayStyle),
      t.weightDecay, t.gradClip, t.adamBeta1, t.adamBeta2, t.adamEps, t.seed);
  if (spec.vocabDivisor != 128) // Megatron-LM's default
    out += fmt::format(" --make-vocab-size-divisible-by {}", spec.vocabDivisor);
  if (t.lrWarmupFraction)
    out += fmt::format(" --lr-warmup-fraction {:g}", *t.lrWarmupFraction);
  else
    out += fmt::format(" --lr-warmup-iters {}", t.warmupSteps);
  if (t.lrDecaySteps > 0)
    out += fmt::format(" --lr-decay-iters {}", t.lrDecaySteps);
  if (t.lrDecayStyle == LrDecayStyle::Wsd)
    out += fmt::format(" --lr-wsd-decay-iters {} --lr-wsd-decay-style {}",
                       t.lrWsdDecaySteps, wsdDecayStyleName(t.lrWsdDecayStyle));
  if (t.dtype == TrainingPrecision::Bf16)
    out += " --bf16";
  if (t.calculatePerTokenLoss)
    out += " --calculate-per-token-loss";
  return out;
}

std::optional<std::string> megatronCannotRun(const PlanCandidate &c) {
  // The schedule as the spec loader parsed it, not its name compared.
  const schedule::ScheduleKind kind = c.spec.parallel.schedule;
  // One stage is no pipeline: any schedule is Megatron's no-pipelining one.
  if (kind == schedule::ScheduleKind::OneFOneB ||
      kind == schedule::ScheduleKind::Interleaved1F1B ||
      (c.layout.pp == 1 && c.layout.vpp == 1))
    return std::nullopt;
  return fmt::format(
      "Megatron-LM cannot run {}: its schedules are {} and {}",
      schedule::scheduleName(kind),
      schedule::scheduleName(schedule::ScheduleKind::OneFOneB),
      schedule::scheduleName(schedule::ScheduleKind::Interleaved1F1B));
}

std::string megatronLayoutArgs(const PlanCandidate &c) {
  const PlanLayout &l = c.layout;
  std::string out;
  if (l.tp > 1)
    out = fmt::format("--tensor-model-parallel-size {}{} ", l.tp,
                      l.sequenceParallel ? " --sequence-parallel" : "");
  if (l.ep > 1)
    out += fmt::format("--expert-model-parallel-size {} ", l.ep);
  if (l.expertTensorParallel() != l.tp)
    out += fmt::format("--expert-tensor-parallel-size {} ", l.etp);

  out += fmt::format("--pipeline-model-parallel-size {}", l.pp);
  if (l.vpp > 1)
    out += fmt::format(" --virtual-pipeline-model-parallel-size {}", l.vpp);
  out += fmt::format(" --hybrid-override-pattern '{}' --micro-batch-size {} "
                     "--global-batch-size {}",
                     c.costs.pinned, c.spec.training.microBatchSize,
                     c.globalBatch);
  if (l.distributedOptimizer)
    out += " --use-distributed-optimizer";
  if (l.vpp > 1 && c.spec.parallel.groupSize != l.pp)
    out += fmt::format(" --microbatch-group-size-per-virtual-pipeline-stage {}",
                       c.spec.parallel.groupSize);
  if (std::string flags = recomputeFlags(c.spec.training.recompute);
      !flags.empty())
    out += " " + flags;
  // The loss is the layout's (plan may choose it). Megatron's linear
  // implementation runs under its loss fusion.
  if (c.spec.crossEntropyFusionImpl == "linear")
    out += " --cross-entropy-loss-fusion --cross-entropy-fusion-impl linear";
  return out;
}

std::string megatronArgs(const PlanCandidate &c) {
  return megatronLayoutArgs(c) + " " + megatronModelArgs(c.spec);
}

Expected<std::string> plannedSpecText(const std::string &specText,
                                      const std::string &specDir,
                                      const PlanCandidate &c) {
  std::vector<std::string> lines = splitLines(specText);
  setKey(lines, "model", "pattern", "\"" + c.costs.pinned + "\"");
  setKey(lines, "training", "micro_batch_size",
         std::to_string(c.layout.microBatchSize), true);
  if (!c.spec.data.path.empty())
    setKey(lines, "data", "path", absolutePath(specDir, c.spec.data.path));
  if (!c.spec.training.initFrom.empty())
    setKey(lines, "training", "init_from",
           absolutePath(specDir, c.spec.training.initFrom));
  // Only a spec without recompute gets one (Search::searchRecompute).
  if (c.layout.recompute.full())
    setKey(lines, "training", "recompute",
           fmt::format("{{granularity: full, method: {}, num_layers: {}}}",
                       recomputeMethodName(c.layout.recompute.method),
                       c.layout.recompute.numLayers),
           true);
  // Only a spec whose loss is native gets the linear one
  // (Plan::searchedLoss).
  if (c.layout.linearCrossEntropy)
    setKey(lines, "model", "cross_entropy_fusion_impl", "linear", true);
  if (c.layout.recompute.granularity == RecomputeGranularity::Selective) {
    std::string modules;
    for (RecomputeModule m : c.layout.recompute.modules)
      modules +=
          (modules.empty() ? "" : ", ") + std::string(recomputeModuleName(m));
    setKey(lines, "training", "recompute",
           fmt::format("{{granularity: selective, modules: [{}]}}", modules),
           true);
  }
  std::vector<std::string> parallel = parallelSection(c);
  auto range = sectionLines(lines, "parallel");
  const size_t at = range ? range->first : lines.size();
  if (range)
    lines.erase(lines.begin() + range->first, lines.begin() + range->second);
  lines.insert(lines.begin() + at, parallel.begin(), parallel.end());
  std::string text = fmt::format("# hypipe plan: {}\n", layoutText(c.layout));
  for (const std::string &line : lines)
    text += line + "\n";
  auto written = parseSpec(text, specDir + "/planned.yaml");
  if (!written)
    return makeError("internal: the planned spec does not load: " +
                     llvm::toString(written.takeError()));
  if (!sameLayout(*written, c))
    return makeError("internal: the planned spec places the layers "
                     "differently from the plan (please report this)");
  return text;
}

} // namespace hypipe
