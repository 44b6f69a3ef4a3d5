//===- TrainingLoop.cpp - hypipe-run's loop over training steps -----------===//
#include "runtime/exec/TrainingLoop.h"
#include "core/model/MeasuredCosts.h"

#include "core/data/MockSft.h"
#include "core/io/DirectoryLock.h"
#include "core/io/Files.h"
#include "core/schedule/Trace.h"
#include "runtime/data/Data.h"
#include "runtime/exec/NumberFormat.h"
#include "runtime/exec/Trainer.h"
#include "runtime/formats/Artifact.h"
#include "runtime/formats/Checkpoint.h"
#include "runtime/formats/FileCheck.h"
#include "runtime/formats/SafeTensors.h"
#include "runtime/kernels/cpu/Primitives.h"
#include "runtime/kernels/cpu/Profile.h"
#include "runtime/tensorboard/EventWriter.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string_view>

namespace hypipe::rt {

volatile std::sig_atomic_t stopSignal = 0;

namespace {

bool fileExists(const std::string &path) {
  return !path.empty() && ::access(path.c_str(), F_OK) == 0;
}

/// Whether this rank was asked to stop: the stop file, or a signal.
bool stopRequested(const RunOptions &o) {
  return stopSignal != 0 || fileExists(o.stopFile);
}

/// Ends the run when one wait on other ranks lasts `o.watchdog` seconds
/// (a rank stopped, hung or dead: without this, the others wait for ever),
/// and on a Ctrl-C that finds this rank waiting for more than 5 s (it
/// cannot finish its step to stop cleanly). Each names the step and action.
void installWatchdog(Comm &comm, const RunOptions &o, const int64_t &step) {
  if (!comm.distributed())
    return;
  comm.setWaitHook([&comm, &o, &step](double waited, const std::string &what) {
    if (o.watchdog > 0 && waited >= o.watchdog) {
      // The other waiting ranks' watchdogs fire within about a second of
      // this one (they wait in the same step) and answer; who does not is
      // not waiting with them: lost, stopped, or stuck outside a wait.
      std::string silent;
      for (int r : comm.silentRanks(std::min(o.watchdog, 10.0)))
        silent += fmt::format("{}rank {} on host {}",
                              silent.empty() ? "" : ", ", r, comm.hostOf(r));
      std::cerr << fmt::format(
          "[rank {}] error: no progress for {:.0f} s in step {} (at {}){}\n"
          "help: the rank it waits for is stopped, hung or far slower; "
          "--watchdog SECONDS (now {:g}, 0: no limit) sets how long a wait "
          "may last\n",
          comm.rank(), waited, step, what,
          silent.empty() ? "" : fmt::format("; not answering: {}", silent),
          o.watchdog);
      std::cerr.flush();
      comm.abort(1);
    }
    if (waited >= 5 && stopRequested(o)) {
      std::cerr << fmt::format(
          "[rank {}] stopping on Ctrl-C in step {}: waited {:.0f} s (at {}); "
          "the step cannot finish, so no checkpoint is written for it\n",
          comm.rank(), step, waited, what);
      std::cerr.flush();
      comm.abort(130);
    }
  });
}

/// "dir" of "dir/file" ("." when there is no slash).
std::string parentDirectory(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

/// Why this rank cannot write one of the run's outputs (core/io/Files.h):
/// not a file it may replace, in a directory that does not exist, one of
/// the run's inputs (the artifact, the data, the checkpoint it resumes or
/// starts from), or another of its outputs; or "".
std::string outputsProblem(const RunOptions &o, const Artifact &a) {
  // Training data is a file: one that names a directory is the data's fault,
  // not that of an output the directory happens to hold.
  const std::string data = o.dataPath.empty() ? a.dataPath : o.dataPath;
  if (!data.empty() && isDirectory(data))
    return fmt::format("error: training data '{}' is a directory, not a "
                       "file\nhelp: set data.path in the spec (or --data) "
                       "to a file",
                       data);
  std::vector<std::string> inputs = {o.dir, a.specFile};
  for (const std::string &p : {o.dataPath.empty() ? a.dataPath : o.dataPath,
                               o.resume, o.initFrom, a.training.initFrom})
    if (!p.empty())
      inputs.push_back(p);
  // The mock dataset's lengths file, where the run reads it (Samples.cpp).
  if (std::string lengths = packing::mockLengthsFile(a.packing.mock);
      !lengths.empty())
    inputs.push_back(
        packing::mockLengthsPath(lengths, parentDirectory(a.specFile)));
  const std::vector<files::Output> outputs = {{o.jsonLog, "--json-log"},
                                              {o.trace, "--trace"},
                                              {o.dump, "--dump-step"},
                                              {o.costsOut, "--costs-out"},
                                              {o.save, "--save"}};
  // All but --save are files.
  for (auto it = outputs.begin(); it + 1 != outputs.end(); ++it) {
    if (it->path.empty())
      continue;
    if (Error err = files::checkFileOutput(it->path, it->what))
      return "error: " + toString(err);
    if (Error err = files::checkNotAnInput(it->path, it->what, inputs))
      return "error: " + toString(err);
  }
  if (!o.save.empty())
    if (Error err = files::checkDirectoryOutput(o.save, "--save"))
      return "error: " + toString(err);
  if (const std::string &events = a.training.tensorboardDir; !events.empty())
    if (Error err = files::checkDirectoryOutput(events, "--tensorboard-dir"))
      return "error: " + toString(err);
  if (Error err = files::checkOutputsApart(outputs))
    return "error: " + toString(err);
  for (auto it = outputs.begin(); it + 1 != outputs.end(); ++it)
    if (!it->path.empty())
      if (Error err = files::checkOutputDirectoryExists(it->path, it->what))
        return "error: " + toString(err);
  return std::string();
}

/// The kinds of measured costs (MeasuredCosts.h: the reader takes these).
constexpr size_t kNumCostKinds = std::size(kMeasuredKinds);

size_t costKindOf(LayerKind kind) {
  const std::string_view name =
      kind == LayerKind::MtpInput || kind == LayerKind::MtpOutput
          ? "mtp"
          : layerKindName(kind);
  const size_t k = size_t(
      std::find(std::begin(kMeasuredKinds), std::end(kMeasuredKinds), name) -
      std::begin(kMeasuredKinds));
  // Every layer kind is a measured one (a kind missing from kMeasuredKinds
  // would index past the sums).
  if (k == kNumCostKinds)
    throw std::logic_error("layer kind '" + std::string(name) +
                           "' is not in kMeasuredKinds");
  return k;
}

/// The cost model's FLOPs of one call of each kind's passes at the run's
/// shapes (CostModel.h): what measured seconds are scaled by.
std::array<std::array<double, 3>, kNumCostKinds>
costKindFlops(const Artifact &a) {
  const ModelDims dims = dimsOf(a.model);
  CostSettings s;
  s.seqLength = a.training.seqLength;
  s.microBatchSize = a.training.microBatchSize;
  s.bf16 = a.precision == TrainingPrecision::Bf16;
  // At tp > 1 a rank's calls ran its shard of each layer (collectives
  // included): the FLOPs they are scaled by are the shard's.
  s.tp = a.tp;
  s.sequenceParallel = a.sequenceParallel;
  // A linear cross-entropy's input gradients ran its extra GEMM and the
  // weight gradient's: so do the FLOPs they are scaled by.
  for (const StageEntry &stage : a.stages)
    for (const ProgramLayer &l : stage.program.layers)
      if (const auto *head = std::get_if<HeadShape>(&l.shape))
        s.linearCrossEntropy = s.linearCrossEntropy || head->lossChunk > 0;
  auto of = [](const ItemCost &c) {
    return std::array<double, 3>{double(c.forwardFlops),
                                 double(c.backwardInputFlops),
                                 double(c.backwardWeightFlops)};
  };
  std::array<std::array<double, 3>, kNumCostKinds> flops{};
  flops[0] = of(embeddingCost(dims, s));
  const char symbols[] = {'M', '*', '-', 'E'};
  for (size_t k = 0; k < 4; ++k)
    if (auto c = layerCost(symbols[k], dims, s))
      flops[k + 1] = of(*c);
  flops[5] = of(headCost(dims, s));
  flops[6] = of(mtpDepthCost(dims, s));
  // MLA's and DSA's sizes are in their layers' shapes (the manifest's
  // model has none).
  auto latentDims = [&](const MlaShape &m) {
    ModelDims mla = dims;
    mla.numHeads = m.heads;
    setMlaDims(mla, m);
    return mla;
  };
  for (const StageEntry &stage : a.stages)
    for (const ProgramLayer &l : stage.program.layers) {
      if (const auto *m = std::get_if<MlaShape>(&l.shape))
        if (auto c = layerCost('+', latentDims(*m), s))
          flops[7] = of(*c);
      if (const auto *d = std::get_if<DsaShape>(&l.shape)) {
        ModelDims dsa = latentDims(d->mla());
        dsa.dsaIndexerNHeads = d->indexerHeads;
        dsa.dsaIndexerHeadDim = d->indexerHeadDim;
        dsa.dsaIndexerTopk = d->topk;
        if (auto c = layerCost('D', dsa, s))
          flops[8] = of(*c);
      }
    }
  return flops;
}

/// --costs-out: every rank's layer seconds and calls summed by kind and
/// pass; rank 0 writes the mean call of each with its FLOPs.
void writeMeasuredCosts(const RunOptions &o, const Artifact &a,
                        const Trainer &trainer, Comm &comm) {
  // [kind][pass] seconds, then [kind][pass] calls.
  std::vector<double> sums(2 * kNumCostKinds * 3, 0.0);
  for (const Trainer::LayerTimes &t : trainer.layerTimes()) {
    const size_t layers = t.program->layers.size();
    for (size_t l = 0; l < layers; ++l) {
      const LayerKind kind = t.program->layers[l].kind;
      const size_t k = costKindOf(kind);
      for (size_t p = 0; p < 3; ++p) {
        sums[k * 3 + p] += t.seconds[p * layers + l];
        // An MTP depth's input and output are one call of "mtp".
        if (kind != LayerKind::MtpOutput)
          sums[(kNumCostKinds + k) * 3 + p] += double(t.passes[p]);
      }
    }
  }
  const std::vector<double> all = comm.allgather(sums);
  // The link the run's ranks talk over, for plan's transfers (4 MiB: the
  // size of a gradient bucket's piece more than of a hand-off).
  const auto [bytesPerSecond, latency] = comm.measureLink(int64_t(4) << 20);
  if (comm.rank() != 0)
    return;
  const auto flops = costKindFlops(a);
  MeasuredCosts costs;
  costs.target = a.target;
  costs.threads = o.threads;
  costs.tokens = a.training.microBatchSize * a.training.seqLength;
  costs.dtype = a.precision;
  if (bytesPerSecond > 0)
    costs.link = Link{bytesPerSecond, latency};
  for (size_t k = 0; k < kNumCostKinds; ++k) {
    KindTimes times;
    double calls = 0;
    for (size_t p = 0; p < 3; ++p) {
      double seconds = 0, n = 0;
      for (size_t r = 0; r < all.size() / sums.size(); ++r) {
        seconds += all[r * sums.size() + k * 3 + p];
        n += all[r * sums.size() + (kNumCostKinds + k) * 3 + p];
      }
      times.seconds[p] = n > 0 ? seconds / n : 0.0;
      times.flops[p] = flops[k][p];
      calls += n;
    }
    if (calls > 0)
      costs.kinds[kMeasuredKinds[k]] = times;
  }
  if (Error err = files::writeAtomically(o.costsOut, "the measured costs",
                                         measuredCostsJson(costs)))
    throw RuntimeError("error: " + toString(err));
  if (!o.quiet)
    fmt::print("measured costs: {} ({} layer kinds)\n", o.costsOut,
               costs.kinds.size());
}

/// Rank 0 makes --save's directory and holds its lock for the run, so that
/// a second run saving there is refused instead of replacing this one's
/// checkpoints (core/io/DirectoryLock.h); or why it cannot.
std::string lockSaveDirectory(const std::string &save) {
  std::error_code ec;
  std::filesystem::create_directories(save, ec);
  if (ec)
    return fmt::format("error: cannot create the checkpoint directory '{}' "
                       "(--save): {}\nhelp: name a writable directory",
                       save, ec.message());
  if (Error err = files::lockDirectory(
          save, "the checkpoint directory (--save)",
          "wait for that run to end, or save into another directory"))
    return "error: " + toString(err);
  return std::string();
}

/// Refuses, before the first step, outputs that cannot be written: rank
/// 0's words when it found the problem (printed once), else every rank's.
void agreeOnOutputs(const RunOptions &o, const Artifact &artifact, Comm &comm) {
  std::string error = outputsProblem(o, artifact);
  if (error.empty() && comm.rank() == 0 && !o.save.empty())
    error = lockSaveDirectory(o.save);
  std::vector<double> failed = comm.allgather({error.empty() ? 0.0 : 1.0});
  if (failed[0] != 0)
    throw CollectiveError(error);
  agreeAcrossRanks(comm, error, "error: a rank cannot write the run's outputs");
}

/// A resumed run keeps the learning-rate decay end of the run that saved
/// the checkpoint unless this one asks for another (--lr-decay-steps or the
/// spec's training.lr_decay_steps): a longer --steps alone then trains on
/// at min_lr instead of stretching the cosine (which made lr jump).
void keepDecaySchedule(TrainingConfig &t, int64_t checkpointed, bool flag,
                       bool say) {
  const int64_t asked = t.decayEnd();
  if (flag || t.lrDecaySteps > 0 || checkpointed <= 0) {
    if (say && checkpointed > 0 && checkpointed != asked)
      fmt::print("lr schedule: decays by step {} as {} asks (the "
                 "checkpointed run decayed by step {})\n",
                 asked, flag ? "--lr-decay-steps" : "training.lr_decay_steps",
                 checkpointed);
    return;
  }
  t.lrDecaySteps = checkpointed;
  if (say && checkpointed != asked)
    fmt::print("lr schedule: decays by step {} as in the checkpointed run "
               "(this run ends at step {}; --lr-decay-steps N changes it)\n",
               checkpointed, t.steps);
}

/// A resumed run keeps the checkpointed run's learning-rate style, rates,
/// warm-up and AdamW settings (Megatron's --use-checkpoint-opt_param-
/// scheduler), so that it continues the run it resumes, unless
/// --override-opt-param-scheduler asks for this run's; then its decay end
/// (keepDecaySchedule).
void keepOptimizerSettings(TrainingConfig &t, const TrainingConfig &saved,
                           const RunOptions &o, bool say) {
  nlohmann::json mine = optimizerJson(t), theirs = optimizerJson(saved);
  for (nlohmann::json *j : {&mine, &theirs})
    j->erase("lr_decay_steps");
  if (mine != theirs && !o.overrideOptParamScheduler) {
    if (say)
      fmt::print("optimizer settings: as in the checkpointed run ({}); "
                 "--override-opt-param-scheduler uses this run's ({})\n",
                 theirs.dump(), mine.dump());
    const int64_t decaySteps = t.lrDecaySteps;
    readOptimizerSettings(optimizerJson(saved), "the checkpoint", t);
    t.lrDecaySteps = decaySteps;
  }
  keepDecaySchedule(t, saved.lrDecaySteps, o.lrDecaySteps > 0, say);
}

/// A resumed run appends to its log; steps the log holds from `first` on
/// were run after the checkpoint and are replayed now, so they go (said
/// unless quiet) instead of appearing twice.
void dropLoggedStepsFrom(const std::string &path, int64_t first, bool quiet) {
  if (!pathExists(path))
    return;
  std::istringstream in(readFileBounded(path, files::kRunFile));
  std::string kept, line;
  int64_t dropped = 0;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.is_object() && j.contains("step") &&
        j["step"].is_number_integer() && j["step"].get<int64_t>() >= first) {
      ++dropped;
      continue;
    }
    kept += line + "\n";
  }
  if (dropped == 0)
    return;
  writeFileAtomically(path, "--json-log", {{kept.data(), kept.size()}});
  if (!quiet)
    fmt::print("log: {} dropped {} step{} logged after the checkpoint (from "
               "step {}); those steps run again now\n",
               path, dropped, dropped == 1 ? "" : "s", first);
}

/// Where rank `rank` spools its measured actions while it trains: one
/// line per step, so that a trace of any length costs no memory.
std::string traceSpool(const std::string &trace, int rank) {
  return fmt::format("{}.rank{}.jsonl", trace, rank);
}

/// --trace: this rank's spool, opened anew; rank 0 warns when --trace-steps
/// holds none of the steps `first` to `last` this launch runs.
std::ofstream openTraceSpool(const RunOptions &o, Comm &comm, int64_t first,
                             int64_t last) {
  std::ofstream spool;
  if (o.trace.empty())
    return spool;
  if (comm.rank() == 0 && (o.traceFirst > last || o.traceLast < first))
    std::cerr << fmt::format(
        "warning: --trace-steps {}-{} holds none of the steps this run takes "
        "({}-{}); the trace will have no actions\n",
        o.traceFirst, o.traceLast, first, last);
  spool.open(traceSpool(o.trace, comm.rank()), std::ios::trunc);
  return spool;
}

/// Appends step `s`'s spans (Trainer::timings) and the rank's tensor
/// memory at its end to the rank's spool: one line.
void spoolStep(std::ofstream &spool, const Trainer &trainer,
               const StepStats &st, int64_t s) {
  nlohmann::json spans = nlohmann::json::array();
  double end = 0;
  for (const Trainer::Timing &t : trainer.timings()) {
    spans.push_back({t.name, t.category, t.start * 1e6, (t.end - t.start) * 1e6,
                     t.stage, t.microbatch, t.overlapping});
    end = std::max(end, t.end);
  }
  const double mib = 1 << 20;
  spool << nlohmann::json{{"step", s},
                          {"spans", spans},
                          {"memory",
                           {end * 1e6, double(st.liveTensorBytes) / mib,
                            double(st.stepPeakTensorBytes) / mib}}}
               .dump()
        << '\n';
}

/// One spooled step of world rank `rank` into the trace: actions and the
/// optimizer step as complete events on the rank's thread (an action's
/// args name its stage and microbatch, as the simulator's do), the
/// reduction as an async span beside them, the memory as a counter.
void traceSpooledStep(schedule::ChromeTrace &trace, const nlohmann::json &line,
                      int rank, int64_t pp, int64_t dp) {
  const int64_t step = line["step"];
  for (const nlohmann::json &e : line["spans"]) {
    nlohmann::ordered_json args{{"step", step}};
    if (e[4].get<int32_t>() >= 0) {
      args["stage"] = e[4];
      args["microbatch"] = e[5];
    }
    if (e[6].get<bool>())
      trace.asyncSpan(e[0], e[1], pp, dp, rank, e[2], e[3], std::move(args));
    else
      trace.complete(e[0], e[1], pp, dp, e[2], e[3], std::move(args));
  }
  const nlohmann::json &memory = line["memory"];
  trace.counter(fmt::format("tensor memory MiB (rank {})", rank), pp, memory[0],
                {{"in_use", memory[1]}, {"step_peak", memory[2]}});
}

/// Rank 0 streams the Chrome trace (core/schedule/Trace.h) of every rank's
/// spooled actions into `path`: one process per pipeline rank, one thread
/// per data-parallel rank; then removes the spools. The spools must be
/// visible to rank 0 (a shared filesystem, as for checkpoints). Throws
/// RuntimeError on an I/O failure.
void writeChromeTrace(const std::string &path, int ranks, const Artifact &a,
                      const std::vector<double> &memory) {
  const std::string tmp = files::siblingTemporary(path);
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  schedule::ChromeTrace trace(out);
  for (int r = 0; r < ranks; ++r) {
    int64_t pp = int64_t(r) / a.dp, dp = int64_t(r) % a.dp;
    if (dp == 0)
      trace.nameProcess(pp, fmt::format("pp rank {}", pp));
    trace.nameThread(pp, dp, fmt::format("rank {} (dp {})", r, dp));
    std::ifstream in(traceSpool(path, r));
    if (!in)
      throw RuntimeError(
          fmt::format("cannot read '{}' (is the trace's directory shared by "
                      "all ranks?)",
                      traceSpool(path, r)));
    for (std::string line; std::getline(in, line);)
      traceSpooledStep(trace, nlohmann::json::parse(line), r, pp, dp);
  }
  trace.otherData() = {{"source", "hypipe-run"},
                       {"schedule", schedule::scheduleName(a.schedule)},
                       {"pp", a.pp},
                       {"vpp", a.vpp},
                       {"dp", a.dp},
                       {"microbatches", a.microbatches}};
  // Per world rank: [peak tensor MiB, peak RSS MiB].
  nlohmann::json mem = nlohmann::json::array();
  for (size_t r = 0; r + 1 < memory.size(); r += 2)
    mem.push_back({memory[r], memory[r + 1]});
  trace.otherData()["memory_mib"] = mem;
  trace.finish();
  out.flush();
  const bool written = bool(out);
  out.close();
  // fsync before the rename, as every other file hypipe writes.
  if (int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
  if (!written || !out || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw RuntimeError(fmt::format("cannot write '{}' (disk full?)", path));
  }
  for (int r = 0; r < ranks; ++r)
    std::remove(traceSpool(path, r).c_str());
}

/// --profile's table: every rank's step time by kernel class, a column
/// per rank (`byRank` holds kNumKernelClasses values per rank).
void printProfile(const std::vector<double> &byRank, int64_t steps) {
  const size_t n = cpu::kNumKernelClasses, ranks = byRank.size() / n;
  std::vector<double> total(ranks, 0.0);
  for (size_t r = 0; r < ranks; ++r)
    for (size_t c = 0; c < n; ++c)
      total[r] += byRank[r * n + c];
  std::string header = fmt::format("{:<16}", "profile");
  for (size_t r = 0; r < ranks; ++r)
    header += fmt::format("  {:>16}", fmt::format("rank {}", r));
  fmt::print("{}\n", header);
  // Classes in a fixed order; a class no rank spent time in is left out.
  for (size_t c = 0; c < n; ++c) {
    bool any = false;
    for (size_t r = 0; r < ranks; ++r)
      any = any || byRank[r * n + c] > 0;
    if (!any)
      continue;
    std::string row =
        fmt::format("{:<16}", cpu::kernelClassName(cpu::KernelClass(int(c))));
    for (size_t r = 0; r < ranks; ++r)
      row += fmt::format("  {:>8.4f}s {:>5.1f}%", byRank[r * n + c],
                         total[r] > 0 ? 100.0 * byRank[r * n + c] / total[r]
                                      : 0.0);
    fmt::print("{}\n", row);
  }
  std::string sum = fmt::format("{:<16}", fmt::format("{} steps", steps));
  for (size_t r = 0; r < ranks; ++r)
    sum += fmt::format("  {:>8.4f}s {:>5.1f}%", total[r], 100.0);
  fmt::print("{}\n", sum);
}

} // namespace

namespace {

/// The artifact of `o.dir` for this launch: refused unless the launcher
/// started the ranks it was compiled for; the run's overrides applied.
Artifact loadForLaunch(const RunOptions &o, Comm &comm) {
  Artifact artifact;
  onEveryRank(comm, fmt::format("error: cannot load the artifact '{}'", o.dir),
              [&] { artifact = loadArtifact(o.dir); });
  // Megatron-LM's world: tp x pp x dp ranks (tp named when it is not 1).
  const int64_t ranks = artifact.tp * artifact.pp * artifact.dp;
  const std::string grid =
      artifact.tp > 1 ? fmt::format("tp {} x pp {} x dp {}", artifact.tp,
                                    artifact.pp, artifact.dp)
                      : fmt::format("pp {} x dp {}", artifact.pp, artifact.dp);
  if (!comm.distributed() && ranks != 1)
    throw RuntimeError(fmt::format(
        "error: {} was compiled for {} = {} ranks, and this hypipe-run is a "
        "single process\nhelp: mpirun -np {} hypipe-run {} (or: hypipe train "
        "SPEC, which launches it)",
        o.dir, grid, ranks, ranks, o.dir));
  if (comm.size() != ranks)
    throw CollectiveError(fmt::format(
        "error: {} was compiled for {} = {} ranks, but the launcher started "
        "{}\nhelp: mpirun -np {} hypipe-run {} (or recompile with "
        "--pp/--dp/--tp for {} ranks)",
        o.dir, grid, ranks, comm.size(), ranks, o.dir, comm.size()));
  comm.setGrid(artifact.pp, artifact.dp, artifact.tp);
  comm.setExpertGroup(expertReplicas(artifact));
  if (o.comm)
    artifact.comm = *o.comm;
  artifact.savedFp32 = o.savedFp32;
  if (o.steps > 0)
    artifact.training.steps = o.steps;
  if (o.seed >= 0)
    artifact.training.seed = o.seed;
  if (o.lrDecaySteps > 0)
    artifact.training.lrDecaySteps = o.lrDecaySteps;
  if (!o.tensorboardDir.empty())
    artifact.training.tensorboardDir = o.tensorboardDir;
  // One pipeline replica of one stage writes it (tp rank 0 gathering its
  // group's shards).
  if (!o.dump.empty() && ranks != artifact.tp)
    throw CollectiveError("error: --dump-step needs an artifact of one "
                          "pipeline rank and one data-parallel replica\n"
                          "help: recompile with --pp 1 --dp 1");
  agreeOnOutputs(o, artifact, comm);
  return artifact;
}

/// The run's data: a token stream, or samples to pack; with --eval-interval
/// the validation part's stream.
struct DataSources {
  std::unique_ptr<Dataset> stream;
  std::unique_ptr<SampleSource> samples;
  std::unique_ptr<Dataset> validation;
  std::optional<DataSplit> split;
};

/// --split or the manifest's data.split; none when neither gives one.
std::optional<DataSplit> runSplit(const RunOptions &o,
                                  const Artifact &artifact) {
  const std::string &text = o.split.empty() ? artifact.split : o.split;
  if (text.empty())
    return std::nullopt;
  Expected<DataSplit> split = hypipe::parseSplit(text);
  if (!split)
    throw CollectiveError(fmt::format("error: --split '{}': {}\nhelp: {}", text,
                                      split.problem().message,
                                      split.problem().help));
  return std::move(*split);
}

/// Evaluation (docs/runtime.md) runs the validation part's batches through
/// the forward-only programs, which exist for the artifact's microbatch
/// count: packed steps, whose count varies, are not evaluated yet.
void checkEvaluation(const RunOptions &o, const Artifact &artifact,
                     const std::optional<DataSplit> &split) {
  if (o.evalInterval == 0)
    return;
  if (!split || !split->hasPart(SplitPart::Validation))
    throw CollectiveError(fmt::format(
        "error: --eval-interval {} needs a validation part, and {}\nhelp: "
        "give the data a validation weight, e.g. --split 969,30,1 "
        "(Megatron's; data.split in the spec)",
        o.evalInterval,
        split ? fmt::format("--split {} gives it weight 0", split->text)
              : std::string("the run has no --split")));
  if (artifact.packing.enabled)
    throw CollectiveError(
        "error: --eval-interval: packed runs (data.packing) are not evaluated "
        "yet: their microbatch count varies per step, and the artifact holds "
        "forward-only programs for its own count only\nhelp: evaluate an "
        "unpacked artifact of the same model (data.format: indexed, "
        "data.packing: false) from this run's checkpoint");
}

/// Opens the data on every rank; a bad file is said once, with the ranks
/// that found it, instead of once per rank.
DataSources openData(const RunOptions &o, const Artifact &artifact,
                     Comm &comm) {
  const std::string dataPath =
      o.dataPath.empty() ? artifact.dataPath : o.dataPath;
  const std::optional<DataSplit> split = runSplit(o, artifact);
  checkEvaluation(o, artifact, split);
  DataSources data;
  data.split = split;
  // Opening and reading alike: the ranks' own messages say which it was.
  onEveryRank(comm, "error: the training data cannot be used", [&] {
    if (artifact.packing.enabled) {
      SampleOptions so;
      so.format = artifact.dataFormat;
      so.path = dataPath;
      so.mockConfig = artifact.packing.mock;
      so.specDir = parentDirectory(artifact.specFile);
      so.vocab = artifact.model.vocab;
      so.budget = artifact.packing.maxTokens;
      so.truncate = artifact.packing.truncate;
      so.seed = uint64_t(artifact.training.seed);
      data.samples = openSamples(so);
      if (split)
        data.samples->keepPart(*split, SplitPart::Train, dataPath);
      return;
    }
    const auto openPart = [&](SplitPart part) {
      std::unique_ptr<Dataset> stream =
          openDataset(dataPath, artifact.dataFormat,
                      artifact.training.seqLength, artifact.model.vocab);
      if (split)
        stream->keepPart(*split, part, dataPath);
      return stream;
    };
    data.stream = openPart(SplitPart::Train);
    if (o.evalInterval > 0)
      data.validation = openPart(SplitPart::Validation);
  });
  return data;
}

/// The first step to run: after a resumed checkpoint's, or 1 (from the
/// seed's weights or from --init-from's).
int64_t startingStep(const RunOptions &o, Artifact &artifact, Trainer &trainer,
                     bool root) {
  if (!o.resume.empty()) {
    int64_t first = trainer.resume(o.resume) + 1;
    keepOptimizerSettings(artifact.training, trainer.resumedTraining, o,
                          root && !o.quiet);
    return first;
  }
  const std::string &from =
      o.initFrom.empty() ? artifact.training.initFrom : o.initFrom;
  if (!from.empty()) {
    trainer.initFrom(from);
    if (root && !o.quiet)
      fmt::print("initial weights from {}\n", from);
  }
  return 1;
}

/// --json-log, opened on rank 0: appended to after a resume (the steps
/// from `first` on dropped first), else written anew.
std::ofstream openJsonLog(const RunOptions &o, int64_t first, bool root) {
  std::ofstream log;
  if (!root || o.jsonLog.empty())
    return log;
  if (first > 1)
    dropLoggedStepsFrom(o.jsonLog, first, o.quiet);
  log.open(o.jsonLog, first > 1 ? std::ios::app : std::ios::trunc);
  if (!log)
    throw RuntimeError(fmt::format("error: cannot write '{}'\nhelp: check "
                                   "the path",
                                   o.jsonLog));
  return log;
}

void printRunHeader(const RunOptions &o, const Artifact &artifact,
                    const DataSources &data, int64_t first) {
  const int64_t ranks = artifact.pp * artifact.dp;
  std::string batching =
      data.samples
          ? std::string("packed microbatches (count per step varies)")
          : fmt::format("{} microbatches x {} x {} tokens",
                        artifact.microbatches, artifact.training.microBatchSize,
                        artifact.training.seqLength);
  fmt::print("hypipe-run: {} ({}), {} stages on {} rank{} (pp {} x dp "
             "{}), schedule {}, {}, {} threads per rank\n",
             artifact.model.name, artifact.model.pattern, artifact.numStages,
             ranks, ranks > 1 ? "s" : "", artifact.pp, artifact.dp,
             schedule::scheduleName(artifact.schedule), batching, o.threads);
  if (data.samples)
    fmt::print("packing: {}; {} samples per step into microbatches of up "
               "to {} tokens ({} scheduler){}\n",
               data.samples->description(), artifact.packing.globalBatchSize,
               artifact.packing.maxTokens, artifact.packing.scheduler,
               data.samples->truncatedSamples() > 0
                   ? fmt::format(", {} samples truncated to fit",
                                 data.samples->truncatedSamples())
                   : "");
  if (data.split && data.stream)
    fmt::print(
        "split {}: train {} tokens{}\n", data.split->text,
        hypipe::withCommas(data.stream->numTokens()),
        data.validation
            ? fmt::format(", validation {} tokens (every {} steps, {} "
                          "batches)",
                          hypipe::withCommas(data.validation->numTokens()),
                          o.evalInterval, o.evalIters)
            : "");
  if (ranks > 1)
    fmt::print("transport: {} between ranks (--comm)\n",
               schedule::commKindName(artifact.comm));
  if (first > 1)
    fmt::print("resumed from {} at step {}\n", o.resume, first - 1);
  std::fflush(stdout);
}

/// A time left, to the second under an hour: `42s`, `5m07s`, `3h12m`.
std::string durationText(double seconds) {
  const int64_t whole = std::llround(std::max(0.0, seconds));
  if (whole < 60)
    return fmt::format("{}s", whole);
  if (whole < 3600)
    return fmt::format("{}m{:02}s", whole / 60, whole % 60);
  return fmt::format("{}h{:02}m", whole / 3600, whole % 3600 / 60);
}

/// Rank 0's step lines (--log-interval N): the launch's first step, every
/// N-th and the last, each with the mean wall time per step since the line
/// before (Megatron's "elapsed time per iteration": the logging and
/// checkpoints between steps count) and the remaining steps' ETA at that
/// pace; a bar that rewrites itself on a terminal, else a line.
class StepLines {
public:
  StepLines(int64_t interval, int64_t first, int64_t total, bool tty)
      : interval(interval), first(first), total(total), tty(tty),
        lastStep(first - 1), lastTime(std::chrono::steady_clock::now()) {}

