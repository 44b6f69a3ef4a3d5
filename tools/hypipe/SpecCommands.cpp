//===- SpecCommands.cpp - `hypipe compile` and `hypipe explain` -----------===//
#include "conversion/SpecToHybrid.h"
#include "core/data/MockSft.h"
#include "core/data/Packing.h"
#include "core/io/DirectoryLock.h"
#include "core/io/Files.h"
#include "core/model/CostModel.h"
#include "core/model/SizeBounds.h"
#include "core/schedule/Simulate.h"
#include "frontend/Spec.h"
#include "frontend/SpecCosts.h"
#include "runtime/exec/NumberFormat.h"
#include "targets/Artifact.h"
#include "tools/common/CliChecks.h"
#include "tools/hypipe/Commands.h"
#include "tools/hypipe/Report.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>

namespace hypipe::cli {

namespace {

/// Loads a spec or prints why not (the error text is already rendered).
std::optional<ModelSpec> load(const std::string &path,
                              const SpecOverrides &overrides = {}) {
  auto spec = loadSpec(path, overrides);
  if (!spec) {
    llvm::errs() << toString(spec.takeError());
    return std::nullopt;
  }
  return std::move(*spec);
}

/// The steps of a packed run explain packs as hypipe-run would.
constexpr int64_t kPackedStepsExplained = 8;

/// A packed spec on the mock dataset's lognormal lengths: the fewest and
/// the most microbatches per data-parallel rank that the packer makes of
/// the first kPackedStepsExplained steps, drawn and packed as hypipe-run
/// draws and packs them (StepBatch::loadPacked: sample p of the unbounded
/// mock stream is the step's (p mod G)-th). nullopt where the lengths are
/// not known without reading data (files, a lengths file).
std::optional<std::pair<int64_t, int64_t>>
packedMicrobatches(const ModelSpec &spec) {
  const DataSpec &ds = spec.data;
  if (!ds.packing || ds.format != DataFormat::Mock)
    return std::nullopt;
  const rt::PackingConfig pc = packingConfig(spec);
  Expected<packing::MockSftConfig> mock =
      packing::parseMockSftConfig(pc.mock, pc.maxTokens);
  if (!mock || mock->fromFile)
    return std::nullopt;
  const packing::Options options = rt::packingOptions(pc, spec.parallel.dp);
  const int64_t G = pc.globalBatchSize;
  std::pair<int64_t, int64_t> range{INT64_MAX, 0};
  std::vector<int64_t> lengths(static_cast<size_t>(G));
  for (int64_t step = 1; step <= kPackedStepsExplained; ++step) {
    for (int64_t g = 0; g < G; ++g)
      lengths[size_t(g)] = packing::mockSftPositions(
          *mock, uint64_t(spec.training.seed), (step - 1) * G + g);
    Expected<packing::Plan> plan = packing::pack(lengths, options);
    if (!plan)
      return std::nullopt; // hypipe-run says why at that step
    range.first = std::min(range.first, plan->microbatchesPerRank());
    range.second = std::max(range.second, plan->microbatchesPerRank());
  }
  return range;
}

struct CompileOptions {
  std::string spec;
  std::string emit = "artifact";
  std::string output;
  SpecOverrides overrides;
};

/// An artifact inside a run directory that a running `hypipe train` holds
/// (RUN/.lock) is that run's: replacing it would swap the program under
/// ranks that are still starting or that resume from it.
Error checkRunNotActive(const std::string &output) {
  std::filesystem::path out = std::filesystem::path(output).lexically_normal();
  if (!out.has_filename())
    out = out.parent_path();
  const std::string run =
      out.has_parent_path() ? out.parent_path().string() : ".";
  return files::checkNotLocked(
      run, "the run directory",
      fmt::format("-o '{}' would replace the artifact of that running "
                  "`hypipe train`: wait for it to end, or compile into "
                  "another directory",
                  output));
}

int runCompile(const CompileOptions &o) {
  if (o.emit != "mlir" && o.emit != "artifact" && o.emit != "kernels") {
    llvm::errs() << "error: unknown --emit value '" << o.emit
                 << "'\nhelp: use --emit=artifact (a directory hypipe-run "
                    "executes), --emit=mlir (the hybrid-dialect model) or "
                    "--emit=kernels (its stages lowered to kernel programs)\n";
    return 2; // a malformed command line (docs/cli.md)
  }
  if (o.emit == "artifact" && (o.output.empty() || o.output == "-")) {
    llvm::errs() << "error: an artifact is a directory: give it with -o\n"
                    "help: hypipe compile "
                 << o.spec << " -o out/model.hpa\n";
    return 1;
  }
  auto spec = load(o.spec, o.overrides);
  if (!spec)
    return 1;
  mlir::MLIRContext context;
  // Errors at a layer print the spec line with a caret under its symbol.
  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  context.printOpOnDiagnostic(false);
  auto module = buildModel(context, *spec);
  if (failed(mlir::verify(*module))) {
    llvm::errs() << "error: internal: the model built from " << o.spec
                 << " does not verify (please report this)\n";
    return 1;
  }
  if (o.emit == "artifact" && !spec->unrunnable.empty()) {
    llvm::errs() << spec->unrunnable;
    return 1;
  }
  if (o.emit == "artifact") {
    if (auto err = checkRunNotActive(o.output)) {
      llvm::errs() << "error: " << toString(err) << "\n";
      return 1;
    }
    if (auto err = writeArtifact(*module, *spec, o.output)) {
      llvm::errs() << toString(std::move(err)) << "\n";
      return 1;
    }
    const ParallelSpec &par = spec->parallel;
    const std::string tensorParallel =
        par.tp > 1
            ? fmt::format("{} tensor-parallel{} x ", par.tp,
                          par.sequenceParallel ? " (sequence parallel)" : "")
            : "";
    llvm::outs() << "wrote " << o.output << " (" << tensorParallel << par.pp
                 << " pipeline ranks x " << par.dp << " data-parallel, "
                 << schedule::scheduleName(par.schedule) << ")\n";
    return 0;
  }
  if (o.emit == "kernels" && failed(lowerSpecModel(*module, *spec))) {
    llvm::errs()
        << "error: lowering failed (the diagnostics above say where)\n";
    return 1;
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os);
  os << "\n";
  if (o.output.empty() || o.output == "-") {
    llvm::outs() << text;
    return 0;
  }
  if (auto err = files::checkNotAnInput(o.output, "-o", {spec->file})) {
    llvm::errs() << "error: " << toString(err) << "\n";
    return 1;
  }
  if (auto err = files::writeAtomically(o.output, "-o", text)) {
    llvm::errs() << "error: " << toString(err) << "\n";
    return 1;
  }
  return 0;
}

struct ExplainOptions {
  std::string spec;
  bool json = false;
  SpecOverrides overrides;
  std::string costs; ///< --costs FILE: measured layer costs
  ClusterOptions cluster;
};

std::string gflop(int64_t flops) { return fmt::format("{:.4g}", flops / 1e9); }
std::string mib(int64_t bytes) {
  return fmt::format("{:.4g}", bytes / (1024.0 * 1024.0));
}

/// What `hypipe explain` reports of a spec: each stage's costs, each rank's
/// parameters and memory, and the schedule simulated with those costs.
struct Explanation {
  const ModelSpec &spec;
  const PatternPlacement &placement;
  SpecCosts costs;
  int64_t last = 0; ///< the last stage's index
  schedule::Simulation simulation;
  /// --costs: the file, and the simulation is in seconds.
  std::string costsFile;
  /// --device: the simulation is in seconds with communication.
  std::optional<Cluster> cluster;
  /// With a device: the share of the step communication adds.
  double communication = 0;

