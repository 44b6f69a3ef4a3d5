//===- hypipe-run.cpp - execute a compiled artifact
//------------------------===//
//
// Links no LLVM or MLIR: the artifact, the runtime, OpenBLAS.
//
//===----------------------------------------------------------------------===//

#include "runtime/Artifact.h"
#include "runtime/Comm.h"
#include "runtime/Data.h"
#include "runtime/NumberFormat.h"
#include "runtime/SafeTensors.h"
#include "runtime/Trainer.h"
#include "runtime/kernels/cpu/Primitives.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

using namespace hypipe::rt;

namespace {

int defaultThreads() {
  if (const char *env = std::getenv("OMP_NUM_THREADS"))
    if (int n = std::atoi(env); n > 0)
      return n;
  // Ranks on one node share its cores.
  int local = 1;
  for (const char *var : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                          "SLURM_NTASKS_PER_NODE"})
    if (const char *env = std::getenv(var))
      if (int n = std::atoi(env); n > 0) {
        local = n;
        break;
      }
  return std::max(1, int(std::thread::hardware_concurrency()) / local);
}

/// Chrome trace (chrome://tracing, Perfetto) of every rank's actions:
/// one process per pipeline rank, one thread per data-parallel rank.
std::string chromeTrace(const std::vector<std::string> &perRank,
                        const Artifact &a, const std::vector<double> &memory) {
  nlohmann::ordered_json events = nlohmann::ordered_json::array();
  for (size_t r = 0; r < perRank.size(); ++r) {
    int64_t pp = int64_t(r) / a.dp, dp = int64_t(r) % a.dp;
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", pp},
                      {"args", {{"name", fmt::format("pp rank {}", pp)}}}});
    events.push_back(
        {{"name", "thread_name"},
         {"ph", "M"},
         {"pid", pp},
         {"tid", dp},
         {"args", {{"name", fmt::format("rank {} (dp {})", r, dp)}}}});
    for (const nlohmann::json &e : nlohmann::json::parse(perRank[r])) {
      nlohmann::ordered_json ev = {{"name", e[0]}, {"cat", e[1]},
                                   {"ph", "X"},    {"pid", pp},
                                   {"tid", dp},    {"ts", e[2]},
                                   {"dur", e[3]},  {"args", {{"step", e[4]}}}};
      events.push_back(std::move(ev));
    }
  }
  nlohmann::ordered_json trace;
  trace["traceEvents"] = std::move(events);
  trace["displayTimeUnit"] = "ms";
  trace["otherData"] = {{"source", "hypipe-run"},
                        {"schedule", a.schedule},
                        {"pp", a.pp},
                        {"vpp", a.vpp},
                        {"dp", a.dp},
                        {"microbatches", a.microbatches}};
  // Per world rank: [peak tensor MiB, peak RSS MiB].
  nlohmann::json mem = nlohmann::json::array();
  for (size_t r = 0; r + 1 < memory.size(); r += 2)
    mem.push_back({memory[r], memory[r + 1]});
  trace["otherData"]["memory_mib"] = mem;
  return trace.dump() + "\n";
}

bool fileExists(const std::string &path) {
  return !path.empty() && ::access(path.c_str(), F_OK) == 0;
}

} // namespace