  bool due(int64_t s, bool ending) const {
    return s == first || ending || s % interval == 0;
  }

  void print(const StepStats &st, int64_t s, bool ending) {
    const auto time = std::chrono::steady_clock::now();
    const double perStep =
        std::chrono::duration<double>(time - lastTime).count() /
        double(s - lastStep);
    lastStep = s;
    lastTime = time;
    std::string line = fmt::format(
        "step {:>{}}/{} | loss {:.4f} | lr {:.3e} | grad_norm {:.4f} | {} "
        "tokens/s | {:.1f} ms/step | ETA {}",
        s, std::to_string(total).size(), total, st.loss, st.lr, st.gradNorm,
        hypipe::withCommas(std::llround(st.tokensPerSecond)), perStep * 1e3,
        durationText(perStep * double(total - s)));
    if (tty) {
      const int width = 20, done = int(width * s / total);
      fmt::print("\r[{}{}] {}\x1b[K", std::string(done, '#'),
                 std::string(width - done, '.'), line);
      if (ending)
        fmt::print("\n");
    } else {
      fmt::print("{}\n", line);
    }
    std::fflush(stdout);
  }

private:
  const int64_t interval, first, total;
  const bool tty;
  int64_t lastStep;
  std::chrono::steady_clock::time_point lastTime;
};

/// Rank 0 merges every rank's spool into the Chrome trace. The trace is a
/// by-product: failing to write it (a full disk) says so but does not fail
/// a run whose training finished.
void finishTrace(const RunOptions &o, std::ofstream &spool,
                 const Artifact &artifact, Comm &comm,
                 const std::vector<double> &memory) {
  spool.close();
  std::vector<double> spooled = comm.allgather({spool ? 1.0 : 0.0});
  bool complete = std::all_of(spooled.begin(), spooled.end(),
                              [](double ok) { return ok != 0; });
  if (comm.rank() != 0)
    return;
  try {
    if (!complete)
      throw RuntimeError("a rank could not write its part (disk full?)");
    writeChromeTrace(o.trace, comm.size(), artifact, memory);
  } catch (const std::exception &e) {
    for (int r = 0; r < comm.size(); ++r)
      std::remove(traceSpool(o.trace, r).c_str());
    std::cerr << fmt::format("warning: no trace written to '{}': {}; the "
                             "training itself finished\n",
                             o.trace, e.what());
  }
}

/// Every rank's peak tensor memory and peak RSS in MiB, taken before the
/// trace is merged: [tensors, RSS] per world rank, one after another.
std::vector<double> memoryByRank(const Trainer &trainer, Comm &comm) {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return comm.allgather({double(trainer.peakTensorBytes()) / (1 << 20),
                         double(usage.ru_maxrss) / 1024});
}

/// What the run did, summed on rank 0 at its end.
struct RunTotals {
  int64_t first = 1, last = 0, realTokens = 0, paddedTokens = 0;
  double elapsed = 0, firstLoss = 0, lastLoss = 0;
  bool stopped = false;

