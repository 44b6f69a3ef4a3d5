//===- LayoutCommand.cpp - `hypipe layout` --------------------------------===//
#include "frontend/Diagnostic.h"
#include "tools/hypipe/Commands.h"
#include "tools/hypipe/Report.h"

#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>

#include <iostream>
#include <memory>

namespace hypipe::cli {

namespace {

struct LayoutOptions {
  std::string text;
  int64_t pp = 1;
  std::optional<int64_t> vpp;
  std::string kind = "hybrid";
  std::optional<int64_t> firstStageLayers;
  std::optional<int64_t> lastStageLayers;
  std::optional<int64_t> numLayers;
  std::optional<int64_t> mtpNumLayers;
  bool json = false;
};

int fail(const LayoutOptions &o, const Error &err) {
  printTextError(llvm::errs(), o.kind == "hybrid" ? "<pattern>" : "<layout>",
                 o.text, err);
  return 1;
}

int runHybrid(const LayoutOptions &o) {
  if (o.numLayers || o.mtpNumLayers)
    return fail(
        o,
        makeError(
            "--num-layers and --mtp-num-layers apply to --kind layout only; a "
            "hybrid pattern defines its own layer counts"));
  auto pattern = parseHybridPattern(o.text);
  if (!pattern)
    return fail(o, pattern.takeError());
  auto placement = placeHybridPattern(
      *pattern,
      PlacementOptions{o.pp, o.vpp, o.firstStageLayers, o.lastStageLayers});
  if (!placement)
    return fail(o, placement.takeError());

  if (o.json) {
    std::cout << hybridLayoutJson(*pattern, *placement).dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format(
      "pattern '{}': {} layers, {} segments, pp={} vpp={}\n", o.text,
      pattern->numLayers(), placement->stages.size(), placement->pp,
      placement->vpp);
  std::vector<std::vector<std::string>> rows{
      {"stage", "pp_rank", "vp_stage", "layers", "layer_numbers"}};
  for (const PatternStage &s : placement->stages)
    rows.push_back({std::to_string(s.index), std::to_string(s.ppRank),
                    std::to_string(s.vpStage),
                    s.layers.empty() ? "(empty)" : s.layers,
                    rangeText(s.layerNumbers)});
  printTable(rows);
  if (pattern->hasMtp())
    std::cout << fmt::format(
        "MTP: '{}' x {} depths on pp_rank {}, vp_stage {}\n", pattern->mtp,
        pattern->mtpDepths, placement->mtpOn->first, placement->mtpOn->second);
  if (!pattern->hasPipes() && placement->pp > 1)
    std::cout << fmt::format("pinned: '{}'\n",
                             patternWithStages(*pattern, *placement));
  return 0;
}

int runLayout(const LayoutOptions &o) {
  if (o.firstStageLayers || o.lastStageLayers || o.vpp)
    return fail(
        o,
        makeError("--first-stage-layers, --last-stage-layers and --vpp apply "
                  "to --kind "
                  "hybrid only; a layout string places every layer itself"));
  auto layout = parsePipelineLayout(o.text, o.pp);
  if (!layout)
    return fail(o, layout.takeError());
  int64_t numLayers = o.numLayers.value_or(layout->count('t'));
  // Megatron's mtp_num_layers defaults to None: a layout with 'm' layers
  // is refused unless the model has them (--mtp-num-layers).
  auto valid = validatePipelineLayout(*layout, numLayers, o.mtpNumLayers);
  if (!valid) {
    Problem p = valid.takeError().takeProblem();
    if (!o.mtpNumLayers && layout->count('m') > 0)
      p.help += fmt::format(" (--mtp-num-layers {}, as Megatron's "
                            "--mtp-num-layers, says the model has them)",
                            layout->count('m'));
    return fail(o, Error(std::move(p)));
  }

  if (o.json) {
    std::cout << pipelineLayoutJson(*layout, valid->mtpStandalone).dump(2)
              << "\n";
    return 0;
  }
  std::cout << fmt::format(
      "layout '{}' = '{}': {} decoder layers, {} stages, pp={} vpp={}\n",
      o.text, layout->expanded, layout->count('t'), layout->stages.size(),
      layout->pp, layout->vpp);
  std::vector<std::vector<std::string>> rows{{"stage", "pp_rank", "vp_stage",
                                              "layers", "decoder_layer_ids",
                                              "mtp_layer_ids"}};
  for (const LayoutStage &s : layout->stages)
    rows.push_back({std::to_string(s.index), std::to_string(s.ppRank),
                    std::to_string(s.vpStage),
                    s.layers.empty() ? "(empty)" : s.layers,
                    rangeText(s.decoderLayerIds), rangeText(s.mtpLayerIds)});
  printTable(rows);
  if (valid->mtpStandalone)
    std::cout << "MTP runs standalone (not on the last pipeline rank)\n";
  return 0;
}

} // namespace

void addLayoutCommand(CLI::App &app, Runner &run) {
  auto o = std::make_shared<LayoutOptions>();
  CLI::App *sub = app.add_subcommand(
      "layout",
      "Show where every layer of a hybrid pattern or a pipeline layout runs");
  sub->add_option(
         "pattern", o->text,
         "hybrid layer pattern (e.g. 'M-M*|M-M-') or, with --kind layout, a "
         "pipeline layout (e.g. 'Et*3|(tt|)*2,tL')")
      ->required();
  sub->add_option("--pp", o->pp, "pipeline-parallel size")->default_val(1);
  sub->add_option("--vpp", o->vpp,
                  "virtual stages per rank (default: segments / pp)");
  sub->add_option("--kind", o->kind, "which language the string is in")
      ->check(CLI::IsMember({"hybrid", "layout"}))
      ->default_val("hybrid");
  sub->add_option("--first-stage-layers", o->firstStageLayers,
                  "layers on the first rank (pattern without '|')");
  sub->add_option("--last-stage-layers", o->lastStageLayers,
                  "layers on the last rank (pattern without '|')");
  sub->add_option(
      "--num-layers", o->numLayers,
      "decoder layers to validate a layout against (default: its 't' count)");
  sub->add_option(
      "--mtp-num-layers", o->mtpNumLayers,
      "MTP layers to validate a layout against (default: its 'm' count)");
  sub->add_flag("--json", o->json, "print JSON (format in docs/cli.md)");
  sub->callback([o, &run] {
    run = [o] { return o->kind == "hybrid" ? runHybrid(*o) : runLayout(*o); };
  });
}

} // namespace hypipe::cli
