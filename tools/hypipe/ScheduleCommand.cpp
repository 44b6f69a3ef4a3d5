//===- ScheduleCommand.cpp - `hypipe schedule` ----------------------------===//
#include "core/io/Files.h"
#include "core/schedule/Render.h"
#include "runtime/exec/NumberFormat.h"
#include "tools/common/CliChecks.h"
#include "tools/hypipe/Commands.h"
#include "tools/hypipe/Report.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <memory>

namespace hypipe::cli {

namespace {

using namespace hypipe::schedule;

struct ScheduleOptions {
  std::string name = "1f1b";
  bool scheduleGiven = false; ///< --schedule on the command line
  int64_t pp = 1, vpp = 1, microbatches = 1;
  std::optional<int64_t> groupSize; ///< absent: pp
  std::string costs;
  double latency = 0, bandwidth = 0, sendBytes = 0;
  bool inOrderStreams = false;
  std::string comm; ///< --comm: the transport whose model times transfers
  bool json = false, computeOnly = false;
  std::string csvOut, svgOut, traceOut, csvIn;
};

int fail(const std::string &message) {
  llvm::errs() << "error: " << message << "\n";
  return 1;
}

/// The files the command writes (--csv, --svg, --trace), each with its
/// flag; "" where not asked for.
std::vector<std::pair<std::string, const char *>>
outputsOf(const ScheduleOptions &o) {
  return {{o.csvOut, "--csv"}, {o.svgOut, "--svg"}, {o.traceOut, "--trace"}};
}

/// Refuses, before anything is computed, an output that cannot be written
/// as a file or that is the imported CSV.
Error checkOutputs(const ScheduleOptions &o) {
  std::vector<std::string> inputs;
  if (!o.csvIn.empty())
    inputs.push_back(o.csvIn);
  std::vector<std::string> written; // said after the output (stderr: --json)
  for (const auto &[path, flag] : outputsOf(o)) {
    if (path.empty())
      continue;
    if (auto err = files::checkFileOutput(path, flag))
      return err;
    if (auto err = files::checkNotAnInput(path, flag, inputs))
      return err;
  }
  return Error::success();
}

/// Says when the SVG is drawn aggregated, and why.
void noteAggregated(const SvgLayout &layout) {
  if (!layout.aggregated)
    return;
  // An action far shorter than the step can ask for more pixels than an
  // int64_t (or a double) holds.
  const double w = layout.labelledWidth;
  const std::string width =
      w < 1e18           ? withCommas(int64_t(w)) + " px"
      : std::isfinite(w) ? fmt::format("{:.3g} px", w)
                         : std::string("more pixels than a double holds");
  std::cerr << fmt::format(
      "note: --svg drew each rank as one-pixel columns (a box per action "
      "with its label would make the picture {} wide, more than {} px); "
      "--trace writes every action\n",
      width, withCommas(int64_t(kSvgMaxWidth)));
}

/// The schedule `o` asks for: imported from --import-csv (placed by
/// --schedule when given), or built.
Expected<Schedule> loadSchedule(const ScheduleOptions &o, ScheduleKind kind) {
  if (!o.csvIn.empty()) {
    Expected<std::string> text =
        files::readBounded(o.csvIn, files::kScheduleCsv);
    if (!text)
      return text.takeError();
    // The placement comes from --schedule when given, else from the file.
    std::optional<Placement> placement;
    if (o.scheduleGiven)
      placement = placementOf(kind);
    auto loaded = importCsv(*text, o.pp, o.vpp, o.microbatches, placement);
    if (!loaded)
      return makeError(
          fmt::format("{}: {}", o.csvIn, toString(loaded.takeError())));
    Schedule schedule = std::move(loaded->schedule);
    schedule.name = o.csvIn;
    if (!o.json) {
      for (const std::string &n : importNotes(*loaded))
        std::cout << "import: " << n << "\n";
    }
    return schedule;
  }
  return buildSchedule({kind, o.pp, o.vpp, o.microbatches, o.groupSize});
}

/// --json: the programs and the simulation, as one object.
void printScheduleJson(const Schedule &schedule, const Schedule &computeOnly,
                       const Simulation &simulation) {
  nlohmann::ordered_json out;
  out["schedule"] = schedule.name;
  out["pp"] = schedule.pp;
  out["vpp"] = schedule.vpp;
  out["microbatches"] = schedule.microbatches;
  out["ranks"] = nlohmann::ordered_json::array();
  for (int64_t r = 0; r < schedule.pp; ++r) {
    nlohmann::ordered_json ops = nlohmann::ordered_json::array(),
                           program = nlohmann::ordered_json::array();
    for (const Action &a : computeOnly.ranks[r])
      ops.push_back(schedule.megatronText(a));
    for (const Action &a : schedule.ranks[r])
      program.push_back(pytorchText(a));
    out["ranks"].push_back(
        {{"pp_rank", r}, {"ops", ops}, {"program", program}});
  }
  out["simulation"] = {{"makespan", simulation.makespan},
                       {"bubble_fraction", simulation.bubbleFraction},
                       {"peak_activations", simulation.peakActivations}};
  std::cout << out.dump(2) << "\n";
}

int runSchedule(const ScheduleOptions &o) {
  if (auto err = checkOutputs(o))
    return fail(toString(err));
  std::optional<ScheduleKind> kind = parseScheduleKind(o.name);
  if (!kind)
    return fail(fmt::format("unknown schedule '{}': use one of {}", o.name,
                            scheduleNameList()));
  Expected<Schedule> loaded = loadSchedule(o, *kind);
  if (!loaded)
    return fail(toString(loaded.takeError()));
  Schedule schedule = std::move(*loaded);
  Schedule computeOnly = schedule;
  for (auto &program : computeOnly.ranks)
    program.erase(
        std::remove_if(program.begin(), program.end(),
                       [](const Action &a) { return !isCompute(a.op); }),
        program.end());
  // An imported program with its own communication is checked as written.
  insertCommunication(schedule);
  // hypipe's NCCL links match by order: its programs receive in send order.
  const bool nccl = parseCommKind(o.comm) == CommKind::Nccl;
  if (nccl)
    receiveInSendOrder(schedule.ranks);

  Costs costs;
  if (auto err = parseCosts(o.costs, costs))
    return fail(toString(std::move(err)));
  costs.latency = o.latency;
  costs.bandwidth = o.bandwidth;
  costs.sendBytes = o.sendBytes;
  costs.inOrderStreams = o.inOrderStreams;
  if (nccl)
    costs.setComm(CommKind::Nccl);
  auto simulation = simulate(schedule, costs);
  if (!simulation)
    return fail((o.csvIn.empty() ? "" : o.csvIn + ": ") +
                toString(simulation.takeError()));
  // Costs past a double's range make the step infinite: it has no table,
  // trace or picture; and a step of less than 1e-290 time units has no
  // picture or trace whose pixels or microseconds a double holds.
  if (!std::isfinite(simulation->makespan))
    return fail(fmt::format(
        "the costs make the step's time infinite (F={:g} B={:g} I={:g} "
        "W={:g}, latency {:g}, {:g} bytes at {:g} a time unit)\nhelp: give "
        "costs in a unit that keeps their sum below 1e300, e.g. ms rather "
        "than ns",
        costs.f, costs.b, costs.i, costs.w, o.latency, o.sendBytes,
        o.bandwidth));
  if (simulation->makespan > 0 && simulation->makespan < 1e-290 &&
      (!o.svgOut.empty() || !o.traceOut.empty()))
    return fail(fmt::format(
        "the step takes {:g} time units, too few to draw or trace\nhelp: "
        "give the costs in a smaller unit, e.g. ns rather than s",
        simulation->makespan));

  std::vector<std::string> written; // said after the output (stderr: --json)
  for (const auto &[path, flag] : outputsOf(o)) {
    if (path.empty())
      continue;
    const std::string_view which = flag;
    std::string text = which == "--csv"
                           ? toCsv(o.computeOnly ? computeOnly : schedule)
                       : which == "--svg" ? svgTimeline(schedule, *simulation)
                                          : chromeTrace(schedule, *simulation);
    if (auto err = files::writeAtomically(path, flag, text))
      return fail(toString(err));
    if (which == "--svg")
      noteAggregated(svgLayout(schedule, *simulation));
    written.push_back(fmt::format("wrote {} ({})", path, flag));
  }

  if (o.json) {
    printScheduleJson(schedule, computeOnly, *simulation);
    for (const std::string &line : written)
      std::cerr << line << "\n";
    return 0;
  }
  std::cout << fmt::format(
      "{}: pp={} vpp={} microbatches={}; makespan {:.4g} (F={:g} B={:g} "
      "I={:g} W={:g})\n",
      schedule.name, schedule.pp, schedule.vpp, schedule.microbatches,
      simulation->makespan, costs.f, costs.b, costs.i, costs.w);
  std::vector<std::vector<std::string>> rows{{"pp_rank", "actions", "busy",
                                              "bubble", "peak_activations",
                                              "first ops"}};
  for (int64_t r = 0; r < schedule.pp; ++r) {
    std::string first;
    const auto &ops = computeOnly.ranks[r];
    for (size_t k = 0; k < ops.size() && k < 12; ++k)
      first += (k ? " " : "") + schedule.megatronText(ops[k]);
    if (ops.size() > 12)
      first += " ...";
    rows.push_back({std::to_string(r), std::to_string(schedule.ranks[r].size()),
                    fmt::format("{:.4g}", simulation->busy[r]),
                    fmt::format("{:.1f}%", 100 * simulation->bubbleFraction[r]),
                    std::to_string(simulation->peakActivations[r]), first});
  }
  printTable(rows);
  std::cout << "verified: every send meets its receive, every microbatch runs "
               "forward and "
               "backward on every stage, no rank waits forever\n";
  for (const std::string &line : written)
    std::cout << line << "\n";
  return 0;
}

} // namespace

void addScheduleCommand(CLI::App &app, Runner &run) {
  auto o = std::make_shared<ScheduleOptions>();
  CLI::App *sub = app.add_subcommand(
      "schedule", "Generate, verify and simulate a pipeline schedule; draw it");
  CLI::Option *scheduleOption =
      sub->add_option(
             "--schedule", o->name,
             "gpipe, 1f1b, interleaved-1f1b, zb-h1, zbv, dualpipev (with "
             "--import-csv: sets the placement instead of inferring "
             "it)")
          ->default_val("1f1b");
  sub->add_option("--pp", o->pp, "pipeline-parallel size")->required();
  sub->add_option("--vpp", o->vpp, "virtual stages per rank")->default_val(1);
  sub->add_option("--microbatches", o->microbatches, "microbatches per step")
      ->required();
  sub->add_option(
      "--group-size", o->groupSize,
      "microbatch_group_size_per_vp_stage (interleaved-1f1b; default pp)");
  sub->add_option("--costs", o->costs,
                  "per-action costs, e.g. F=1,B=2,I=1,W=1");
  sub->add_option("--latency", o->latency,
                  "time of one transfer (same unit as the costs)")
      ->check(nonNegativeNumber());
  sub->add_option("--bandwidth", o->bandwidth,
                  "bytes per time unit (with --send-bytes; 0: transfers "
                  "take no time)")
      ->check(nonNegativeNumber());
  sub->add_option("--send-bytes", o->sendBytes, "bytes of one transfer")
      ->check(nonNegativeNumber());
  sub->add_flag("--in-order-streams", o->inOrderStreams,
                "time transfers as NCCL runs them: one stream per pair of "
                "ranks, its sends and receives in program order (default: "
                "MPI's independent posted receives)");
  sub->add_option("--comm", o->comm,
                  "time transfers as this transport runs them: nccl is a "
                  "stream per direction of each pair of ranks, the programs "
                  "receiving in their peers' send order; mpi and mpi-staged "
                  "post receives matched by tag (the default)")
      ->check(CLI::IsMember({"mpi", "mpi-staged", "nccl"}))
      ->excludes("--in-order-streams");
  sub->add_flag("--json", o->json, "print JSON (format in docs/cli.md)");
  sub->add_option("--csv", o->csvOut, "write PyTorch pipelining's CSV text");
  sub->add_flag("--compute-only", o->computeOnly,
                "with --csv: only F/B/I/W actions");
  sub->add_option("--svg", o->svgOut, "write an SVG timeline");
  sub->add_option("--trace", o->traceOut,
                  "write a Chrome trace (chrome://tracing, Perfetto)");
  sub->add_option(
      "--import-csv", o->csvIn,
      "verify and simulate a program from PyTorch's CSV text instead");
  sub->callback([o, scheduleOption, &run] {
    o->scheduleGiven = scheduleOption->count() > 0;
    run = [o] { return runSchedule(*o); };
  });
}

} // namespace hypipe::cli
