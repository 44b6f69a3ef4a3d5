//===- PlanCommand.cpp - `hypipe plan` ------------------------------------===//
#include "core/io/Files.h"
#include "frontend/Plan.h"
#include "runtime/exec/NumberFormat.h"
#include "tools/hypipe/Commands.h"
#include "tools/hypipe/Report.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <iostream>
#include <memory>

namespace hypipe::cli {

namespace {

struct PlanOptions {
  std::string spec;
  int64_t ranks = 1;
  std::optional<double> memoryGiB;
  std::optional<int64_t> globalBatch;
  int64_t top = 5;
  std::string out;
  bool json = false;
  std::string costs; ///< --costs FILE
};

int fail(Error err) {
  Problem p = err.takeProblem();
  std::cerr << "error: " << p.message << "\n";
  if (!p.help.empty())
    std::cerr << "help: " << p.help << "\n";
  return 1;
}

/// What bounds the winner, in a line.
std::string boundText(const Plan &p) {
  const PlanCandidate &best = p.candidates[0];
  if (p.memoryBound)
    return "memory: a layout pruned by the memory cap has less compute on its "
           "busiest rank than this one takes per step";
  if (best.bubble >= 0.05)
    return fmt::format("bubble: {:.1f}% of the worst rank's step is idle",
                       100 * best.bubble);
  return "compute: the bubble is under 5% (transfers are not simulated yet, "
         "so communication cannot bound it)";
}

void printPlanTable(const Plan &p, size_t shown, bool measured) {
  std::vector<std::string> header{"rank",
                                  "pp",
                                  "vpp",
                                  "dp",
                                  "schedule",
                                  "microbatches",
                                  "distributed_optimizer",
                                  measured ? "step_s" : "step_GFLOP"};
  if (measured)
    header.push_back("tokens_per_s");
  for (const char *h : {"bubble", "peak_memory_GiB", "sent_GiB_per_step"})
    header.push_back(h);
  std::vector<std::vector<std::string>> rows{header};
  for (size_t i = 0; i < shown; ++i) {
    const PlanCandidate &c = p.candidates[i];
    const PlanLayout &l = c.layout;
    std::vector<std::string> row{std::to_string(i + 1),
                                 std::to_string(l.pp),
                                 std::to_string(l.vpp),
                                 std::to_string(l.dp),
                                 l.schedule,
                                 std::to_string(l.microbatches),
                                 l.distributedOptimizer ? "yes" : "no",
                                 fmt::format("{:.4g}", c.makespan)};
    if (measured)
      row.push_back(withCommas(std::llround(stepTokens(c.spec) / c.makespan)));
    for (std::string cell : {fmt::format("{:.1f}%", 100 * c.bubble),
                             gib(c.peakMemory()), gib(c.bytesSentPerStep)})
      row.push_back(cell);
    rows.push_back(std::move(row));
  }
  printTable(rows);
}

void printPlan(const Plan &p, size_t shown, const PlanOptions &o,
               double seconds) {
  std::cout << fmt::format("{}: {} ranks, global batch {}{}\n\n", o.spec,
                           o.ranks, p.candidates[0].globalBatch,
                           o.memoryGiB ? fmt::format(", at most {} GiB per "
                                                     "rank",
                                                     *o.memoryGiB)
                                       : "");
  printPlanTable(p, shown, !o.costs.empty());
  std::cout << fmt::format(
      "\n{}\nbound: {}\nmegatron: {}\n"
      "{} candidates simulated, {} pruned ({} by memory, {} invalid) in "
      "{:.2f} s\n",
      o.costs.empty()
          ? "step time in GFLOP of one rank (the simulator's unit, transfers "
            "free; give --costs FILE for seconds and tokens/s)"
          : fmt::format("step time in seconds from the layer costs measured "
                        "in {} (transfers and gradient reduction free)",
                        o.costs),
      boundText(p), megatronArgs(p.candidates[0]), p.simulated,
      p.prunedByMemory + p.invalid, p.prunedByMemory, p.invalid, seconds);
}

void printPlanJson(const Plan &p, const std::vector<std::string> &files,
                   bool measured) {
  nlohmann::ordered_json out;
  out["candidates"] = nlohmann::ordered_json::array();
  for (size_t i = 0; i < files.size(); ++i) {
    const PlanCandidate &c = p.candidates[i];
    const PlanLayout &l = c.layout;
    out["candidates"].push_back(
        {{"spec", files[i].empty() ? nlohmann::ordered_json()
                                   : nlohmann::ordered_json(files[i])},
         {"pp", l.pp},
         {"vpp", l.vpp},
         {"dp", l.dp},
         {"schedule", l.schedule},
         {"microbatches", l.microbatches},
         {"distributed_optimizer", l.distributedOptimizer},
         {"predicted_step", c.makespan},
         {"bubble", c.bubble},
         {"peak_memory_bytes", c.costs.rankPeakMemory()},
         {"bytes_sent_per_step", c.bytesSentPerStep},
         {"megatron_args", megatronArgs(c)}});
    if (measured) {
      out["candidates"].back()["predicted_step_s"] = c.makespan;
      out["candidates"].back()["predicted_tokens_per_s"] =
          stepTokens(c.spec) / c.makespan;
    }
  }
  out["step_unit"] = measured ? "seconds" : "GFLOP of one rank";
  out["simulated"] = p.simulated;
  out["pruned"] = p.prunedByMemory + p.invalid;
  std::cout << out.dump(2) << "\n";
}

/// Writes DIR/plan-1.yaml ... for the first `shown` candidates.
Expected<std::vector<std::string>> writePlans(const Plan &p, size_t shown,
                                              const PlanOptions &o) {
  std::vector<std::string> files(shown);
  if (o.out.empty())
    return files;
  if (auto err = files::checkDirectoryOutput(o.out, "--out"))
    return std::move(err);
  if (auto err = files::checkNotAnInput(o.out, "--out", {o.spec}, true))
    return std::move(err);
  auto text = files::readBounded(o.spec, files::kSpec);
  if (!text)
    return text.takeError();
  llvm::SmallString<256> specDir(o.spec);
  llvm::sys::path::remove_filename(specDir);
  if (llvm::sys::fs::create_directories(o.out))
    return makeError("cannot create --out directory " + o.out);
  for (size_t i = 0; i < shown; ++i) {
    auto planned = plannedSpecText(
        *text, specDir.empty() ? "." : specDir.c_str(), p.candidates[i]);
    if (!planned)
      return planned.takeError();
    files[i] = fmt::format("{}/plan-{}.yaml", o.out, i + 1);
    if (auto err = files::writeAtomically(files[i], "--out", *planned))
      return std::move(err);
  }
  return files;
}

int runPlan(const PlanOptions &o) {
  auto start = std::chrono::steady_clock::now();
  PlanRequest request{o.spec, o.ranks, o.memoryGiB, o.globalBatch};
  if (!o.costs.empty()) {
    Expected<MeasuredCosts> costs = readMeasuredCosts(o.costs);
    if (!costs)
      return fail(costs.takeError());
    request.costs = std::move(*costs);
  }
  auto p = plan(request);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (!p)
    return fail(p.takeError());
  const size_t shown =
      std::min<size_t>(static_cast<size_t>(o.top), p->candidates.size());
  auto files = writePlans(*p, shown, o);
  if (!files)
    return fail(files.takeError());
  if (o.json)
    printPlanJson(*p, *files, !o.costs.empty());
  else
    printPlan(*p, shown, o, seconds);
  return 0;
}

} // namespace

void addPlanCommand(CLI::App &app, Runner &run) {
  auto o = std::make_shared<PlanOptions>();
  CLI::App *sub = app.add_subcommand(
      "plan", "Search pp, vpp, dp, the schedule, the microbatch count and "
              "the distributed optimizer for a rank count; print the fastest "
              "layouts that fit (docs/plan.md)");
  sub->add_option("spec", o->spec, "model spec (YAML)")->required();
  sub->add_option("--ranks", o->ranks, "ranks (pp x dp) to plan for")
      ->required()
      ->check(CLI::PositiveNumber);
  sub->add_option("--costs", o->costs,
                  "layer costs a run measured (hypipe train SPEC --costs-out "
                  "FILE): rank by predicted seconds and show tokens/s");
  sub->add_option("--memory-gib", o->memoryGiB,
                  "memory cap per rank (the estimate `hypipe explain` prints)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--global-batch", o->globalBatch,
                  "samples per step (default: the spec's micro_batch_size x "
                  "microbatches x dp)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--top", o->top, "candidates to print")
      ->check(CLI::PositiveNumber);
  sub->add_option("--out", o->out,
                  "write DIR/plan-1.yaml ... (best first), each a complete "
                  "spec");
  sub->add_flag("--json", o->json, "print JSON (format in docs/cli.md)");
  sub->callback([o, &run] { run = [o] { return runPlan(*o); }; });
}

} // namespace hypipe::cli
