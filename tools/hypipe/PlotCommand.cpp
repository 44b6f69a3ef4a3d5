//===- PlotCommand.cpp - hypipe plot: several runs in one picture ---------===//
//
// `hypipe plot RUN... -o FILE.svg` overlays the loss, learning rate and
// gradient norm of several runs (run directories of `hypipe train`, or
// --json-log files of hypipe-run), one colour a run (core/report/LossPlot.h).
//
//===----------------------------------------------------------------------===//
#include "tools/hypipe/Commands.h"

#include "core/io/Files.h"
#include "core/report/LossPlot.h"

#include <fmt/format.h>

#include <filesystem>
#include <iostream>

namespace hypipe::cli {

namespace {

struct PlotOptions {
  std::vector<std::string> runs;
  std::string output;
  std::string title = "training runs";
  bool logScale = false;
};

/// The JSON log of `run`: RUN/log.jsonl for a run directory, else the file.
std::string logOf(const std::string &run) {
  return std::filesystem::is_directory(run) ? run + "/log.jsonl" : run;
}

/// What the legend calls `run`: its directory's or file's name.
std::string runName(const std::string &run) {
  std::filesystem::path path(run);
  while (path.has_parent_path() && !path.has_filename())
    path = path.parent_path();
  return path.filename().string();
}

int runPlot(const PlotOptions &o) {
  auto fail = [](const std::string &message, std::string_view help) {
    std::cerr << "error: " << message << "\nhelp: " << help << "\n";
    return 1;
  };
  // The files layer's errors carry their own help.
  auto failWith = [](const Error &err) {
    std::cerr << "error: " << toString(err) << "\n";
    return 1;
  };
  constexpr std::string_view kRunsHelp =
      "pass run directories of `hypipe train` (holding log.jsonl) or "
      "hypipe-run --json-log files";
  if (Error err = files::checkFileOutput(o.output, "-o"))
    return failWith(err);
  std::vector<std::string> logs;
  for (const std::string &run : o.runs) {
    if (!std::filesystem::exists(run))
      return fail(fmt::format("'{}' does not exist", run), kRunsHelp);
    logs.push_back(logOf(run));
  }
  if (Error err = files::checkNotAnInput(o.output, "-o", logs))
    return failWith(err);
  std::vector<report::LossCurve> curves;
  for (size_t i = 0; i < o.runs.size(); ++i) {
    Expected<std::string> text = files::readBounded(logs[i], files::kRunFile);
    if (!text)
      return failWith(text.takeError());
    report::LossCurve curve = report::lossCurveOfLog(*text);
    if (curve.points.empty())
      return fail(fmt::format("'{}' logs no step (no JSON line with a step "
                              "and a loss)",
                              logs[i]),
                  "plot runs that took a step");
    curve.title = runName(o.runs[i]);
    curves.push_back(std::move(curve));
  }
  if (Error err = files::writeAtomically(
          o.output, "the picture",
          report::overlaySvg(curves, o.title, {o.logScale})))
    return failWith(err);
  fmt::print("wrote {} ({} runs)\n", o.output, curves.size());
  return 0;
}

} // namespace

void addPlotCommand(CLI::App &app, Runner &run) {
  auto o = std::make_shared<PlotOptions>();
  CLI::App *sub = app.add_subcommand(
      "plot", "Overlay several runs' loss, learning rate and grad norm in "
              "one SVG picture");
  sub->add_option("runs", o->runs,
                  "run directories of `hypipe train` (RUN/log.jsonl) or "
                  "hypipe-run --json-log files")
      ->required();
  sub->add_option("-o,--output", o->output, "the SVG file to write")
      ->required();
  sub->add_option("--title", o->title, "the picture's title");
  sub->add_flag("--log-scale", o->logScale,
                "logarithmic loss and grad-norm axes");
  sub->callback([o, &run] { run = [o] { return runPlot(*o); }; });
}

} // namespace hypipe::cli
