//===- PlanCommand.cpp - `hypipe plan` ------------------------------------===//
#include "core/io/Files.h"
#include "core/model/SizeBounds.h"
#include "frontend/Plan.h"
#include "runtime/exec/NumberFormat.h"
#include "tools/common/CliChecks.h"
#include "tools/hypipe/Commands.h"
#include "tools/hypipe/Report.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

namespace hypipe::cli {

namespace {

struct PlanOptions {
  std::string spec;
  std::optional<int64_t> ranks, gpus;
  ClusterOptions cluster;
  std::optional<double> memoryGiB;
  std::optional<int64_t> globalBatch;
  int64_t top = 5;
  std::optional<int64_t> tp; ///< --tp
  std::string out;
  bool json = false;
  std::string costs;               ///< --costs FILE
  std::string memoryOf = "hypipe"; ///< --memory-of
};

int fail(Error err) {
  Problem p = err.takeProblem();
  std::cerr << "error: " << p.message << "\n";
  if (!p.help.empty())
    std::cerr << "help: " << p.help << "\n";
  return 1;
}

/// What bounds the winner, in a line.
std::string boundText(const Plan &p, bool cluster) {
  const PlanCandidate &best = p.candidates[0];
  if (p.memoryBound)
    return "memory: a layout pruned by the memory cap has less compute on its "
           "busiest rank than this one takes per step";
  // The idle time communication causes is part of the bubble: what is
  // left of the bubble with free communication is the schedule's own.
  const double schedule = best.bubble - best.communication;
  if (best.communication >= 0.05 && best.communication >= schedule)
    return fmt::format("communication: transfers and gradient reductions the "
                       "schedule does not hide add {:.1f}% to the step",
                       100 * best.communication);
  if (best.bubble >= 0.05)
    return fmt::format("bubble: {:.1f}% of the worst rank's step is idle",
                       100 * best.bubble);
  return cluster ? "compute: the bubble is under 5%, communication included"
                 : "compute: the bubble is under 5% (transfers are free "
                   "without --device, so communication cannot bound it)";
}

void printPlanTable(const Plan &p, size_t shown, bool seconds, bool cluster) {
  std::vector<std::string> header{"rank",
                                  "tp",
                                  "sp",
                                  "pp",
                                  "vpp",
                                  "dp",
                                  "schedule",
                                  "microbatches",
                                  "micro_batch_size",
                                  "distributed_optimizer",
                                  "recompute",
                                  seconds ? "step_s" : "step_GFLOP"};
  if (seconds)
    header.push_back("tokens_per_s");
  // The expert grid's columns when the search laid experts out.
  const bool experts =
      std::any_of(p.candidates.begin(), p.candidates.end(),
                  [](const auto &c) { return c.layout.expertGrid(); });
  if (experts)
    header.insert(header.begin() + 3, {"ep", "etp"});
  // The loss's column when a row shown has the linear one.
  const bool losses = std::any_of(
      p.candidates.begin(), p.candidates.begin() + shown,
      [](const auto &c) { return c.spec.crossEntropyFusionImpl != "native"; });
  const size_t lossColumn = header.size() - (seconds ? 2 : 1);
  if (losses)
    header.insert(header.begin() + lossColumn, "loss");
  header.push_back("bubble");
  if (cluster)
    header.push_back("communication");
  for (const char *h : {"peak_memory_GiB", "sent_GiB_per_step"})
    header.push_back(h);
  std::vector<std::vector<std::string>> rows{header};
  for (size_t i = 0; i < shown; ++i) {
    const PlanCandidate &c = p.candidates[i];
    const PlanLayout &l = c.layout;
    std::vector<std::string> row{std::to_string(i + 1),
                                 std::to_string(l.tp),
                                 l.sequenceParallel ? "yes" : "no",
                                 std::to_string(l.pp),
                                 std::to_string(l.vpp),
                                 std::to_string(l.dp),
                                 schedule::scheduleName(l.schedule),
                                 std::to_string(l.microbatches),
                                 std::to_string(l.microBatchSize),
                                 l.distributedOptimizer ? "yes" : "no",
                                 recomputeText(c.spec.training.recompute),
                                 fmt::format("{:.4g}", c.makespan)};
    if (experts)
      row.insert(row.begin() + 3, {std::to_string(l.ep),
                                   std::to_string(l.expertTensorParallel())});
    if (losses)
      row.insert(row.end() - 1, c.spec.crossEntropyFusionImpl);
    if (seconds)
      row.push_back(withCommas(std::llround(stepTokens(c.spec) / c.makespan)));
    row.push_back(fmt::format("{:.1f}%", 100 * c.bubble));
    if (cluster)
      row.push_back(fmt::format("{:.1f}%", 100 * c.communication));
    for (std::string cell : {gib(c.peakMemory()), gib(c.bytesSentPerStep)})
      row.push_back(cell);
    rows.push_back(std::move(row));
  }
  printTable(rows);
}

/// Where the step's seconds come from, in a line.
std::string unitText(const PlanRequest &r, const std::string &costsFile) {
  if (!r.cluster && costsFile.empty())
    return "step time in GFLOP of one rank (the simulator's unit, transfers "
           "free; give --device or --costs FILE for seconds and tokens/s)";
  std::string compute =
      costsFile.empty()
          ? fmt::format("{} at {:.0f}% of its peak", r.cluster->device.name,
                        100 * r.cluster->device.achieved)
          : fmt::format("the layer costs measured in {}", costsFile);
  if (!r.cluster)
    return fmt::format("step time in seconds from {} (transfers and gradient "
                       "reduction free; give --device for them)",
                       compute);
  const Cluster &c = *r.cluster;
  if (c.device.name == "measured")
    return fmt::format("step time in seconds: compute from {}; transfers and "
                       "gradient reductions on the link that run measured, "
                       "{:.4g} GB/s + {:.3g} us (--device for a cluster's)",
                       compute, c.device.intraNode.bytesPerSecond / 1e9,
                       c.device.intraNode.latencySeconds * 1e6);
  return fmt::format(
      "step time in seconds: compute from {}; transfers and gradient "
      "reductions on {} ranks a node, {:.4g} GB/s + {:.3g} us within one, "
      "{:.4g} GB/s + {:.3g} us between",
      compute, c.device.perNode, c.device.intraNode.bytesPerSecond / 1e9,
      c.device.intraNode.latencySeconds * 1e6,
      c.device.interNode.bytesPerSecond / 1e9,
      c.device.interNode.latencySeconds * 1e6);
}

/// Which tensor-parallel sizes the search tried, and why not more, in a
/// line.
std::string tensorParallelText(const Plan &p, const PlanRequest &r) {
  std::string sizes;
  for (int64_t tp : p.tensorParallelSizes)
    sizes += (sizes.empty() ? "" : ", ") + std::to_string(tp);
  std::string why = r.tp ? std::string("--tp")
                    : r.cluster && r.cluster->device.gpu
                        ? fmt::format("of the divisors of a node's {} GPUs, "
                                      "those every layer splits over",
                                      r.cluster->device.perNode)
                        : std::string("the spec's; --gpus or a GPU --device "
                                      "searches them");
  if (!p.tensorParallelRefusal.empty())
    why += "; not " + p.tensorParallelRefusal;
  return fmt::format("tensor parallel sizes tried: {} ({})\n", sizes, why);
}

/// Megatron-LM's complete argument list for each row of the table: the
/// model's flags once (they are every row's), then each row's layout flags,
/// or why Megatron-LM cannot run that row.
void printMegatronArgs(const Plan &p, size_t shown) {
  const PlanCandidate &first = p.candidates[0];
  std::cout << fmt::format(
      "megatron: pretrain_mamba.py on tp x pp x dp GPUs with each row's flags "
      "and "
      "the model's: {}\n",
      megatronModelArgs(first.spec));
  for (size_t i = 0; i < shown; ++i) {
    const PlanCandidate &c = p.candidates[i];
    std::optional<std::string> cannot = megatronCannotRun(c);
    std::cout << fmt::format("megatron {}: {}\n", i + 1,
                             cannot ? *cannot : megatronLayoutArgs(c));
  }
}

/// " (N of them fit only with recompute)", or with the linear
/// cross-entropy, or with either (and how many with each).
std::string fitOnlyWithText(const Plan &p) {
  if (!p.fitByLinearLoss)
    return p.fitByRecompute ? fmt::format(" ({} of them fit only with "
                                          "recompute)",
                                          p.fitByRecompute)
                            : "";
  if (!p.fitByRecompute)
    return fmt::format(" ({} of them fit only with the linear cross-entropy)",
                       p.fitByLinearLoss);
  const auto either = std::count_if(
      p.candidates.begin(), p.candidates.end(), [](const PlanCandidate &c) {
        return c.layout.linearCrossEntropy ||
               c.layout.recompute.granularity != RecomputeGranularity::None;
      });
  return fmt::format(" ({} of them fit only with recompute or the linear "
                     "cross-entropy: {} with recompute, {} with the linear "
                     "loss)",
                     either, p.fitByRecompute, p.fitByLinearLoss);
}

void printPlan(const Plan &p, size_t shown, const PlanOptions &o,
               const PlanRequest &r, double seconds) {
  std::cout << fmt::format(
      "{}: {} {}, global batch {}{}\n\n", o.spec, r.ranks,
      r.cluster && r.cluster->device.gpu ? r.cluster->device.name + " GPUs"
                                         : std::string("ranks"),
      p.candidates[0].globalBatch,
      r.memoryGiB
          ? fmt::format(", at most {} GiB per rank{}{}", *r.memoryGiB,
                        o.memoryGiB ? "" : " (the device's memory)",
                        r.megatronMemory ? " as Megatron-LM holds it" : "")
          : "");
  printPlanTable(p, shown, r.stepModel().inSeconds(), r.cluster.has_value());
  std::cout << fmt::format("\n{}\nbound: {}\n", unitText(r, o.costs),
                           boundText(p, r.cluster.has_value()));
  std::cout << tensorParallelText(p, r);
  printMegatronArgs(p, shown);
  std::cout << fmt::format(
      "{} candidates simulated{}, {} not ({} over the memory cap, {} unable "
      "to reach the top {} by their busiest rank's compute, {} invalid) in "
      "{:.2f} s\n",
      p.simulated, fitOnlyWithText(p),
      p.prunedByMemory + p.prunedByBound + p.invalid, p.prunedByMemory,
      p.prunedByBound, o.top, p.invalid, seconds);
}

void printPlanJson(const Plan &p, const std::vector<std::string> &files,
                   bool seconds, bool cluster) {
  nlohmann::ordered_json out;
  out["candidates"] = nlohmann::ordered_json::array();
  for (size_t i = 0; i < files.size(); ++i) {
    const PlanCandidate &c = p.candidates[i];
    const PlanLayout &l = c.layout;
    out["candidates"].push_back(
        {{"spec", files[i].empty() ? nlohmann::ordered_json()
                                   : nlohmann::ordered_json(files[i])},
         {"tp", l.tp},
         {"sequence_parallel", l.sequenceParallel},
         {"ep", l.ep},
         {"etp", l.expertTensorParallel()},
         {"pp", l.pp},
         {"vpp", l.vpp},
         {"dp", l.dp},
         {"schedule", schedule::scheduleName(l.schedule)},
         {"microbatches", l.microbatches},
         {"micro_batch_size", l.microBatchSize},
         {"distributed_optimizer", l.distributedOptimizer},
         {"recompute", recomputeJson(c.spec.training.recompute)},
         {"cross_entropy_fusion_impl", c.spec.crossEntropyFusionImpl},
         {"predicted_step", c.makespan},
         {"bubble", c.bubble},
         {"peak_memory_bytes", c.memory},
         {"bytes_sent_per_step", c.bytesSentPerStep},
         {"megatron_args", megatronCannotRun(c)
                               ? nlohmann::ordered_json()
                               : nlohmann::ordered_json(megatronArgs(c))}});
    if (std::optional<std::string> cannot = megatronCannotRun(c))
      out["candidates"].back()["megatron_cannot_run"] = *cannot;
    if (cluster)
      out["candidates"].back()["communication"] = c.communication;
    if (seconds) {
      out["candidates"].back()["predicted_step_s"] = c.makespan;
      out["candidates"].back()["predicted_tokens_per_s"] =
          stepTokens(c.spec) / c.makespan;
    }
  }
  out["step_unit"] = seconds ? "seconds" : "GFLOP of one rank";
  out["simulated"] = p.simulated;
  out["pruned"] = p.prunedByMemory + p.prunedByBound + p.invalid;
  out["pruned_by_memory"] = p.prunedByMemory;
  out["fit_by_recompute"] = p.fitByRecompute;
  out["fit_by_linear_cross_entropy"] = p.fitByLinearLoss;
  out["pruned_by_bound"] = p.prunedByBound;
  out["invalid"] = p.invalid;
  std::cout << out.dump(2) << "\n";
}

/// The number N of a file name plan-N.yaml, or 0.
size_t planNumber(const std::string &name) {
  unsigned n = 0;
  char end = 0;
  if (std::sscanf(name.c_str(), "plan-%u.yam%c", &n, &end) != 2 || end != 'l' ||
      name != fmt::format("plan-{}.yaml", n))
    return 0;
  return n;
}

/// True for a file an earlier `hypipe plan --out` wrote: plan-N.yaml that
/// begins as plannedSpecText begins (a user's own plan-1.yaml does not).
bool isEarlierPlan(const std::string &dir, const std::string &name) {
  if (planNumber(name) == 0)
    return false;
  auto text = files::readBounded(dir + "/" + name, files::kSpec);
  if (!text) {
    (void)text.takeError();
    return false;
  }
  return text->rfind("# hypipe plan: ", 0) == 0;
}

/// Writes DIR/plan-1.yaml ... for the first `shown` candidates, into a
/// directory that is new, empty or an earlier plan's; an earlier plan's
/// plan-N.yaml past them goes, so that no stale plan stays beside these.
Expected<std::vector<std::string>> writePlans(const Plan &p, size_t shown,
                                              const PlanOptions &o) {
  std::vector<std::string> files(shown);
  if (o.out.empty())
    return files;
  if (auto err = files::checkNotAnInput(o.out, "--out", {o.spec}, true))
    return std::move(err);
  if (auto err = files::checkOutputDirectoryHoldsOnly(
          o.out, "--out",
          [&](const std::string &name) { return isEarlierPlan(o.out, name); },
          "give --out a new or empty directory, or an earlier plan's "
          "(whose plan-N.yaml files are replaced)"))
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
  std::error_code ec;
  for (const auto &entry : std::filesystem::directory_iterator(o.out, ec))
    if (planNumber(entry.path().filename().string()) > shown)
      std::filesystem::remove(entry.path(), ec);
  return files;
}

/// The request the options describe: --gpus is --ranks on a GPU device
/// (h100 unless --device names another), whose memory caps a rank unless
/// --memory-gib does.
Expected<PlanRequest> requestOf(const PlanOptions &o) {
  if (o.ranks.has_value() == o.gpus.has_value())
    return Error(Problem{"give one of --ranks and --gpus",
                         "--ranks N plans for N ranks (tp x pp x dp); --gpus N "
                         "for N GPUs (--device h100 unless given)"});
  ClusterOptions clusterOptions = o.cluster;
  if (o.gpus && !clusterOptions.device)
    clusterOptions.device = "h100";
  Expected<std::optional<Cluster>> cluster = clusterOf(clusterOptions);
  if (!cluster)
    return cluster.takeError();
  if (o.gpus && !(*cluster)->device.gpu)
    return Error(
        Problem{fmt::format("--gpus plans GPUs; --device {} is not one",
                            *clusterOptions.device),
                "give --ranks for CPU ranks"});
  PlanRequest request{o.spec, o.ranks ? *o.ranks : *o.gpus, o.memoryGiB,
                      o.globalBatch};
  request.cluster = std::move(*cluster);
  if (request.cluster && !request.memoryGiB)
    request.memoryGiB = request.cluster->device.memoryGiB;
  request.top = o.top;
  request.tp = o.tp;
  request.megatronMemory = o.memoryOf == "megatron";
  return request;
}

int runPlan(const PlanOptions &o) {
  auto start = std::chrono::steady_clock::now();
  Expected<PlanRequest> made = requestOf(o);
  if (!made)
    return fail(made.takeError());
  PlanRequest &request = *made;
  Expected<std::string> text = files::readBounded(o.spec, files::kSpec);
  if (!text)
    return fail(text.takeError());
  // The spec's own errors as the loader renders them (file:line:col, the
  // line, a caret), not inside a line of plan's.
  if (llvm::Expected<ModelSpec> spec = parseSpec(*text, o.spec); !spec) {
    llvm::errs() << llvm::toString(spec.takeError());
    return 1;
  } else if (!spec->unplannable.empty()) { // the key plan cannot write back
    llvm::errs() << spec->unplannable;
    return 1;
  }
  if (!o.costs.empty()) {
    Expected<MeasuredCosts> costs = readMeasuredCosts(o.costs);
    if (!costs)
      return fail(costs.takeError());
    request.costs = std::move(*costs);
    // The link the measured run's ranks talked over, unless --device
    // names a row.
    if (!request.cluster && request.costs->link)
      request.cluster = measuredCluster(*request.costs->link);
  }
  auto p = plan(*text, request);
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
    printPlanJson(*p, *files, request.stepModel().inSeconds(),
                  request.cluster.has_value());
  else
    printPlan(*p, shown, o, request, seconds);
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
  // The most a request may ask for, as checkRequest and SizeBounds.h bound
  // it (one rank's 1 TiB the memory cap's).
  sub->add_option("--ranks", o->ranks, "ranks (tp x pp x dp) to plan for")
      ->check(wholeBetween(1, kMaxRanks));
  sub->add_option("--gpus", o->gpus,
                  "GPUs to plan for: --ranks on a GPU device (--device h100 "
                  "unless given), capped by its memory")
      ->check(wholeBetween(1, kMaxRanks));
  addClusterOptions(sub, o->cluster);
  sub->add_option("--costs", o->costs,
                  "layer costs a run measured (hypipe train SPEC --costs-out "
                  "FILE): rank by predicted seconds and show tokens/s");
  sub->add_option("--memory-gib", o->memoryGiB,
                  "memory cap per rank (the estimate `hypipe explain` prints)")
      ->check(numberBetween(0, false, double(kMaxRankBytes >> 30)));
  sub->add_option("--memory-of", o->memoryOf,
                  "whose memory the cap holds: hypipe (hypipe-run's own "
                  "buffers, the default) or megatron (what a Megatron-LM run "
                  "of the printed flags holds: bf16 storage, docs/plan.md)")
      ->check(CLI::IsMember({"hypipe", "megatron"}));
  sub->add_option("--global-batch", o->globalBatch,
                  "samples per step (default: the spec's micro_batch_size x "
                  "microbatches x dp)")
      ->check(wholeBetween(1, kMaxStepTokens));
  sub->add_option("--top", o->top, "candidates to print")
      ->check(wholeAtLeast(1));
  sub->add_option("--tp", o->tp,
                  "plan at this tensor-parallel size only (default: on a GPU "
                  "device, every divisor of its GPUs a node that the layers "
                  "split over; else the spec's)")
      ->check(wholeAtLeast(1));
  sub->add_option("--out", o->out,
                  "write DIR/plan-1.yaml ... (best first), each a complete "
                  "spec");
  sub->add_flag("--json", o->json, "print JSON (format in docs/cli.md)");
  sub->callback([o, &run] { run = [o] { return runPlan(*o); }; });
}

} // namespace hypipe::cli
