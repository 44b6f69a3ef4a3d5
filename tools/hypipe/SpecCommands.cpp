//===- SpecCommands.cpp - `hypipe compile` and `hypipe explain` -----------===//
#include "frontend/BuildModel.h"
#include "frontend/ParameterCount.h"
#include "frontend/Spec.h"
#include "tools/hypipe/Commands.h"
#include "tools/hypipe/Report.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>

#include <iostream>
#include <memory>

namespace hypipe::cli {

namespace {

/// Loads a spec or prints why not (the error text is already rendered).
std::optional<ModelSpec> load(const std::string &path) {
  auto spec = loadSpec(path);
  if (!spec) {
    llvm::errs() << llvm::toString(spec.takeError());
    return std::nullopt;
  }
  return std::move(*spec);
}

std::string withCommas(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}

struct CompileOptions {
  std::string spec;
  std::string emit;
  std::string output = "-";
};

int runCompile(const CompileOptions &o) {
  if (o.emit != "mlir") {
    llvm::errs()
        << "error: only --emit=mlir is available in this version; the compiled "
           "artifact comes with the CPU lowering\n"
           "help: run `hypipe compile "
        << o.spec << " --emit=mlir`\n";
    return 1;
  }
  auto spec = load(o.spec);
  if (!spec)
    return 1;
  mlir::MLIRContext context;
  auto module = buildModel(context, *spec);
  if (failed(mlir::verify(*module))) {
    llvm::errs() << "error: internal: the model built from " << o.spec
                 << " does not verify (please report this)\n";
    return 1;
  }
  std::string error;
  auto out = mlir::openOutputFile(o.output, &error);
  if (!out) {
    llvm::errs() << "error: " << error << "\n";
    return 1;
  }
  module->print(out->os());
  out->os() << "\n";
  out->keep();
  return 0;
}

struct ExplainOptions {
  std::string spec;
  bool json = false;
};

int runExplain(const ExplainOptions &o) {
  auto spec = load(o.spec);
  if (!spec)
    return 1;
  const ModelDims &dims = spec->dims;
  const PatternPlacement &placement = spec->placement;
  int64_t last = static_cast<int64_t>(placement.stages.size()) - 1;
  std::optional<int64_t> mtpStage;
  if (placement.mtpOn)
    mtpStage = placement.mtpOn->second * placement.pp + placement.mtpOn->first;

  struct StageParams {
    int64_t params = 0;
    bool approximate = false; // holds G/D/+ layers, not counted yet
  };
  std::vector<StageParams> stageParams(placement.stages.size());
  std::vector<int64_t> rankParams(placement.pp, 0);
  for (const PatternStage &s : placement.stages) {
    StageParams &p = stageParams[s.index];
    if (s.index == 0)
      p.params += embeddingParameters(dims);
    for (char symbol : s.layers) {
      if (auto n = layerParameters(symbol, dims))
        p.params += *n;
      else
        p.approximate = true;
    }
    if (s.index == last)
      p.params += headParameters(dims);
    if (mtpStage && s.index == *mtpStage) {
      for (int d = 0; d < spec->pattern.mtpDepths; ++d) {
        p.params += mtpDepthParameters(dims);
        for (char symbol : spec->pattern.mtp)
          p.params += layerParameters(symbol, dims).value_or(0);
      }
    }
    rankParams[s.ppRank] += p.params;
  }
  int64_t total = 0;
  for (int64_t n : rankParams)
    total += n;
  std::string pinned = pinnedPattern(spec->pattern, placement);

  if (o.json) {
    nlohmann::ordered_json out;
    out["spec"] = spec->file;
    out["model"] = spec->name;
    out["pattern"] = pinned;
    out["pp"] = placement.pp;
    out["vpp"] = placement.vpp;
    out["dp"] = spec->parallel.dp;
    out["schedule"] = spec->parallel.schedule;
    out["microbatches"] = spec->parallel.microbatches;
    out["parameters"] = total;
    out["stages"] = nlohmann::ordered_json::array();
    for (const PatternStage &s : placement.stages)
      out["stages"].push_back(
          {{"index", s.index},
           {"pp_rank", s.ppRank},
           {"vp_stage", s.vpStage},
           {"layers", s.layers},
           {"layer_numbers", s.layerNumbers},
           {"embedding", s.index == 0},
           {"head", s.index == last},
           {"mtp", mtpStage && s.index == *mtpStage},
           {"parameters", stageParams[s.index].params},
           {"parameters_exact", !stageParams[s.index].approximate}});
    out["ranks"] = nlohmann::ordered_json::array();
    for (int64_t r = 0; r < placement.pp; ++r)
      out["ranks"].push_back({{"pp_rank", r}, {"parameters", rankParams[r]}});
    std::cout << out.dump(2) << "\n";
    return 0;
  }

  std::cout << fmt::format("{}: model '{}', {} layers, {} parameters\n",
                           spec->file, spec->name, spec->pattern.numLayers(),
                           withCommas(total));
  std::cout << fmt::format(
      "parallel: pp={} vpp={} dp={} schedule={} microbatches={}\n",
      placement.pp, placement.vpp, spec->parallel.dp, spec->parallel.schedule,
      spec->parallel.microbatches);
  std::cout << fmt::format("pattern: {}\n\n", pinned);
  std::vector<std::vector<std::string>> rows{{"stage", "pp_rank", "vp_stage",
                                              "layers", "layer_numbers",
                                              "parameters"}};
  for (const PatternStage &s : placement.stages) {
    std::string layers = s.layers;
    if (s.index == 0)
      layers = "[emb] " + layers;
    if (s.index == last)
      layers += " [head]";
    if (mtpStage && s.index == *mtpStage)
      layers += fmt::format(" [mtp x{}]", spec->pattern.mtpDepths);
    std::string params = withCommas(stageParams[s.index].params);
    if (stageParams[s.index].approximate)
      params += " (+ G/D/+ layers, not counted)";
    rows.push_back({std::to_string(s.index), std::to_string(s.ppRank),
                    std::to_string(s.vpStage), layers,
                    rangeText(s.layerNumbers), params});
  }
  printTable(rows);
  std::cout << "\n";
  std::vector<std::vector<std::string>> rankRows{{"pp_rank", "parameters"}};
  for (int64_t r = 0; r < placement.pp; ++r)
    rankRows.push_back({std::to_string(r), withCommas(rankParams[r])});
  printTable(rankRows);
  return 0;
}

} // namespace

void addCompileCommand(CLI::App &app, Runner &run) {
  auto o = std::make_shared<CompileOptions>();
  CLI::App *sub = app.add_subcommand("compile", "Compile a model spec");
  sub->add_option("spec", o->spec, "model spec (YAML)")->required();
  sub->add_option("--emit", o->emit,
                  "what to produce: mlir (the hybrid-dialect model)")
      ->required();
  sub->add_option("-o,--output", o->output, "output file ('-' for stdout)")
      ->default_val("-");
  sub->callback([o, &run] { run = [o] { return runCompile(*o); }; });
}

void addExplainCommand(CLI::App &app, Runner &run) {
  auto o = std::make_shared<ExplainOptions>();
  CLI::App *sub =
      app.add_subcommand("explain", "Show the stage table of a spec: layers "
                                    "and parameters per stage and rank");
  sub->add_option("spec", o->spec, "model spec (YAML)")->required();
  sub->add_flag("--json", o->json, "print JSON (format in docs/cli.md)");
  sub->callback([o, &run] { run = [o] { return runExplain(*o); }; });
}

} // namespace hypipe::cli