  bool inSeconds() const { return !costsFile.empty() || cluster; }
};

Expected<Explanation> explain(const ModelSpec &spec,
                              const std::string &costsFile,
                              std::optional<Cluster> cluster) {
  Explanation e{spec, spec.placement, specCosts(spec)};
  e.last = static_cast<int64_t>(spec.placement.stages.size()) - 1;
  std::optional<MeasuredCosts> measured;
  if (!costsFile.empty()) {
    Expected<MeasuredCosts> read = readMeasuredCosts(costsFile);
    if (!read)
      return read.takeError();
    measured = std::move(*read);
    e.costsFile = costsFile;
  }
  e.cluster = std::move(cluster);
  // The link the measured run's ranks talked over, unless --device names
  // a row.
  if (!e.cluster && measured && measured->link)
    e.cluster = measuredCluster(*measured->link);
  Expected<schedule::Costs> costs = stepCosts(
      spec, e.costs.stageCost,
      {measured ? &*measured : nullptr, e.cluster ? &*e.cluster : nullptr});
  if (!costs)
    return costs.takeError();
  auto simulation = simulateSpec(spec, *costs);
  if (!simulation)
    return simulation.takeError();
  e.simulation = std::move(*simulation);
  e.communication = communicationShare(spec, *costs, e.simulation.makespan);
  return e;
}

void printExplanationJson(
    const Explanation &e,
    std::optional<std::pair<int64_t, int64_t>> packed = std::nullopt) {
  nlohmann::ordered_json out;
  out["spec"] = e.spec.file;
  out["model"] = e.spec.name;
  out["pattern"] = e.costs.pinned;
  out["auto_partitioned"] = e.spec.autoPartitioned;
  out["tp"] = e.spec.parallel.tp;
  out["sequence_parallel"] = e.spec.parallel.sequenceParallel;
  out["pp"] = e.placement.pp;
  out["vpp"] = e.placement.vpp;
  out["dp"] = e.spec.parallel.dp;
  out["distributed_optimizer"] = e.spec.parallel.distributedOptimizer;
  out["schedule"] = schedule::scheduleName(e.spec.parallel.schedule);
  if (!e.spec.parallel.scheduleCsv.empty())
    out["schedule_csv"] = e.spec.parallel.scheduleCsv;
  out["microbatches"] = e.spec.parallel.microbatches;
  // Packed on the mock dataset: the packer's fewest and most per rank of
  // the first steps (microbatches is the most).
  if (packed)
    out["packed_microbatches"] = {packed->first, packed->second};
  out["recompute"] = recomputeJson(e.spec.training.recompute);
  out["parameters"] = e.costs.totalParams;
  out["costs_exact"] = e.costs.exact;
  out["stages"] = nlohmann::ordered_json::array();
  for (const PatternStage &s : e.placement.stages) {
    const ItemCost &c = e.costs.stageCost[s.index];
    out["stages"].push_back({{"index", s.index},
                             {"pp_rank", s.ppRank},
                             {"vp_stage", s.vpStage},
                             {"layers", s.layers},
                             {"layer_numbers", s.layerNumbers},
                             {"embedding", s.index == 0},
                             {"head", s.index == e.last},
                             {"parameters", c.params},
                             {"forward_flops", c.forwardFlops},
                             {"backward_input_flops", c.backwardInputFlops},
                             {"backward_weight_flops", c.backwardWeightFlops},
                             {"activation_bytes", c.activationBytes},
                             {"send_bytes", c.sendBytes}});
    // hypipe-run's buffers of the stage, as training.recompute leaves them.
    if (e.costs.runtime) {
      const schedule::StageBuffers &b = e.costs.runtime->stages[s.index];
      const schedule::RankBuffers &peak = e.costs.runtime->peaks[s.ppRank];
      out["stages"].back()["runtime_buffers"] = {
          {"saved_bytes", 4 * b.savedFloats},
          {"saved_slots",
           peak.savedSlots.count(s.index) ? peak.savedSlots.at(s.index) : 0},
          {"recompute_bytes", 4 * b.recomputeFloats},
          {"recompute_buffers", b.recomputeFloats == 0 ? 0
                                : peak.recomputeSlots.count(s.index)
                                    ? peak.recomputeSlots.at(s.index)
                                    : 0},
          {"workspace_bytes", 4 * b.workspaceFloats}};
      // bf16: the other microbatches' packed copies (SavedBuffers.h).
      if (b.stashFloats > 0)
        out["stages"].back()["runtime_buffers"]["packed_saved_bytes"] =
            4 * b.stashFloats;
    }
  }
  out["ranks"] = nlohmann::ordered_json::array();
  for (int64_t r = 0; r < e.placement.pp; ++r)
    out["ranks"].push_back(
        {{"pp_rank", r},
         {"parameters", e.costs.rankParams[r]},
         {"microbatches_in_flight",
          peakMicrobatchesInFlight(e.costs.request.schedule, e.costs.request.pp,
                                   e.costs.request.vpp,
                                   e.costs.request.microbatches, r)},
         {"memory_bytes", e.costs.rankMemory[r]},
         // hypipe-run's own buffers (SpecCosts.h runtimeBuffers): null where
         // a layer kind has no kernel.
         {"runtime_memory_bytes",
          e.costs.rankRuntimeMemory.empty()
              ? nlohmann::json(nullptr)
              : nlohmann::json(e.costs.rankRuntimeMemory[r])}});
  out["simulation"] = {
      {"time_unit", e.inSeconds() ? "seconds" : "GFLOP of one rank"},
      {"makespan", e.simulation.makespan},
      {"bubble_fraction", e.simulation.bubbleFraction},
      {"peak_activations", e.simulation.peakActivations},
      {"peak_activation_bytes", e.simulation.peakActivationBytes}};
  if (e.cluster) {
    const DeviceRates &d = e.cluster->device;
    // A link a run measured has no rate of its own (the compute is the
    // measured layers') and no node size.
    const bool measuredLink = d.name == "measured";
    out["simulation"]["device"] = {
        {"name", d.name},
        {"flops_per_s",
         measuredLink ? nlohmann::json(nullptr)
                      : nlohmann::json(e.cluster->flopsPerSecond(
                            e.spec.training.dtype == TrainingPrecision::Bf16))},
        {"ranks_per_node",
         measuredLink ? nlohmann::json(nullptr) : nlohmann::json(d.perNode)},
        {"intra_node",
         {{"bytes_per_s", d.intraNode.bytesPerSecond},
          {"latency_s", d.intraNode.latencySeconds}}},
        {"inter_node",
         {{"bytes_per_s", d.interNode.bytesPerSecond},
          {"latency_s", d.interNode.latencySeconds}}}};
    out["simulation"]["communication"] = e.communication;
    out["simulation"]["exposed_reduction_s"] = e.simulation.exposedReduction;
  }
  if (e.inSeconds()) {
    if (!e.costsFile.empty())
      out["simulation"]["costs"] = e.costsFile;
    out["simulation"]["predicted_step_s"] = e.simulation.makespan;
    out["simulation"]["predicted_tokens_per_s"] =
        stepTokens(e.spec) / e.simulation.makespan;
  }
  std::cout << out.dump(2) << "\n";
}

/// The model, its layout and its pattern: the lines above the tables.
void printModelLines(const Explanation &e) {
  std::cout << fmt::format("{}: model '{}', {} layers, {} parameters\n",
                           e.spec.file, e.spec.name, e.spec.pattern.numLayers(),
                           withCommas(e.costs.totalParams));
  const ParallelSpec &par = e.spec.parallel;
  std::cout << fmt::format(
      "parallel: {}pp={} vpp={} dp={}{} schedule={} microbatches={}; "
      "per microbatch: {} tokens, {}\n",
      (par.tp > 1
           ? fmt::format("tp={}{} ", par.tp,
                         par.sequenceParallel ? " sequence_parallel" : "")
           : "") +
          (par.expertParallel()
               ? fmt::format("ep={} etp={} (expert data parallel {}) ", par.ep,
                             par.etp, par.expertDataParallel())
               : ""),
      e.placement.pp, e.placement.vpp, e.spec.parallel.dp,
      e.spec.parallel.distributedOptimizer
          ? fmt::format(" (optimizer state sharded {} ways)",
                        e.costs.request.settings.optimizerShards)
          : "",
      e.spec.parallel.scheduleCsv.empty()
          ? schedule::scheduleName(e.spec.parallel.schedule)
          : fmt::format("{} (programs from {})",
                        schedule::scheduleName(e.spec.parallel.schedule),
                        e.spec.parallel.scheduleCsv),
      e.spec.parallel.microbatches, e.costs.request.settings.tokens(),
      precisionName(e.spec.training.dtype));
  if (par.tp > 1)
    std::cout << fmt::format(
        "tensor parallel: each figure below is one of the {} ranks of a "
        "layer's tensor-parallel group (its shard{})\n",
        par.tp,
        par.sequenceParallel ? "; the residual stream and stage boundaries "
                               "a tp-th of the tokens"
                             : "");
  if (e.spec.training.recompute.granularity != RecomputeGranularity::None)
    std::cout << fmt::format("recompute: {}\n",
                             recomputeFlags(e.spec.training.recompute));
  if (const int64_t rows =
          e.spec.lossChunkRows(e.costs.request.settings.tokens()))
    std::cout << fmt::format(
        "loss: linear cross-entropy, {} tokens a chunk (never kept: the "
        "input gradient makes the logits again and takes both gradients "
        "from them)\n",
        rows);
  std::cout << fmt::format(
      "pattern: {}{}\n\n", e.costs.pinned,
      e.spec.autoPartitioned
          ? fmt::format("   (balanced by {}; pin it to keep it)",
                        objectiveName(e.spec.parallel.objective))
          : "");
}

/// What activation recompute keeps in hypipe-run: per stage, one
/// microbatch's saved tensors (the layers not recomputed and the chunks'
/// checkpoints) and the most of them held, one recompute buffer (the
/// recomputed layers') and the most of them held; per rank, the peak.
void printRecomputeBuffers(const Explanation &e) {
  const RuntimeBuffers &rt = *e.costs.runtime;
  auto mibOf = [](int64_t floats) {
    return fmt::format("{:.2f}", 4.0 * double(floats) / double(1 << 20));
  };
  auto most = [](const std::map<int64_t, int64_t> &slots, int64_t stage) {
    auto it = slots.find(stage);
    return it == slots.end() ? int64_t(0) : it->second;
  };
  std::cout << "\nhypipe-run's buffers with recompute (per microbatch; "
               "held: the most at once):\n";
  std::vector<std::vector<std::string>> rows{
      {"stage", "pp_rank", "saved_MiB", "saved_held", "recompute_MiB",
       "recompute_held", "workspace_MiB"}};
  for (const PatternStage &s : e.placement.stages) {
    const schedule::StageBuffers &b = rt.stages[s.index];
    const schedule::RankBuffers &peak = rt.peaks[s.ppRank];
    rows.push_back(
        {std::to_string(s.index), std::to_string(s.ppRank),
         mibOf(b.savedFloats), std::to_string(most(peak.savedSlots, s.index)),
         mibOf(b.recomputeFloats),
         std::to_string(
             b.recomputeFloats == 0 ? 0 : most(peak.recomputeSlots, s.index)),
         mibOf(b.workspaceFloats)});
  }
  printTable(rows);
  std::cout << "\n";
  std::vector<std::vector<std::string>> rankRows{{"pp_rank", "runtime_MiB"}};
  for (int64_t r = 0; r < e.placement.pp; ++r)
    rankRows.push_back({std::to_string(r), mibOf(rt.bytes[size_t(r)] / 4)});
  printTable(rankRows);
}

/// One row per stage: its layers, parameters, FLOPs and transfers; then
/// one per rank: parameters, microbatches in flight, memory.
void printStageTables(const Explanation &e) {
  std::vector<std::vector<std::string>> rows{
      {"stage", "pp_rank", "vp_stage", "layers", "layer_numbers", "parameters",
       "fwd_GFLOP", "bwd_I_GFLOP", "bwd_W_GFLOP", "act_MiB", "send_MiB"}};
  for (const PatternStage &s : e.placement.stages) {
    const ItemCost &c = e.costs.stageCost[s.index];
    std::string layers = s.layers;
    if (s.index == 0)
      layers = "[emb] " + layers;
    if (s.index == e.last)
      layers += e.spec.pattern.hasMtp()
                    ? fmt::format(" [head, mtp x{}]", e.spec.pattern.mtpDepths)
                    : std::string(" [head]");
    rows.push_back({std::to_string(s.index), std::to_string(s.ppRank),
                    std::to_string(s.vpStage), layers,
                    rangeText(s.layerNumbers), withCommas(c.params),
                    gflop(c.forwardFlops), gflop(c.backwardInputFlops),
                    gflop(c.backwardWeightFlops), mib(c.activationBytes),
                    mib(c.sendBytes)});
  }
  printTable(rows);
  std::cout << "\n";
  std::vector<std::vector<std::string>> rankRows{
      {"pp_rank", "parameters", "microbatches_in_flight", "memory_GiB"}};
  for (int64_t r = 0; r < e.placement.pp; ++r)
    rankRows.push_back(
        {std::to_string(r), withCommas(e.costs.rankParams[r]),
         fmt::format("{:.2f}",
                     peakMicrobatchesInFlight(
                         e.costs.request.schedule, e.costs.request.pp,
                         e.costs.request.vpp, e.costs.request.microbatches, r)),
         gib(e.costs.rankMemory[r])});
  printTable(rankRows);
  if (e.spec.training.recompute.granularity != RecomputeGranularity::None &&
      e.costs.runtime)
    printRecomputeBuffers(e);
}

/// What the simulation of the schedule predicts, and per rank.
void printSimulation(const Explanation &e) {
  double worst = *std::max_element(e.simulation.bubbleFraction.begin(),
                                   e.simulation.bubbleFraction.end());
  if (e.cluster && e.cluster->device.name == "measured") {
    const Link &l = e.cluster->device.intraNode;
    std::cout << fmt::format(
        "\nschedule {} simulated with the measured costs of {} (transfers "
        "and gradient reductions on the link that run measured, {:.4g} GB/s "
        "+ {:.3g} us): step {:.4g} s, {} tokens/s predicted, bubble {:.1f}% "
        "on the worst rank, of which communication adds {:.1f}% of the "
        "step\n",
        schedule::scheduleName(e.spec.parallel.schedule), e.costsFile,
        l.bytesPerSecond / 1e9, l.latencySeconds * 1e6, e.simulation.makespan,
        withCommas(std::llround(stepTokens(e.spec) / e.simulation.makespan)),
        100 * worst, 100 * e.communication);
  } else if (e.cluster) {
    const DeviceRates &d = e.cluster->device;
    std::cout << fmt::format(
        "\nschedule {} simulated on {} {} ({} a node; compute {}, "
        "{}transfers and gradient reductions on the links): step {:.4g} s, {} "
        "tokens/s predicted, bubble {:.1f}% on the worst rank, of which "
        "communication adds {:.1f}% of the step\n",
        schedule::scheduleName(e.spec.parallel.schedule),
        e.spec.parallel.tp * e.placement.pp * e.spec.parallel.dp,
        d.name + (d.gpu ? " GPUs" : " ranks"), d.perNode,
        e.costsFile.empty()
            ? fmt::format("at {:.0f}% of its peak", 100 * d.achieved)
            : fmt::format("measured in {}", e.costsFile),
        e.spec.parallel.tp > 1 ? "tensor-parallel collectives, " : "",
        e.simulation.makespan,
        withCommas(std::llround(stepTokens(e.spec) / e.simulation.makespan)),
        100 * worst, 100 * e.communication);
  } else if (e.costsFile.empty())
    std::cout << fmt::format(
        "\nschedule {} simulated with these FLOPs (1 GFLOP = 1 time unit, "
        "transfers free): makespan {:.4g}, bubble {:.1f}% on the worst "
        "rank\n",
        schedule::scheduleName(e.spec.parallel.schedule), e.simulation.makespan,
        100 * worst);
  else
    std::cout << fmt::format(
        "\nschedule {} simulated with the measured costs of {} (transfers "
        "free): step {:.4g} s, {} tokens/s predicted, bubble {:.1f}% on the "
        "worst rank\n",
        schedule::scheduleName(e.spec.parallel.schedule), e.costsFile,
        e.simulation.makespan,
        withCommas(std::llround(stepTokens(e.spec) / e.simulation.makespan)),
        100 * worst);
  std::vector<std::string> simHeader{"pp_rank", "bubble", "peak_activations",
                                     "peak_activation_MiB"};
  if (e.cluster)
    simHeader.push_back("exposed_reduction_s");
  std::vector<std::vector<std::string>> simRows{simHeader};
  for (int64_t r = 0; r < e.placement.pp; ++r) {
    simRows.push_back(
        {std::to_string(r),
         fmt::format("{:.1f}%", 100 * e.simulation.bubbleFraction[r]),
         std::to_string(e.simulation.peakActivations[r]),
         mib(static_cast<int64_t>(e.simulation.peakActivationBytes[r]))});
    if (e.cluster)
      simRows.back().push_back(
          fmt::format("{:.4g}", e.simulation.exposedReduction[r]));
  }
  printTable(simRows);
  if (!e.costs.exact)
    std::cout << "note: some layers are not in the cost model; their costs "
                 "are counted as zero\n";
}

void printExplanation(const Explanation &e) {
  printModelLines(e);
  printStageTables(e);
  printSimulation(e);
}

int runExplain(const ExplainOptions &o) {
  Expected<std::optional<Cluster>> cluster = clusterOf(o.cluster);
  if (!cluster) {
    Problem p = cluster.takeError().takeProblem();
    llvm::errs() << "error: " << p.message << "\nhelp: " << p.help << "\n";
    return 1;
  }
  auto spec = load(o.spec, o.overrides);
  if (!spec)
    return 1;
  // A packed step's microbatches are the packer's: on the mock dataset
  // they are known, and the step is explained with the most of them.
  std::optional<std::pair<int64_t, int64_t>> packed = packedMicrobatches(*spec);
  if (packed && packed->second != spec->parallel.microbatches) {
    SpecOverrides overrides = o.overrides;
    overrides.microbatches = packed->second;
    spec = load(o.spec, overrides);
    if (!spec)
      return 1;
  }
  Expected<Explanation> e = explain(*spec, o.costs, std::move(*cluster));
  if (!e) {
    llvm::errs() << "error: " << toString(e.takeError()) << "\n";
    return 1;
  }
  if (o.json) {
    printExplanationJson(*e, packed);
  } else {
    if (packed)
      fmt::print("packing: the packer makes {} to {} microbatches per "
                 "data-parallel rank of the first {} steps of the mock data "
                 "(as hypipe-run draws and packs them); explained with the "
                 "most, {}\n",
                 packed->first, packed->second, kPackedStepsExplained,
                 packed->second);
    printExplanation(*e);
  }
  return 0;
}

struct PartitionOptions {
  std::string spec;
  std::optional<int64_t> pp, vpp;
  std::optional<std::string> objective;
  std::optional<double> maxMemoryGiB;
  bool json = false;
};

int runPartition(const PartitionOptions &o) {
  auto spec = load(o.spec);
  if (!spec)
    return 1;
  AutoPartitionRequest request = spec->partitionRequest();
  request.pp = o.pp.value_or(request.pp);
  request.vpp = o.vpp.value_or(request.vpp);
  if (o.objective)
    request.objective = *parseObjective(*o.objective); // checked by CLI11
  if (o.maxMemoryGiB)
    request.maxMemoryGiB = o.maxMemoryGiB;
  if (request.pp < 1 || request.vpp < 1) {
    llvm::errs() << "error: --pp and --vpp must be at least 1\n";
    return 1;
  }
  RunSizes sizes;
  sizes.pp = request.pp;
  sizes.vpp = request.vpp;
  if (std::optional<SizeProblem> problem = checkRunSizes(sizes)) {
    llvm::errs() << "error: " << problem->message << "\nhelp: " << problem->help
                 << "\n";
    return 1;
  }
  auto result = autoPartition(request);
  if (!result) {
    std::string message = toString(result.takeError());
    auto [first, help] = llvm::StringRef(message).split("; ");
    llvm::errs() << "error: " << first << "\n";
    if (!help.empty())
      llvm::errs() << "help: " << help << "\n";
    return 1;
  }
  if (o.json) {
    nlohmann::ordered_json out;
    out["objective"] = objectiveName(request.objective);
    out["pp"] = request.pp;
    out["vpp"] = request.vpp;
    out["items"] = nlohmann::ordered_json::array();
    for (size_t i = 0; i < result->items.size(); ++i)
      out["items"].push_back(
          {{"name", result->items[i].name}, {"cost", result->costs[i]}});
    out["segments"] = result->partition.segmentSizes;
    out["max_segment_cost"] = result->partition.maxSegmentCost;
    out["pattern"] = result->pattern;
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format(
      "{} items (embedding, {} layers, head) into {} segments (pp={} "
      "vpp={}), objective {}\n",
      result->items.size(), request.layers.size(), request.pp * request.vpp,
      request.pp, request.vpp, objectiveName(request.objective));
  std::vector<std::vector<std::string>> rows{
      {"segment", "pp_rank", "vp_stage", "items", "cost"}};
  size_t item = 0;
  for (size_t s = 0; s < result->partition.segmentSizes.size(); ++s) {
    int64_t cost = 0;
    std::string names;
    for (int64_t j = 0; j < result->partition.segmentSizes[s]; ++j, ++item) {
      cost += result->costs[item];
      names += result->items[item].name.size() == 1
                   ? result->items[item].name
                   : "[" + result->items[item].name + "]";
    }
    rows.push_back({std::to_string(s), std::to_string(s % request.pp),
                    std::to_string(s / request.pp),
                    names.empty() ? "(empty)" : names, withCommas(cost)});
  }
  printTable(rows);
  std::cout << fmt::format("max segment cost: {}\npattern: {}\n",
                           withCommas(result->partition.maxSegmentCost),
                           result->pattern);
  return 0;
}

} // namespace

void addPartitionCommand(CLI::App &app, Runner &run) {
  auto o = std::make_shared<PartitionOptions>();
  CLI::App *sub = app.add_subcommand(
      "partition",
      "Balance a pattern's layers over pp * vpp stages with the cost model");
  sub->add_option("spec", o->spec, "model spec (YAML)")->required();
  sub->add_option("--pp", o->pp,
                  "pipeline-parallel size (default: the spec's)");
  sub->add_option("--vpp", o->vpp,
                  "virtual stages per rank (default: the spec's)");
  sub->add_option("--objective", o->objective,
                  "what to balance: time (FLOPs) or params")
      ->check(CLI::IsMember({"time", "params"}));
  sub->add_option("--max-memory-gib", o->maxMemoryGiB,
                  "memory cap per rank in GiB")
      ->check(numberBetween(0, false, double(kMaxRankBytes >> 30)));
  sub->add_flag("--json", o->json, "print JSON (format in docs/cli.md)");
  sub->callback([o, &run] { run = [o] { return runPartition(*o); }; });
}

void addOverrideOptions(CLI::App *sub, SpecOverrides &o) {
  auto opt = [&](const char *name, std::optional<int64_t> &slot,
                 const char *what) {
    sub->add_option_function<int64_t>(
           name, [&slot](const int64_t &v) { slot = v; }, what)
        ->check(wholeNumber()); // the spec loader says each one's range
  };
  // Megatron-LM's names are aliases where they mean the same
  // (tools/common/CliErrors.h says what the others mean instead).
  opt("--pp,--pipeline-model-parallel-size", o.pp,
      "pipeline-parallel size (instead of the spec's)");
  opt("--vpp,--virtual-pipeline-model-parallel-size", o.vpp,
      "virtual stages per rank (Megatron's "
      "--num-layers-per-virtual-pipeline-stage is another thing: layers per "
      "virtual stage)");
  opt("--dp", o.dp, "data-parallel size");
  opt("--tp,--tensor-model-parallel-size", o.tp,
      "tensor-parallel size: each layer split over tp ranks (instead of "
      "parallel.tp)");
  opt("--make-vocab-size-divisible-by", o.makeVocabSizeDivisibleBy,
      "pad the vocabulary to a multiple of this x tp "
      "(model.make_vocab_size_divisible_by; default 128, Megatron-LM's)");
  // Megatron-LM's store_true flags: present, each sets its key; like
  // argparse's, they take no other value (--bf16=false is refused, not read
  // as --bf16; CLI11 lets --bf16=true through, which means --bf16).
  auto flag = [&](const char *name, std::function<void()> set,
                  const char *what) {
    sub->add_flag_callback(name, std::move(set), what)->disable_flag_override();
  };
  flag(
      "--sequence-parallel", [&o] { o.sequenceParallel = true; },
      "Megatron-LM's sequence parallelism over the tensor-parallel ranks "
      "(parallel.sequence_parallel; tp > 1)");
  opt("--ep,--expert-model-parallel-size", o.ep,
      "expert-parallel size: each MoE layer's experts spread over ep ranks "
      "(parallel.ep)");
  opt("--etp,--expert-tensor-parallel-size", o.etp,
      "expert tensor-parallel size: each expert's width split over etp "
      "ranks (parallel.etp; default tp)");
  sub->add_option_function<std::string>(
      "--moe-token-dispatcher-type",
      [&o](const std::string &v) { o.moeTokenDispatcher = v; },
      "how tokens reach experts on other ranks: allgather (Megatron-LM's "
      "default) or alltoall (model.moe_token_dispatcher_type)");
  opt("--microbatches", o.microbatches, "microbatches per step");
  opt("--global-batch-size", o.globalBatchSize,
      "samples per step: micro_batch_size x dp x microbatches (Megatron's; "
      "sets the microbatches), or with packing data.global_batch_size");
  opt("--micro-batch-size", o.microBatchSize,
      "samples per microbatch (training.micro_batch_size)");
  opt("--steps,--train-iters", o.steps, "training steps");
  opt("--seed", o.seed, "seed of the initial weights and of the data order");
  auto real = [&](const char *name, std::optional<double> &slot,
                  const char *what) {
    sub->add_option_function<double>(
           name, [&slot](const double &v) { slot = v; }, what)
        ->check(finiteNumber());
  };
  // Megatron-LM's learning-rate and AdamW flags: training's keys (the
  // loader checks them, and an error names the flag).
  real("--lr", o.lr, "peak learning rate (training.lr)");
  real("--min-lr", o.minLr,
       "learning rate the decay ends at (training.min_lr)");
  auto word = [&](const char *name, std::optional<std::string> &slot,
                  const char *what) {
    sub->add_option_function<std::string>(
        name, [&slot](const std::string &v) { slot = v; }, what);
  };
  // Megatron-LM's token dropping (model.moe_expert_capacity_factor ...).
  real("--moe-expert-capacity-factor", o.moeExpertCapacityFactor,
       "each expert takes at most this times its even share of the tokens; "
       "the rest of its tokens are dropped (default: dropless)");
  word("--moe-token-drop-policy", o.moeTokenDropPolicy,
       "which tokens an expert over capacity keeps: probs (the "
       "highest-weighted; default) or position (the earliest)");
  flag(
      "--moe-pad-expert-input-to-capacity",
      [&o] { o.moePadExpertInputToCapacity = true; },
      "Megatron-LM's padding of each expert's rows to its capacity (the "
      "same result: hypipe runs the unpadded rows)");
  word("--cross-entropy-fusion-impl", o.crossEntropyFusionImpl,
       "native (a microbatch's logits kept for the backward; default) or "
       "linear (the output layer and the loss fused over chunks of tokens, "
       "the logits made again) (model.cross_entropy_fusion_impl)");
  opt("--cross-entropy-chunk-tokens", o.crossEntropyChunkTokens,
      "linear: tokens a chunk of the loss takes (model."
      "cross_entropy_chunk_tokens; default: its logits about the size of "
      "the head's input, at least 256 tokens)");
  word("--lr-decay-style", o.lrDecayStyle,
       "constant, linear, cosine, inverse-square-root or WSD "
       "(training.lr_decay_style; default cosine)");
  opt("--lr-warmup-iters", o.lrWarmupIters,
      "steps of linear warm-up from 0 (training.warmup_steps)");
  real("--lr-warmup-fraction", o.lrWarmupFraction,
       "warm up over this fraction of the decay steps instead "
       "(training.lr_warmup_fraction)");
  opt("--lr-wsd-decay-iters", o.lrWsdDecayIters,
      "WSD: the last steps of the decay, over which lr falls to min_lr "
      "(training.lr_wsd_decay_iters)");
  word("--lr-wsd-decay-style", o.lrWsdDecayStyle,
       "WSD's final decay: exponential, linear, cosine or minus_sqrt "
       "(training.lr_wsd_decay_style; default exponential)");
  real("--weight-decay", o.weightDecay,
       "AdamW's decoupled weight decay (training.weight_decay)");
  real("--clip-grad", o.clipGrad,
       "clip gradients to this global norm; 0: no clipping "
       "(training.grad_clip)");
  real("--adam-beta1", o.adamBeta1, "AdamW's beta1 (training.adam_beta1)");
  real("--adam-beta2", o.adamBeta2, "AdamW's beta2 (training.adam_beta2)");
  real("--adam-eps", o.adamEps, "AdamW's epsilon (training.adam_eps)");
  flag(
      "--bf16", [&o] { o.dtype = "bf16"; },
      "train in bf16: Megatron's --bf16, the same as --dtype bf16");
  sub->add_option_function<std::string>(
      "--schedule", [&o](const std::string &v) { o.schedule = v; },
      "pipeline schedule");
  sub->add_option_function<std::string>(
      "--target", [&o](const std::string &v) { o.target = v; },
      "what the stages are compiled for: cpu or cuda (instead of "
      "training.target)");
  sub->add_option_function<std::string>(
      "--dtype", [&o](const std::string &v) { o.dtype = v; },
      "fp32 or bf16: the precision the model trains in (instead of "
      "training.dtype; explain sizes memory and transfers by it, compile and "
      "train take either: docs/precision.md)");
  sub->add_option_function<std::string>(
      "--split", [&o](const std::string &v) { o.split = v; },
      "train, validation and test weights over the data's documents, e.g. "
      "969,30,1 (Megatron-LM's --split; data.split)");
  sub->add_option_function<std::string>(
      "--schedule-csv", [&o](const std::string &v) { o.scheduleCsv = v; },
      "run the programs of this torch.distributed.pipelining CSV instead of "
      "the generated order (parallel.schedule_csv)");
  flag(
      "--distributed-optimizer,--use-distributed-optimizer",
      [&o] { o.distributedOptimizer = true; },
      "shard the AdamW state over the data-parallel ranks (Megatron's "
      "--use-distributed-optimizer; parallel.distributed_optimizer)");
  // Megatron-LM's activation recompute flags: training.recompute's keys
  // (the loader checks them, and an error names the flag).
  sub->add_option_function<std::string>(
      "--recompute-granularity",
      [&o](const std::string &v) { o.recomputeGranularity = v; },
      "full or selective: activation recompute "
      "(training.recompute.granularity)");
  sub->add_option_function<std::string>(
      "--recompute-method",
      [&o](const std::string &v) { o.recomputeMethod = v; },
      "uniform or block: which layers full recompute recomputes "
      "(training.recompute.method)");
  opt("--recompute-num-layers", o.recomputeNumLayers,
      "full recompute: the layers of a chunk (uniform) or of each stage "
      "recomputed (block) (training.recompute.num_layers)");
  sub->add_option_function<std::vector<std::string>>(
      "--recompute-modules",
      [&o](const std::vector<std::string> &v) { o.recomputeModules = v; },
      "selective recompute's modules, space-separated: core_attn mlp ... "
      "(training.recompute.modules)");
  // Megatron's older spelling: its arguments.py turns it into selective.
  flag(
      "--recompute-activations", [&o] { o.recomputeGranularity = "selective"; },
      "selective recompute (Megatron's --recompute-activations: "
      "--recompute-granularity selective)");
}

void addCompileCommand(CLI::App &app, Runner &run) {
  auto o = std::make_shared<CompileOptions>();
  CLI::App *sub = app.add_subcommand("compile", "Compile a model spec");
  sub->add_option("spec", o->spec, "model spec (YAML)")->required();
  sub->add_option("--emit", o->emit,
                  "what to produce: artifact (a directory for hypipe-run), "
                  "mlir (the hybrid-dialect model) or kernels (the model "
                  "lowered: stages, schedule programs, kernel programs)")
      ->default_val("artifact");
  sub->add_option("-o,--output", o->output,
                  "artifact directory, or MLIR file ('-' for stdout)");
  addOverrideOptions(sub, o->overrides);
  sub->callback([o, &run] { run = [o] { return runCompile(*o); }; });
}

void addExplainCommand(CLI::App &app, Runner &run) {
  auto o = std::make_shared<ExplainOptions>();
  CLI::App *sub =
      app.add_subcommand("explain", "Show the stage table of a spec: layers "
                                    "and parameters per stage and rank");
  sub->add_option("spec", o->spec, "model spec (YAML)")->required();
  sub->add_flag("--json", o->json, "print JSON (format in docs/cli.md)");
  sub->add_option("--costs", o->costs,
                  "simulate in seconds with the layer costs a run measured "
                  "(hypipe train SPEC --costs-out FILE): the predicted step "
                  "and tokens/s");
  addClusterOptions(sub, o->cluster);
  addOverrideOptions(sub, o->overrides);
  sub->callback([o, &run] { run = [o] { return runExplain(*o); }; });
}

} // namespace hypipe::cli