int main(int argc, char **argv) {
  // OpenMP threads that spin between the kernels' parallel loops starve
  // OpenBLAS's own threads (measured: 10x slower steps on 2 cores). libgomp
  // reads its policy when it loads, so set it and start again.
  if (!std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execv("/proc/self/exe", argv);
  }
  // A full disk or a file-size limit fails the write (and the checkpoint is
  // refused cleanly) instead of killing the process.
  std::signal(SIGXFSZ, SIG_IGN);
  Comm comm(&argc, &argv);

  CLI::App app{"hypipe-run: train the model of a compiled hypipe artifact "
               "(one process, or every rank under mpirun/srun)"};
  std::string dir, dataPath, jsonLog, dump, save, resume, trace, stopFile;
  int64_t steps = 0, seed = -1, saveInterval = 0, exitInterval = 0;
  int threads = defaultThreads();
  bool quiet = false;
  app.add_option("artifact", dir, "artifact directory (hypipe compile -o)")
      ->required();
  app.add_option("--data", dataPath,
                 "training text (bytes); default: the spec's data.path");
  app.add_option("--steps", steps, "training steps (default: the spec's)");
  app.add_option("--seed", seed, "seed of weights and data order");
  app.add_option("--threads", threads,
                 "CPU threads per rank (default: the node's cores / ranks "
                 "on the node)");
  app.add_option("--json-log", jsonLog,
                 "write one JSON object per step to this file");
  app.add_option("--dump-step", dump,
                 "write the first step's parameters, gradients and batch to "
                 "this safetensors file (for reference checks; one rank)");
  app.add_option("--save", save,
                 "checkpoint directory: a step_N directory per save and "
                 "'latest'");
  app.add_option("--save-interval", saveInterval,
                 "save every N steps (default: only after the last step)");
  app.add_option("--exit-interval", exitInterval,
                 "stop after step N (saving first when --save is given)");
  app.add_option("--resume", resume,
                 "continue from a checkpoint: a --save directory, a step_N "
                 "directory or a merged file (any pp/vpp/schedule)");
  app.add_option("--trace", trace,
                 "write a Chrome trace of every rank's actions to this file");
  app.add_option("--stop-file", stopFile,
                 "stop cleanly (after the current step, saving) once this "
                 "file exists (hypipe train uses it for Ctrl-C)");
  app.add_flag("-q,--quiet", quiet, "print only the summary");
  std::string progress = "auto";
  app.add_option("--progress", progress,
                 "bar (one updating line), lines (a line per step) or auto "
                 "(bar on a terminal)")
      ->check(CLI::IsMember({"auto", "bar", "lines"}));
  bool profile = false;
  app.add_flag("--profile", profile,
               "report the share of step time spent in OpenBLAS GEMMs");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    int code = comm.rank() == 0 ? app.exit(e) : (e.get_exit_code() != 0);
    return code;
  }

  const bool root = comm.rank() == 0;
  try {
    Artifact artifact = loadArtifact(dir);
    const int64_t ranks = artifact.pp * artifact.dp;
    if (!comm.distributed() && ranks != 1)
      throw RuntimeError(fmt::format(
          "error: {} was compiled for pp {} x dp {} = {} ranks, and this "
          "hypipe-run is a single process\nhelp: mpirun -np {} hypipe-run {} "
          "(or: hypipe train SPEC, which launches it)",
          dir, artifact.pp, artifact.dp, ranks, ranks, dir));
    if (comm.size() != ranks)
      throw CollectiveError(fmt::format(
          "error: {} was compiled for pp {} x dp {} = {} ranks, but the "
          "launcher started {}\nhelp: mpirun -np {} hypipe-run {} (or "
          "recompile with --pp/--dp for {} ranks)",
          dir, artifact.pp, artifact.dp, ranks, comm.size(), ranks, dir,
          comm.size()));
    comm.setGrid(artifact.pp, artifact.dp);
    if (steps > 0)
      artifact.training.steps = steps;
    if (seed >= 0)
      artifact.training.seed = seed;
    if (!dump.empty() && ranks != 1)
      throw CollectiveError("error: --dump-step needs a single-rank artifact\n"
                            "help: recompile with --pp 1 --dp 1");
    cpu::setNumThreads(threads);
    std::unique_ptr<Dataset> dataset = openDataset(
        dataPath.empty() ? artifact.dataPath : dataPath, artifact.dataFormat,
        artifact.training.seqLength, artifact.vocab);
    const Dataset &data = *dataset;
    Trainer trainer(artifact, comm, data);
    int64_t first = 1;
    if (!resume.empty())
      first = trainer.resume(resume) + 1;

    std::ofstream log;
    if (root && !jsonLog.empty()) {
      log.open(jsonLog, first > 1 ? std::ios::app : std::ios::trunc);
      if (!log)
        throw RuntimeError(fmt::format(
            "error: cannot write '{}'\nhelp: check the path", jsonLog));
    }
    // mpirun gives ranks a pseudo-terminal even when its own output is a
    // file, so hypipe train says which it wants.
    const bool tty =
        progress == "auto" ? isatty(STDOUT_FILENO) != 0 : progress == "bar";
    const int64_t total = artifact.training.steps;
    if (root && !quiet) {
      fmt::print("hypipe-run: {} ({}), {} stages on {} rank{} (pp {} x dp "
                 "{}), schedule {}, {} microbatches x {} x {} tokens, {} "
                 "threads per rank\n",
                 artifact.modelName, artifact.pattern, artifact.numStages,
                 ranks, ranks > 1 ? "s" : "", artifact.pp, artifact.dp,
                 artifact.schedule, artifact.microbatches,
                 artifact.training.microBatchSize, artifact.training.seqLength,
                 threads);
      if (first > 1)
        fmt::print("resumed from {} at step {}\n", resume, first - 1);
      std::fflush(stdout);
    }
    double elapsed = 0, firstLoss = 0, lastLoss = 0;
    nlohmann::json traceEvents = nlohmann::json::array();
    int64_t last = first - 1;
    bool stopped = false;
    for (int64_t s = first; s <= total; ++s) {
      StepStats st = trainer.step(s, s == 1 ? dump : "");
      last = s;
      elapsed += st.seconds;
      if (s == first)
        firstLoss = st.loss;
      lastLoss = st.loss;
      if (!trace.empty())
        for (const Trainer::Timing &t : trainer.timings())
          traceEvents.push_back({t.name, std::string(1, t.kind), t.start * 1e6,
                                 (t.end - t.start) * 1e6, s});
      if (log)
        log << nlohmann::json{{"step", st.step},
                              {"loss", st.loss},
                              {"aux_loss", st.auxLoss},
                              {"lr", st.lr},
                              {"grad_norm", st.gradNorm},
                              {"tokens_per_s", st.tokensPerSecond}}
                   .dump()
            << "\n"
            << std::flush;
      // Rank 0 decides whether to stop; everyone follows after this step.
      std::vector<double> stop =
          comm.allgather({root && fileExists(stopFile) ? 1.0 : 0.0});
      stopped = stop[0] != 0;
      bool exiting = stopped || (exitInterval > 0 && s == exitInterval);
      if (!save.empty() && (s == total || exiting ||
                            (saveInterval > 0 && s % saveInterval == 0)))
        trainer.save(save, s);
      if (root && !quiet) {
        std::string line = fmt::format(
            "step {:>{}}/{} | loss {:.4f} | lr {:.3e} | grad_norm {:.4f} | {} "
            "tokens/s",
            s, std::to_string(total).size(), total, st.loss, st.lr, st.gradNorm,
            hypipe::withCommas(std::llround(st.tokensPerSecond)));
        if (tty) {
          int width = 20, done = int(width * s / total);
          double eta = elapsed / double(s - first + 1) * double(total - s);
          fmt::print("\r[{}{}] {} | ETA {:.0f}s\x1b[K", std::string(done, '#'),
                     std::string(width - done, '.'), line, eta);
          if (s == total || exiting)
            fmt::print("\n");
        } else {
          fmt::print("{}\n", line);
        }
        std::fflush(stdout);
      }
      if (exiting)
        break;
    }
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    std::vector<double> memory =
        comm.allgather({double(trainer.peakTensorBytes()) / (1 << 20),
                        double(usage.ru_maxrss) / 1024});
    if (!trace.empty()) {
      std::vector<std::string> all = comm.gatherToRoot(traceEvents.dump());
      if (root) {
        std::string text = chromeTrace(all, artifact, memory);
        writeFileAtomically(trace, {{text.data(), text.size()}});
      }
    }
    if (root) {
      if (stopped)
        fmt::print("stopped after step {} on request{}\n", last,
                   save.empty() ? "" : fmt::format(" (saved to {})", save));
      fmt::print("done: {} steps in {:.2f}s, loss {:.4f} -> {:.4f}, "
                 "unigram entropy of the data {:.4f}\n",
                 last - first + 1, elapsed, firstLoss, lastLoss,
                 data.unigramEntropy());
      std::string tensors, rss;
      for (size_t r = 0; r + 1 < memory.size(); r += 2) {
        tensors += fmt::format("{}{:.1f}", r ? " " : "", memory[r]);
        rss += fmt::format("{}{:.0f}", r ? " " : "", memory[r + 1]);
      }
      fmt::print("memory per rank (MiB): tensors {} | peak RSS {}\n", tensors,
                 rss);
      if (profile)
        fmt::print(
            "profile: GEMM (OpenBLAS, top-level calls) {:.2f}s = {:.1f}% "
            "of step time\n",
            cpu::gemmSeconds(), 100.0 * cpu::gemmSeconds() / elapsed);
    }
    return stopped ? 130 : 0;
  } catch (const CollectiveError &e) {
    if (root)
      std::cerr << e.what() << "\n";
    return 1;
  } catch (const RuntimeError &e) {
    // Raised by this rank alone: the others may wait for it forever.
    if (comm.distributed())
      std::cerr << "[rank " << comm.rank() << "] ";
    std::cerr << e.what() << "\n";
    std::cerr.flush();
    if (comm.distributed())
      comm.abort(1);
    return 1;
  }
}