  void add(const StepStats &st) {
    last = st.step;
    elapsed += st.seconds;
    realTokens += st.tokens;
    paddedTokens += st.paddedTokens;
    if (st.step == first)
      firstLoss = st.loss;
    lastLoss = st.loss;
  }
};

/// Saves step `s` to --save when it is due (every --save-interval steps,
/// and the run's last step, `ending`), then keeps the newest --keep-last.
void saveIfDue(const RunOptions &o, Trainer &trainer, int64_t s, bool ending,
               bool root) {
  if (o.save.empty() ||
      !(ending || (o.saveInterval > 0 && s % o.saveInterval == 0)))
    return;
  trainer.save(o.save, s);
  if (root && o.keepLast > 0)
    for (const std::string &gone : pruneCheckpoints(o.save, o.keepLast))
      if (!o.quiet)
        fmt::print("checkpoint: removed {}/{} (--keep-last {})\n", o.save, gone,
                   o.keepLast);
}

void printSummary(const RunOptions &o, const DataSources &data,
                  const RunTotals &t, const std::vector<double> &memory) {
  if (t.stopped)
    fmt::print("stopped after step {} on request{}\n", t.last,
               o.save.empty() ? "" : fmt::format(" (saved to {})", o.save));
  if (data.stream)
    fmt::print("done: {} steps in {:.2f}s, loss {:.4f} -> {:.4f}, "
               "unigram entropy of the data {:.4f}\n",
               t.last - t.first + 1, t.elapsed, t.firstLoss, t.lastLoss,
               data.stream->unigramEntropy());
  else
    fmt::print("done: {} steps in {:.2f}s, loss {:.4f} -> {:.4f}, {} real "
               "tokens ({:.1f}% of the {} that padding every sample to the "
               "step's longest would compute)\n",
               t.last - t.first + 1, t.elapsed, t.firstLoss, t.lastLoss,
               hypipe::withCommas(t.realTokens),
               100.0 * double(t.realTokens) /
                   double(std::max<int64_t>(1, t.paddedTokens)),
               hypipe::withCommas(t.paddedTokens));
  std::string tensors, rss;
  for (size_t r = 0; r + 1 < memory.size(); r += 2) {
    tensors += fmt::format("{}{:.1f}", r ? " " : "", memory[r]);
    rss += fmt::format("{}{:.0f}", r ? " " : "", memory[r + 1]);
  }
  fmt::print("memory per rank (MiB): tensors {} | peak RSS {}\n", tensors, rss);
}

nlohmann::json stepRecord(const StepStats &st, const Artifact &artifact) {
  nlohmann::json record{
      {"step", st.step},          {"loss", st.loss},
      {"aux_loss", st.auxLoss},   {"lr", st.lr},
      {"grad_norm", st.gradNorm}, {"microbatches", st.microbatches},
      {"tokens", st.tokens},      {"tokens_per_s", st.tokensPerSecond}};
  for (size_t d = 0; d < st.mtpLosses.size(); ++d)
    record[fmt::format("mtp_{}_loss", d + 1)] = st.mtpLosses[d];
  if (!st.mtpLosses.empty())
    record["mtp_loss"] = st.mtpLoss;
  return record;
}

/// The first record of a launch also says what holds for all its steps:
/// the unigram entropy of a token stream, and that the run resumed from the
/// checkpoint of the step before (the loss curve marks it).
void describeLaunch(nlohmann::json &record, const DataSources &data,
                    int64_t first) {
  if (data.stream)
    record["unigram_entropy"] = data.stream->unigramEntropy();
  if (first > 1)
    record["resumed"] = true;
}

/// --eval-interval N: the first validation batch of the evaluation after
/// step `s`, when one is due (every N steps and after the last). As
/// Megatron's validation iterator, each evaluation goes on where the one
/// before stopped: the k-th (from 0) takes batches [k K, (k + 1) K), K =
/// --eval-iters, so a resumed run evaluates on the batches it would have.
std::optional<int64_t> firstValidationBatch(const RunOptions &o, int64_t s,
                                            int64_t total) {
  if (o.evalInterval == 0 || (s % o.evalInterval != 0 && s != total))
    return std::nullopt;
  const int64_t before = (s - 1) / o.evalInterval; // evaluations before s
  return before * o.evalIters;
}

/// Megatron's validation lines, framed by dashes; `belowBar`: after a
/// progress bar the step has not ended with a newline.
void printValidation(int64_t s, double loss, bool belowBar) {
  const std::string line = fmt::format(
      " validation loss at iteration {} | lm loss value: {:.6E} | lm loss "
      "PPL: {:.6E} | ",
      s, loss, tensorboard::perplexity(loss));
  const std::string rule(line.size(), '-');
  // Below a progress bar, which the next step redraws on a line of its own.
  fmt::print("{}{}\n{}\n{}\n", belowBar ? "\n" : "", rule, line, rule);
  std::fflush(stdout);
}

/// The step's end on every rank: rank 0's word on stopping (everyone
/// follows after this step), and the bytes every rank sent and the
/// all-reduce buckets it started in a last backward, summed into `record`.
bool agreeOnStep(Comm &comm, bool stop, const StepStats &st,
                 nlohmann::json &record) {
  const std::vector<double> shared = comm.allgather(
      {stop ? 1.0 : 0.0, double(st.sentBytes), double(st.bucketsInBackward),
       double(st.stepPeakTensorBytes)});
  double sent = 0, early = 0, peak = 0;
  for (size_t r = 0; r + 3 < shared.size(); r += 4) {
    sent += shared[r + 1];
    early += shared[r + 2];
    peak = std::max(peak, shared[r + 3]);
  }
  record["p2p_bytes_sent"] = int64_t(sent);
  record["dp_buckets_in_backward"] = int64_t(early);
  record["peak_tensor_bytes"] = int64_t(peak);
  // Any rank's request (a signal may reach one rank first, or one alone).
  for (size_t r = 0; r < shared.size(); r += 4)
    if (shared[r] != 0)
      return true;
  return false;
}

/// --tensorboard-dir's event file, opened by the rank that writes the JSON
/// log (collective: when it cannot, every rank stops before the first
/// step).
std::unique_ptr<tensorboard::EventWriter>
openTensorBoard(const Artifact &artifact, Comm &comm, bool root) {
  std::unique_ptr<tensorboard::EventWriter> events;
  std::string error;
  if (root && !artifact.training.tensorboardDir.empty()) {
    try {
      events = std::make_unique<tensorboard::EventWriter>(
          artifact.training.tensorboardDir);
    } catch (const RuntimeError &e) {
      error = e.what();
    }
  }
  agreeAcrossRanks(comm, error,
                   "error: the first rank cannot write its TensorBoard events");
  return events;
}

/// A step's record of the JSON log in TensorBoard, under Megatron's tags
/// (tensorboard/EventWriter.h), its validation loss with it where the step
/// was evaluated.
void logToTensorBoard(tensorboard::EventWriter &events,
                      const nlohmann::json &record) {
  events.scalars(
      record["step"].get<int64_t>(),
      {{tensorboard::kLossTag, record["loss"].get<double>()},
       {tensorboard::kLearningRateTag, record["lr"].get<double>()},
       {tensorboard::kGradNormTag, record["grad_norm"].get<double>()},
       {tensorboard::kTokensPerSecondTag, record["tokens_per_s"].get<double>()},
       {tensorboard::kPeakTensorBytesTag,
        record["peak_tensor_bytes"].get<double>()}});
  if (record.contains("validation_loss"))
    events.validationLoss(record["step"].get<int64_t>(),
                          record["validation_loss"].get<double>());
}

} // namespace

int runTraining(const RunOptions &o, Comm &comm) {
  const bool root = comm.rank() == 0;
  Artifact artifact = loadForLaunch(o, comm);
  // Kernel launches return before the GPU has run them: layer times need
  // the cpu target (or a synchronising timer, not written yet).
  if (!o.costsOut.empty() && artifact.target != Target::Cpu)
    throw CollectiveError(
        "error: --costs-out measures the cpu target's layers; this artifact's "
        "target is " +
        std::string(targetName(artifact.target)) +
        "\nhelp: measure with a --target cpu artifact of the spec, or plan "
        "without --costs");
  cpu::setNumThreads(o.threads);
  DataSources data = openData(o, artifact, comm);
  // A save that died half-way left a step directory without index.json:
  // it was never `latest` and nothing can resume from it.
  if (root && !o.save.empty())
    for (const std::string &gone : removeIncompleteSteps(o.save))
      fmt::print("checkpoint: removed the incomplete {}/{} (a save that did "
                 "not finish)\n",
                 o.save, gone);
  Trainer trainer(artifact, comm, {data.stream.get(), data.samples.get()},
                  o.gradBucketMib > 0
                      ? int64_t(o.gradBucketMib * (1 << 20) / sizeof(float))
                      : kDefaultBucketFloats,
                  {data.validation.get(), nullptr});
  RunTotals t;
  t.first = startingStep(o, artifact, trainer, root);
  std::ofstream log = openJsonLog(o, t.first, root);
  std::unique_ptr<tensorboard::EventWriter> events =
      openTensorBoard(artifact, comm, root);
  // mpirun gives ranks a pseudo-terminal even when its own output is a
  // file, so hypipe train says which it wants.
  const bool tty =
      o.progress == "auto" ? isatty(STDOUT_FILENO) != 0 : o.progress == "bar";
  const int64_t total = artifact.training.steps;
  if (root && !o.quiet)
    printRunHeader(o, artifact, data, t.first);
  std::ofstream spool = openTraceSpool(o, comm, t.first, total);
  t.last = t.first - 1;
  StepLines lines(o.logInterval, t.first, total, tty);
  int64_t current = t.first;
  installWatchdog(comm, o, current);
  // --profile: each step's time by kernel class, summed over the steps (the
  // logging and checkpoints between steps are left out).
  std::array<double, cpu::kNumKernelClasses> profile{};
  cpu::setProfiling(o.profile);
  for (int64_t s = t.first; s <= total; ++s) {
    current = s;
    // --costs-out: the steps after the first (its allocations and first
    // touches are not what a step costs), or the only one.
    trainer.measureLayers(!o.costsOut.empty() &&
                          (s > t.first || t.first == total));
    const std::array<double, cpu::kNumKernelClasses> before =
        cpu::profileSeconds();
    // --dump-step: the first step this run takes (step 1, or the one after
    // the checkpoint it resumed from).
    StepStats st = trainer.step(s, s == t.first ? o.dump : "");
    const std::array<double, cpu::kNumKernelClasses> after =
        cpu::profileSeconds();
    for (int c = 0; c < cpu::kNumKernelClasses; ++c)
      profile[c] += after[c] - before[c];
    t.add(st);
    if (spool && s >= o.traceFirst && s <= o.traceLast)
      spoolStep(spool, trainer, st, s);
    nlohmann::json record = stepRecord(st, artifact);
    std::optional<double> validation;
    if (const std::optional<int64_t> first =
            firstValidationBatch(o, s, total)) {
      validation = trainer.evaluate(*first, o.evalIters);
      record["validation_loss"] = *validation;
      record["validation_ppl"] = tensorboard::perplexity(*validation);
    }
    t.stopped = agreeOnStep(
        comm, stopSignal != 0 || (root && fileExists(o.stopFile)), st, record);
    if (log.is_open()) {
      if (s == t.first)
        describeLaunch(record, data, t.first);
      log << record.dump() << "\n" << std::flush;
      // A full disk: the run stops rather than train on without its log.
      if (!log)
        throw RuntimeError(fmt::format(
            "error: cannot write step {} to the JSON log '{}': {}\nhelp: free "
            "space on its disk, or give --json-log a file that can be "
            "written; the checkpoints saved so far are as they were",
            s, o.jsonLog, std::strerror(errno)));
    }
    if (events)
      logToTensorBoard(*events, record);
    bool exiting = t.stopped || (o.exitInterval > 0 && s == o.exitInterval);
    const bool ending = s == total || exiting;
    saveIfDue(o, trainer, s, ending, root);
    if (root && !o.quiet && s == t.first && !o.dump.empty())
      fmt::print("dump: step {} (the run's first) written to {}\n", s, o.dump);
    if (root && !o.quiet && lines.due(s, ending))
      lines.print(st, s, ending);
    if (root && !o.quiet && validation)
      printValidation(s, *validation, tty && !ending);
    if (exiting)
      break;
  }
  cpu::setProfiling(false);
  const std::vector<double> profileByRank =
      o.profile
          ? comm.allgather(std::vector<double>(profile.begin(), profile.end()))
          : std::vector<double>();
  const std::vector<double> memory = memoryByRank(trainer, comm);
  if (!o.trace.empty())
    finishTrace(o, spool, artifact, comm, memory);
  if (!o.costsOut.empty())
    writeMeasuredCosts(o, artifact, trainer, comm);
  if (root) {
    printSummary(o, data, t, memory);
    if (o.profile)
      printProfile(profileByRank, t.last - t.first + 1);
  }
  return t.stopped ? 130 : 0;
}

} // namespace hypipe::rt
