//===- TrainCommand.cpp - `hypipe train` and `hypipe ckpt merge` ----------===//
//
// `hypipe train SPEC` compiles the spec into RUN/artifact (reused while the
// spec, the overrides and this hypipe are unchanged), launches tp x pp x dp
// ranks of hypipe-run with mpirun (one process when the grid is a single rank),
// streams their progress, and afterwards writes RUN/loss.svg and
// RUN/summary.json and prints the summary: losses, tokens/s, the measured
// pipeline bubble next to the simulator's prediction for the measured costs,
// and peak memory per rank next to the estimate.
//
//===----------------------------------------------------------------------===//
#include "conversion/SpecToHybrid.h"
#include "core/io/DirectoryLock.h"
#include "core/io/Files.h"
#include "core/model/CostModel.h"
#include "core/model/SizeBounds.h"
#include "core/report/LossPlot.h"
#include "core/schedule/Render.h"
#include "core/schedule/Simulate.h"
#include "frontend/Spec.h"
#include "runtime/exec/NumberFormat.h"
#include "runtime/formats/Checkpoint.h"
#include "runtime/formats/Interop.h"
#include "runtime/formats/SafeTensors.h"
#include "runtime/kernels/Target.h"
#include "targets/Artifact.h"
#include "tools/common/CliChecks.h"
#include "tools/hypipe/Commands.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

namespace hypipe::cli {

namespace {

struct TrainOptions {
  std::string spec, runDir, jsonLog, data, resume, initFrom, costsOut;
  std::string tensorboardDir;      ///< --tensorboard-dir; empty: the spec's
  std::string launcher = "mpirun"; ///< mpirun or srun (HYPIPE_MPIRUN wins)
  std::string hostfile;      ///< --hostfile: mpirun's, naming hosts and slots
  double startTimeout = 300; ///< --start-timeout: seconds until a rank runs
  std::string comm;          ///< --comm; empty: the spec's parallel.comm
  int gpus = 0;              ///< --gpus: this node's GPUs; 0: those visible
  double gradBucketMib = 0;  ///< --grad-bucket-mib; 0: hypipe-run's default
  bool savedFp32 = false;    ///< --saved-fp32 (hypipe-run's)
  SpecOverrides overrides;
  int64_t saveInterval = 0, keepLast = 0, lrDecaySteps = 0;
  int64_t logInterval = 0; ///< --log-interval; 0: hypipe-run's default (1)
  /// --eval-interval and --eval-iters (Megatron's); 0: no evaluation, and
  /// hypipe-run's default.
  int64_t evalInterval = 0, evalIters = 0;
  std::string traceSteps; ///< --trace-steps A-B; empty: every step
  double watchdog = -1;   ///< -1: hypipe-run's default
  int threads = 0;
  bool noSave = false, overwrite = false;
  bool logScale = false; ///< --log-scale: RUN/loss.svg's loss axes
  /// --override-opt-param-scheduler: on resume, this run's learning-rate
  /// and AdamW settings rather than the checkpoint's.
  bool overrideOptParamScheduler = false;
  bool noTrace = false; ///< --no-trace: no RUN/trace.json, no measured bubble
};

/// A file of the run directory (or a spec or CSV already loaded), read
/// through its bound; "" when it is missing or cannot be read.
std::string readFile(const std::string &path) {
  Expected<std::string> text = files::readBounded(path, files::kRunFile);
  if (!text) {
    (void)text.takeError();
    return std::string();
  }
  return std::move(*text);
}

/// Writes a file of the run directory through a temporary file
/// (core/io/Files.h); a failure is said and gives false.
bool writeRunFile(const std::string &path, std::string_view text) {
  if (auto err = files::writeAtomically(path, "the run's file", text)) {
    std::cerr << "error: " << toString(err) << "\n";
    return false;
  }
  return true;
}

/// `word` as one shell word (quoted only where it needs to be).
std::string shellWord(const std::string &word) {
  if (!word.empty() &&
      word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTU"
                             "VWXYZ0123456789_-./=:,+@%") == std::string::npos)
    return word;
  std::string out = "'";
  for (char c : word)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

/// Every override on the command line as its flag and value, the flags
/// Megatron-LM's names: what a train command changes of the compiled
/// artifact (cacheKey), and what its resume command repeats.
std::vector<std::string> overrideWords(const SpecOverrides &v) {
  // A new override must join the words below (an artifact compiled without
  // it would otherwise be taken for one compiled with it).
  static_assert(sizeof(SpecOverrides) == 968,
                "SpecOverrides changed: add its new field to overrideWords");
  std::vector<std::string> words;
  // fmt's shortest form of a double reads back to the same double.
  auto add = [&](const char *flag, const auto &value) {
    if (value)
      words.insert(words.end(), {flag, fmt::format("{}", *value)});
  };
  add("--pp", v.pp);
  add("--vpp", v.vpp);
  add("--dp", v.dp);
  add("--tensor-model-parallel-size", v.tp);
  if (v.sequenceParallel)
    words.push_back("--sequence-parallel");
  add("--expert-model-parallel-size", v.ep);
  add("--expert-tensor-parallel-size", v.etp);
  add("--moe-token-dispatcher-type", v.moeTokenDispatcher);
  add("--moe-expert-capacity-factor", v.moeExpertCapacityFactor);
  add("--moe-token-drop-policy", v.moeTokenDropPolicy);
  if (v.moePadExpertInputToCapacity)
    words.push_back("--moe-pad-expert-input-to-capacity");
  add("--cross-entropy-fusion-impl", v.crossEntropyFusionImpl);
  add("--cross-entropy-chunk-tokens", v.crossEntropyChunkTokens);
  add("--make-vocab-size-divisible-by", v.makeVocabSizeDivisibleBy);
  add("--microbatches", v.microbatches);
  add("--global-batch-size", v.globalBatchSize);
  add("--micro-batch-size", v.microBatchSize);
  add("--steps", v.steps);
  add("--lr", v.lr);
  add("--min-lr", v.minLr);
  add("--lr-decay-style", v.lrDecayStyle);
  add("--lr-warmup-iters", v.lrWarmupIters);
  add("--lr-warmup-fraction", v.lrWarmupFraction);
  add("--lr-wsd-decay-iters", v.lrWsdDecayIters);
  add("--lr-wsd-decay-style", v.lrWsdDecayStyle);
  add("--weight-decay", v.weightDecay);
  add("--clip-grad", v.clipGrad);
  add("--adam-beta1", v.adamBeta1);
  add("--adam-beta2", v.adamBeta2);
  add("--adam-eps", v.adamEps);
  add("--seed", v.seed);
  add("--schedule", v.schedule);
  add("--target", v.target);
  add("--dtype", v.dtype);
  add("--schedule-csv", v.scheduleCsv);
  add("--split", v.split);
  if (v.distributedOptimizer)
    words.push_back("--distributed-optimizer");
  add("--recompute-granularity", v.recomputeGranularity);
  add("--recompute-method", v.recomputeMethod);
  add("--recompute-num-layers", v.recomputeNumLayers);
  if (v.recomputeModules) {
    words.push_back("--recompute-modules");
    words.insert(words.end(), v.recomputeModules->begin(),
                 v.recomputeModules->end());
  }
  return words;
}

/// The command that continues this run from its last checkpoint: the same
/// spec, run directory and options, with --resume auto.
std::string resumeCommand(const TrainOptions &o, const std::string &run) {
  std::vector<std::string> words = {"hypipe", "train", o.spec, "--run-dir",
                                    run};
  const std::vector<std::string> overrides = overrideWords(o.overrides);
  words.insert(words.end(), overrides.begin(), overrides.end());
  auto addIf = [&](const char *flag, const std::string &value, bool given) {
    if (given)
      words.insert(words.end(), {flag, value});
  };
  addIf("--json-log", o.jsonLog, !o.jsonLog.empty());
  addIf("--launcher", o.launcher, o.launcher != "mpirun");
  addIf("--hostfile", o.hostfile, !o.hostfile.empty());
  addIf("--data", o.data, !o.data.empty());
  addIf("--save-interval", std::to_string(o.saveInterval), o.saveInterval > 0);
  addIf("--keep-last", std::to_string(o.keepLast), o.keepLast > 0);
  addIf("--lr-decay-steps", std::to_string(o.lrDecaySteps), o.lrDecaySteps > 0);
  addIf("--tensorboard-dir", o.tensorboardDir, !o.tensorboardDir.empty());
  addIf("--watchdog", fmt::format("{:g}", o.watchdog), o.watchdog >= 0);
  addIf("--threads", std::to_string(o.threads), o.threads > 0);
  addIf("--comm", o.comm, !o.comm.empty());
  addIf("--grad-bucket-mib", fmt::format("{:g}", o.gradBucketMib),
        o.gradBucketMib > 0);
  addIf("--log-interval", std::to_string(o.logInterval), o.logInterval > 0);
  addIf("--eval-interval", std::to_string(o.evalInterval), o.evalInterval > 0);
  addIf("--eval-iters", std::to_string(o.evalIters), o.evalIters > 0);
  addIf("--trace-steps", o.traceSteps, !o.traceSteps.empty());
  if (o.noTrace)
    words.push_back("--no-trace");
  if (o.savedFp32)
    words.push_back("--saved-fp32");
  words.insert(words.end(), {"--resume", "auto"});
  std::string out;
  for (const std::string &w : words)
    out += (out.empty() ? "" : " ") + shellWord(w);
  return out;
}

/// The step of RUN/ckpt's latest checkpoint, if it has one that loads.
std::optional<int64_t> latestCheckpointStep(const std::string &run) {
  if (::access((run + "/ckpt/latest").c_str(), R_OK) != 0)
    return std::nullopt;
  try {
    return rt::readCheckpointInfo(run + "/ckpt").step;
  } catch (const rt::RuntimeError &) {
    return std::nullopt;
  }
}

/// A resume whose checkpoint is at or past the run's last step has nothing
/// to train: said before the compile and the launch (the ranks said it after
/// both). A checkpoint that does not load is left for the ranks to name.
bool resumeHasStepsLeft(const TrainOptions &o, const ModelSpec &spec,
                        const std::string &run) {
  if (o.resume.empty())
    return true;
  const std::string path = o.resume == "auto" ? run + "/ckpt" : o.resume;
  int64_t step = 0;
  try {
    step = rt::readCheckpointInfo(path).step;
  } catch (const rt::RuntimeError &) {
    return true;
  }
  if (step < spec.training.steps)
    return true;
  std::cerr << fmt::format(
      "error: the checkpoint in '{}' is at step {}, and this run ends at step "
      "{}: nothing is left to train\nhelp: pass --steps N with N > {}\n",
      path, step, spec.training.steps, step);
  return false;
}

/// The run's outputs, checked before anything is compiled or launched: the
/// log and --costs-out may be written as files in directories that exist
/// and are none of the spec's inputs (the spec, its data, its schedule CSV,
/// the weights it starts from); no output is, or lies inside, another or
/// one of the run directory's own (its checkpoints, artifact, lock, trace).
Error checkRunOutputs(const TrainOptions &o, const ModelSpec &spec,
                      const std::string &run, const std::string &log,
                      const std::string &trace) {
  const std::vector<std::string> inputs = specInputs(spec);
  for (auto [path, flag] :
       {std::pair{log, "--json-log"}, {o.costsOut, "--costs-out"}}) {
    if (path.empty())
      continue;
    if (auto err = files::checkFileOutput(path, flag))
      return err;
    if (auto err = files::checkNotAnInput(path, flag, inputs))
      return err;
  }
  // The files the run writes into its directory overwrite no input either.
  const std::vector<files::Output> runFiles = {
      {trace, "the run's trace"},
      {run + "/trace.sim.json", "the run's simulated trace"},
      {run + "/summary.json", "the run's summary"},
      {run + "/loss.svg", "the run's loss plot"}};
  for (const files::Output &f : runFiles)
    if (!f.path.empty())
      if (auto err = files::checkNotAnInput(f.path, f.what, inputs))
        return err;
  std::vector<files::Output> outputs = {
      {o.costsOut, "--costs-out"},
      {log, o.jsonLog.empty() ? "the run's log" : "--json-log"},
      {run + "/ckpt", "the run's checkpoint directory"},
      {run + "/artifact", "the run's artifact"},
      {run + "/.lock", "the run directory's lock"}};
  outputs.insert(outputs.end(), runFiles.begin(), runFiles.end());
  if (auto err = files::checkOutputsApart(outputs))
    return err;
  // hypipe-run writes --costs-out after the last step: a missing directory
  // is found now, not after the whole run trained.
  if (o.costsOut.empty())
    return Error::success();
  return files::checkOutputDirectoryExists(o.costsOut, "--costs-out");
}

/// The first entry of the checkpoint directory `ckpt` that hypipe-run does
/// not write there ("" when there is none): its step_NNNNNNNN directories,
/// `latest`, its lock and its temporary files (.NAME.tmpPID.N) are its own.
std::string foreignCheckpointEntry(const std::string &ckpt) {
  std::error_code ec;
  for (const auto &entry : std::filesystem::directory_iterator(ckpt, ec)) {
    const std::string name = entry.path().filename().string();
    const bool temporary =
        name.front() == '.' && name.find(".tmp") != std::string::npos;
    if (!rt::isStepDirectoryName(name) && !temporary && name != "latest" &&
        name != ".lock")
      return name;
  }
  return "";
}

/// A run directory belongs to one run: a new run (no --resume) into one
/// that holds another run's log or checkpoints is refused unless
/// --overwrite, which removes them first (hypipe's own files alone: a
/// checkpoint directory holding anything else is refused, not emptied).
bool claimRunDirectory(const TrainOptions &o, const std::string &run,
                       const std::string &log) {
  const std::string ckpt = run + "/ckpt";
  bool hasLog = ::access(log.c_str(), F_OK) == 0;
  // A checkpoint directory holding only hypipe-run's lock saved nothing.
  std::error_code ec;
  bool hasCkpt = false;
  for (const auto &entry : std::filesystem::directory_iterator(ckpt, ec))
    hasCkpt = hasCkpt || entry.path().filename() != ".lock";
  if (!o.resume.empty() || (!hasLog && !hasCkpt))
    return true;
  // Another tool's files there are neither a run to continue nor hypipe's
  // to remove.
  if (std::string other = foreignCheckpointEntry(ckpt); !other.empty()) {
    std::cerr << fmt::format(
        "error: '{}' also holds '{}', which hypipe did not write: a new run "
        "would save among it, and --overwrite would delete it\nhelp: move "
        "it out of '{}', or train into another --run-dir\n",
        ckpt, files::excerpt(other), ckpt);
    return false;
  }
  if (!o.overwrite) {
    std::optional<int64_t> step = latestCheckpointStep(run);
    std::cerr << fmt::format(
        "error: '{}' holds an earlier run ({}{}{})\nhelp: continue it with "
        "--resume auto, start over with --overwrite (removes its log and "
        "checkpoints), or train into another --run-dir\n",
        run, hasLog ? "its log " + log : "", hasLog && hasCkpt ? " and " : "",
        hasCkpt ? (step ? fmt::format("checkpoints up to step {}", *step)
                        : std::string("a checkpoint directory"))
                : "");
    return false;
  }
  // A --json-log of the user's is truncated when the run starts, not
  // removed here: only the run directory's own files go.
  for (const std::string &p :
       {o.jsonLog.empty() ? log : std::string(), ckpt, run + "/trace.json",
        run + "/trace.sim.json", run + "/summary.json", run + "/loss.svg"})
    if (!p.empty())
      std::filesystem::remove_all(p, ec);
  fmt::print("run: --overwrite removed the earlier run's log and "
             "checkpoints in {}\n",
             run);
  return true;
}

std::string selfDirectory() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0)
    return ".";
  std::string path(buf, size_t(n));
  return path.substr(0, path.find_last_of('/'));
}

/// Identifies a compiled artifact: the spec's text and path, every
/// override, the schedule CSV it runs and the hypipe binary that compiles
/// it.
std::string cacheKey(const TrainOptions &o, const ModelSpec &loaded) {
  struct stat st {};
  ::stat("/proc/self/exe", &st);
  char real[PATH_MAX];
  std::string spec = ::realpath(o.spec.c_str(), real) ? real : o.spec;
  std::string text = fmt::format(
      "{}\n{}\n{}\nrecompute={}\nschedule_csv={}\n{}\nsplit={}\n{} {}\n", spec,
      readFile(o.spec), fmt::join(overrideWords(o.overrides), " "),
      recomputeFlags(loaded.training.recompute), loaded.parallel.scheduleCsv,
      readFile(loaded.parallel.scheduleCsv), loaded.data.split,
      int64_t(st.st_mtime), int64_t(st.st_size));
  return fmt::format("{:016x}", std::hash<std::string>{}(text));
}

// Ctrl-C or SIGTERM: the first asks the ranks to stop after their step (and
// save), a second one ends them.
volatile sig_atomic_t interrupts = 0;
volatile sig_atomic_t lastStopSignal = SIGINT;
void onInterrupt(int signal) {
  interrupts = interrupts + 1;
  lastStopSignal = signal;
}
/// How the user asked the run to stop, for messages.
const char *stopRequest() {
  return lastStopSignal == SIGTERM ? "SIGTERM" : "Ctrl-C";
}
volatile sig_atomic_t hungUp = 0;
/// A second Ctrl-C (or SIGTERM) ended the ranks at once.
bool ended = false;
/// Ended by Ctrl-C or SIGTERM before any rank had started.
bool endedBeforeStart = false;
void onHangup(int) {
  hungUp = 1;
  interrupts = interrupts + 2;
}

/// Copies the launcher's stderr (`fd`) to ours, leaving out Open MPI's
/// framed notices that only repeat what a rank already said: that a rank
/// exited non-zero (it printed why) and that MPI_Abort was called (the
/// rank printed why first), with its "ORTE_ERROR_LOG" and "sent help
/// message" lines. Everything else — a rank killed by a signal named by
/// mpirun included — passes through, line by line.
/// Lines by which a rank says it is ending the job (hypipe-run's watchdog
/// and Ctrl-C, MPI_Abort's report).
bool saysRankAborts(const std::string &line) {
  return line.find("] error: no progress for ") != std::string::npos ||
         line.find("] stopping on Ctrl-C in step ") != std::string::npos ||
         line.find("MPI_ABORT was invoked") != std::string::npos;
}

void copyLauncherErrors(int fd, const std::function<void()> &onAbort) {
  FILE *in = ::fdopen(fd, "r");
  if (!in)
    return;
  static const char *const kRepeats[] = {"terminated normally, but",
                                         "exited with non-zero status",
                                         "MPI_ABORT was invoked"};
  static const char *const kNoise[] = {"ORTE_ERROR_LOG:",
                                       "has sent help message"};
  // Open MPI's shared-memory transport, when a peer it was reading from is
  // gone ("[host:pid] Read -1, expected 32768, errno = 14"): after a rank
  // ended the job, an echo of that, not a cause.
  static const char *const kAfterAbort[] = {"] Read -1, expected "};
  bool aborted = false;
  auto isFrame = [](const std::string &line) {
    return line.size() > 20 && line.find_first_not_of('-') >= 20;
  };
  auto isNoise = [](const std::string &line) {
    return std::any_of(
        std::begin(kNoise), std::end(kNoise),
        [&](const char *n) { return line.find(n) != std::string::npos; });
  };
  std::string block, line;
  bool inBlock = false;
  char buffer[4096];
  while (::fgets(buffer, sizeof(buffer), in)) {
    line += buffer;
    if (line.back() != '\n' && !::feof(in))
      continue;
    if (saysRankAborts(line)) {
      onAbort();
      aborted = true;
    }
    const bool echo =
        aborted && std::any_of(std::begin(kAfterAbort), std::end(kAfterAbort),
                               [&](const char *n) {
                                 return line.find(n) != std::string::npos;
                               });
    if (isFrame(line)) {
      block += line;
      if (inBlock) {
        bool repeat = false;
        for (const char *r : kRepeats)
          repeat |= block.find(r) != std::string::npos;
        if (!repeat)
          std::fputs(block.c_str(), stderr);
        block.clear();
      }
      inBlock = !inBlock;
    } else if (inBlock) {
      block += line;
    } else if (!isNoise(line) && !echo) {
      std::fputs(line.c_str(), stderr);
    }
    std::fflush(stderr);
    line.clear();
  }
  std::fputs((block + line).c_str(), stderr);
  std::fflush(stderr);
  ::fclose(in);
}

/// Runs `argv` in its own process group (so the terminal's Ctrl-C reaches
/// only us) and returns its exit status (128 + signal when killed).
/// The processes the launcher left behind. mpirun starts its agents (ssh)
/// in sessions of their own, out of reach of a signal to its process group:
/// an ssh that never got an answer outlived it under init. hypipe train is
/// their subreaper (launch()), so they are its children once the launcher is
/// gone: each gets SIGTERM, then SIGKILL after 2 s, and is reaped.
void endOrphans() {
  auto children = [] {
    std::vector<pid_t> out;
    const std::string me = std::to_string(::getpid());
    std::error_code ec;
    for (const auto &entry : std::filesystem::directory_iterator("/proc", ec)) {
      const std::string name = entry.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos)
        continue;
      std::ifstream stat(entry.path() / "stat");
      std::string line;
      std::getline(stat, line);
      // pid (comm) state ppid ...: comm may hold spaces, so from the last ')'.
      std::istringstream rest(line.substr(line.rfind(')') + 1));
      std::string state, ppid;
      rest >> state >> ppid;
      if (ppid == me && state != "Z")
        out.push_back(pid_t(std::stol(name)));
    }
    return out;
  };
  auto reap = [] {
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
  };
  reap();
  std::vector<pid_t> left = children();
  for (pid_t p : left)
    ::kill(p, SIGTERM);
  for (int i = 0; i < 20 && !left.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    reap();
    left = children();
  }
  for (pid_t p : left)
    ::kill(p, SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  reap();
}

/// Runs the launcher and returns its exit status (128 + N when signal N
/// ended it, as a shell says; `*signal` is then N, else 0).
int launch(const std::vector<std::string> &argv, const std::string &stopFile,
           double startTimeout, int *signal) {
  *signal = 0;
  // What the launcher leaves behind becomes ours to end (endOrphans).
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  // Created by rank 0 once every rank has joined (hypipe-run --started-file):
  // until then the launcher may be waiting on a host that never answers.
  const std::string startedFile =
      (std::filesystem::path(stopFile).parent_path() / ".started").string();
  ::unlink(startedFile.c_str());
  auto started = [&] { return ::access(startedFile.c_str(), F_OK) == 0; };
  int errors[2];
  if (::pipe(errors) != 0) {
    std::cerr << "error: cannot create a pipe: " << std::strerror(errno)
              << "\n";
    return 1;
  }
  pid_t child = ::fork();
  if (child < 0) {
    std::cerr << "error: cannot start " << argv[0] << ": "
              << std::strerror(errno) << "\n";
    return 1;
  }
  if (child == 0) {
    ::dup2(errors[1], STDERR_FILENO);
    ::close(errors[0]);
    ::close(errors[1]);
    ::setpgid(0, 0);
    // If hypipe train dies, even by SIGKILL, the launcher gets SIGTERM and
    // takes its ranks with it (mpirun does on SIGTERM).
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() == 1)
      ::_exit(1);
    std::vector<char *> args;
    for (const std::string &a : argv)
      args.push_back(const_cast<char *>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    std::cerr << "error: cannot run '" << argv[0]
              << "': " << std::strerror(errno)
              << "\nhelp: install Open MPI (scripts/setup.sh does), use "
                 "--launcher srun under Slurm, or set HYPIPE_MPIRUN\n";
    ::_exit(127);
  }
  ::close(errors[1]);
  auto copied = std::make_shared<std::atomic<bool>>(false);
  // When a rank ended the job: steady-clock seconds, 0 before.
  auto abortedAt = std::make_shared<std::atomic<double>>(0.0);
  auto seconds = [] {
    return std::chrono::duration<double>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  std::thread copier([fd = errors[0], copied, abortedAt, seconds] {
    copyLauncherErrors(fd, [&] {
      double none = 0.0;
      abortedAt->compare_exchange_strong(none, seconds());
    });
    *copied = true;
  });
  ::setpgid(child, child);
  struct sigaction sa {};
  sa.sa_handler = onInterrupt;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  // The terminal went away: nobody is left to read the progress, so the
  // ranks end now rather than training on unseen (issue: SIGHUP).
  sa.sa_handler = onHangup;
  ::sigaction(SIGHUP, &sa, nullptr);
  int seen = 0, status = 0;
  ended = false;
  // A rank that ended the job (its watchdog, MPI_Abort) normally takes the
  // launcher with it at once; Open MPI 4.1's mpirun instead waits for ever
  // on the daemon of a host that lost its network. After this grace the
  // launcher is ended too (SIGTERM, then SIGKILL).
  constexpr double kAbortGrace = 20;
  bool termSent = false, killSent = false;
  const double launchedAt = seconds();
  while (true) {
    pid_t r = ::waitpid(child, &status, WNOHANG);
    if (r == child)
      break;
    if (r < 0 && errno != EINTR) {
      status = 1 << 8; // exit status 1
      break;
    }
    // No rank joined in time (an ssh that connects and never answers):
    // the launch ends as an aborted one, the whole process group with it.
    if (startTimeout > 0 && !termSent && *abortedAt == 0 && !started() &&
        seconds() - launchedAt > startTimeout) {
      std::cerr << fmt::format(
          "hypipe train: no rank started within {:g} s (--start-timeout): "
          "the launcher is still waiting, for a host that does not answer?; "
          "ending it\n",
          startTimeout);
      *abortedAt = seconds() - kAbortGrace; // SIGTERM now, SIGKILL in 5 s
    }
    const double aborted = *abortedAt;
    if (aborted > 0 && !termSent && seconds() - aborted >= kAbortGrace) {
      if (started())
        std::cerr << fmt::format(
            "hypipe train: a rank ended the job {:.0f} s ago and the "
            "launcher is still waiting (for a host it lost?); ending it\n",
            kAbortGrace);
      ::kill(-child, SIGTERM);
      termSent = true;
    } else if (termSent && !killSent && seconds() - aborted > kAbortGrace + 5) {
      ::kill(-child, SIGKILL);
      killSent = true;
    }
    if (r == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (interrupts > seen) {
      const bool first = seen == 0 && interrupts == 1;
      seen = interrupts;
      if (first && !started()) {
        // No rank to finish a step: the launch itself ends now.
        ended = endedBeforeStart = true;
        std::cerr << "\nhypipe train: no rank has started yet; ending the "
                     "launch\n";
        ::kill(-child, SIGTERM);
        *abortedAt = seconds() - kAbortGrace + 5; // SIGKILL if it lingers
        termSent = true;
      } else if (first) {
        std::ofstream(stopFile) << "stop\n";
        std::cerr << "\nhypipe train: stopping after the current step (the "
                     "ranks save a checkpoint); Ctrl-C again ends them now\n";
      } else {
        ended = true;
        ::kill(-child, SIGTERM);
      }
    }
  }
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  ::signal(SIGHUP, SIG_DFL);
  endOrphans();
  // The ranks inherited the pipe and end with the launcher; should one
  // linger, its last words are not worth hanging for.
  for (int i = 0; i < 50 && !*copied; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (*copied)
    copier.join();
  else
    copier.detach();
  if (WIFSIGNALED(status)) {
    *signal = WTERMSIG(status);
    return 128 + WTERMSIG(status);
  }
  return WEXITSTATUS(status);
}

/// What the trace (hypipe-run --trace) says: the mean cost of each stage's
/// F, B, I and W over the steps after the first (which pays for first-touch
/// page faults), and the bubble of each pipeline rank averaged over the same
/// steps (one step's bubble moves by points on a shared machine).
struct Measured {
  schedule::Costs costs;
  std::vector<double> bubble;
  int64_t firstStep = 1, lastStep = 0;
};

std::optional<Measured> measure(const nlohmann::json &trace,
                                const schedule::Schedule &s) {
  if (trace.is_discarded() || !trace.contains("traceEvents"))
    return std::nullopt;
  Measured m;
  // The steps the trace holds (a resumed run starts past 1); the first of
  // them is left out when there are others.
  int64_t first = std::numeric_limits<int64_t>::max();
  for (const nlohmann::json &e : trace["traceEvents"])
    if (e.value("ph", "") == "X") {
      const int64_t step = e["args"]["step"].get<int64_t>();
      first = std::min(first, step);
      m.lastStep = std::max(m.lastStep, step);
    }
  if (m.lastStep == 0)
    return std::nullopt; // --trace-steps outside the steps run
  m.firstStep = m.lastStep > first ? first + 1 : first;
  int64_t n = s.numStages();
  const schedule::Op computeOps[] = {schedule::Op::F, schedule::Op::B,
                                     schedule::Op::I, schedule::Op::W};
  std::map<schedule::Op, std::vector<double>> sum, count;
  for (schedule::Op k : computeOps) {
    sum[k].assign(n, 0);
    count[k].assign(n, 0);
  }
  // Per counted step: every rank's busy time and the step's span.
  struct StepSpan {
    std::vector<double> busy;
    double begin = 1e300, end = 0;
  };
  std::map<int64_t, StepSpan> steps;
  for (const nlohmann::json &e : trace["traceEvents"]) {
    if (e.value("ph", "") != "X" || e["tid"].get<int64_t>() != 0)
      continue;
    const std::string cat = e["cat"].get<std::string>();
    int64_t step = e["args"]["step"].get<int64_t>();
    int64_t rank = e["pid"].get<int64_t>();
    double ts = e["ts"].get<double>(), dur = e["dur"].get<double>();
    // The schedule's actions and their waits make the step's span; the
    // optimizer step after them is no part of the simulated one.
    std::optional<schedule::Op> op = schedule::parseOpName(cat);
    if (step < m.firstStep || (!op && cat != schedule::kWaitCategory))
      continue;
    StepSpan &span = steps[step];
    span.busy.resize(size_t(s.pp), 0.0);
    span.begin = std::min(span.begin, ts);
    span.end = std::max(span.end, ts + dur);
    if (!op || !schedule::isCompute(*op))
      continue;
    if (rank >= 0 && rank < s.pp)
      span.busy[size_t(rank)] += dur;
    const int64_t stage = e["args"].value("stage", int64_t(-1));
    if (stage < 0 || stage >= n)
      continue;
    sum[*op][stage] += dur;
    count[*op][stage] += 1;
  }
  for (schedule::Op k : computeOps) {
    std::vector<double> mean(n, 0);
    for (int64_t i = 0; i < n; ++i)
      mean[i] = count[k][i] > 0 ? sum[k][i] / count[k][i] / 1000.0 : 0.0;
    (k == schedule::Op::F   ? m.costs.stageF
     : k == schedule::Op::B ? m.costs.stageB
     : k == schedule::Op::I ? m.costs.stageI
                            : m.costs.stageW) = mean;
  }
  m.bubble.assign(size_t(s.pp), 0.0);
  for (const auto &[step, span] : steps)
    for (int64_t r = 0; r < s.pp; ++r)
      m.bubble[size_t(r)] +=
          (1.0 - span.busy[size_t(r)] / std::max(1e-9, span.end - span.begin)) /
          double(steps.size());
  return m;
}

/// Peak tensor memory per pipeline rank: what hypipe-run measured (the
/// trace's otherData.memory_mib, per world rank [tensors, RSS]) next to the
/// estimate from the manifest (rt::rankTensorBytes) for the step with the
/// most microbatches. Printed and returned for summary.json.
nlohmann::json memoryReport(const rt::Artifact &a, const nlohmann::json &trace,
                            int64_t microbatches) {
  nlohmann::json measured;
  if (!trace.is_discarded() && trace.contains("otherData") &&
      trace["otherData"].contains("memory_mib"))
    measured = trace["otherData"]["memory_mib"];
  std::string rows;
  nlohmann::json perRank = nlohmann::json::array();
  for (int64_t r = 0; r < a.pp; ++r) {
    // The trainer's own buffers, walked over the rank's program
    // (rt::rankTensorBytes): parameters with gradients and optimizer state,
    // workspaces, each stage's peak of saved slots and the pooled
    // activation-sized buffers.
    const double est =
        double(rt::rankTensorBytes(a, r, microbatches)) / (1 << 20);
    // The most any of the pipeline rank's dp x tp ranks held (with the
    // distributed optimizer over an expert grid spread over replicas they
    // differ), as the estimate is the most.
    const size_t first = size_t(r * a.dp * a.tp), ranks = size_t(a.dp * a.tp);
    nlohmann::json entry;
    entry["estimate"] = est;
    if (measured.is_array() && first + ranks <= measured.size()) {
      double tensors = 0, rss = 0;
      for (size_t w = first; w < first + ranks; ++w) {
        tensors = std::max(tensors, measured[w][0].get<double>());
        rss = std::max(rss, measured[w][1].get<double>());
      }
      entry["tensors"] = tensors;
      entry["peak_rss"] = rss;
      rows += fmt::format("{}rank {} {:.1f} (estimate {:.1f}, RSS {:.0f})",
                          r ? ", " : "", r, tensors, est, rss);
    } else {
      rows += fmt::format("{}rank {} estimate {:.1f}", r ? ", " : "", r, est);
    }
    perRank.push_back(entry);
  }
  fmt::print("  peak tensor memory per pp rank, MiB (the estimate from the "
             "manifest; the process's peak RSS): {}\n",
             rows);
  return perRank;
}

/// Step 1 of `hypipe train`: compiles `spec` into RUN/artifact unless this
/// hypipe compiled the same spec with the same overrides there already.
bool compileRun(const TrainOptions &o, const ModelSpec &spec,
                const std::string &run, const std::string &artifact) {
  std::string key = cacheKey(o, spec);
  // Cached only while the manifest is there and this hypipe-run reads it
  // (a manifest of an older format means a recompile).
  bool complete = ::access((artifact + "/manifest.json").c_str(), R_OK) == 0;
  if (complete) {
    try {
      (void)rt::loadArtifact(artifact);
    } catch (const rt::RuntimeError &) {
      complete = false;
    }
  }
  if (readFile(run + "/artifact.key") == key && complete) {
    fmt::print("compile: cached ({})\n", artifact);
  } else {
    mlir::MLIRContext context;
    // Errors at a layer print the spec line with a caret under its symbol.
    llvm::SourceMgr sourceMgr;
    mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
    context.printOpOnDiagnostic(false);
    auto module = buildModel(context, spec);
    if (failed(mlir::verify(*module))) {
      std::cerr << "error: internal: the model built from " << o.spec
                << " does not verify (please report this)\n";
      return false;
    }
    ::unlink((run + "/artifact.key").c_str());
    // The run directory's artifact is the run's own: one this hypipe-run
    // cannot read (an older format, a lost manifest) is replaced. A
    // directory holding anything else is left for writeArtifact to refuse,
    // naming what it holds.
    std::error_code ec;
    bool onlyArtifactFiles = true;
    for (const auto &entry : std::filesystem::directory_iterator(artifact, ec))
      onlyArtifactFiles &= entry.path().filename() == "manifest.json" ||
                           entry.path().filename() == "model.mlir";
    if (!complete && onlyArtifactFiles)
      std::filesystem::remove_all(artifact, ec);
    if (auto err = writeArtifact(*module, spec, artifact)) {
      llvm::errs() << toString(std::move(err)) << "\n";
      return false;
    }
    if (!writeRunFile(run + "/artifact.key", key))
      return false;
    fmt::print("compile: {} -> {}\n", o.spec, artifact);
  }
  return true;
}

/// The training data, checked before anything is compiled or launched (the
/// ranks would find a missing file only after both): the file --data or the
/// spec's data.path names (relative to the spec) is there, a regular file,
/// and readable; for indexed data, PREFIX.bin and PREFIX.idx.
bool checkData(const TrainOptions &o, const ModelSpec &spec) {
  const bool given = !o.data.empty();
  if (spec.data.format == DataFormat::Mock ||
      (!given && spec.data.path.empty()))
    return true; // mock data checks its lengths file where it reads it
  std::filesystem::path path = given ? o.data : spec.data.path;
  if (!given && path.is_relative())
    path = std::filesystem::path(spec.file).parent_path() / path;
  const std::string from =
      given ? "--data" : fmt::format("data.path in {}", spec.file);
  std::vector<std::string> files = {path.string()};
  if (spec.data.format == DataFormat::Indexed)
    files = {path.string() + ".bin", path.string() + ".idx"};
  for (const std::string &file : files) {
    struct stat st;
    std::string problem;
    if (::stat(file.c_str(), &st) != 0)
      problem = errno == ENOENT ? "does not exist" : std::strerror(errno);
    else if (S_ISDIR(st.st_mode))
      problem = "is a directory";
    else if (!S_ISREG(st.st_mode))
      problem = "is not a regular file (a pipe or a device cannot be read "
                "by every rank)";
    else if (::access(file.c_str(), R_OK) != 0)
      problem = "cannot be read: " + std::string(std::strerror(errno));
    if (problem.empty())
      continue;
    std::cerr << fmt::format(
        "error: the training data '{}' ({}) {}\nhelp: {}\n", file, from,
        problem,
        spec.data.format == DataFormat::Indexed
            ? "indexed data is a prefix: PREFIX.bin and PREFIX.idx, as "
              "Megatron-LM's preprocess_data.py writes them"
        : given ? "check the path (relative to the working directory)"
                : "check the path (relative to the spec's directory), "
                  "or give --data FILE");
    return false;
  }
  return true;
}

/// A cuda run launched here by mpirun: its ranks against this node's GPUs
/// (--gpus, else those visible). NCCL needs a GPU per rank: refused, saying
/// what works; otherwise ranks beyond the GPUs share them over mpi-staged
/// (said). False after printing the error.
bool checkGpus(const TrainOptions &o, const ModelSpec &spec) {
  if (o.gpus > 0 && spec.training.target != rt::Target::Cuda) {
    std::cerr << fmt::format(
        "error: --gpus {} picks the GPUs of a cuda run, and this one trains "
        "on the {} target\nhelp: drop --gpus, or train on the GPUs with "
        "--target cuda\n",
        o.gpus, rt::targetName(spec.training.target));
    return false;
  }
  if (spec.training.target != rt::Target::Cuda || o.launcher != "mpirun" ||
      std::getenv("HYPIPE_MPIRUN"))
    return true; // on other nodes: the ranks check there
  const int64_t ranks = spec.parallel.ranks();
  const int gpus = o.gpus > 0 ? o.gpus : rt::cudaDeviceCount();
  // --comm (checked against the names when given), else the spec's.
  const schedule::CommKind comm =
      schedule::parseCommKind(o.comm).value_or(spec.parallel.comm);
  if (ranks <= gpus)
    return true;
  // No GPU here and the ranks start here: one message now, not one a rank
  // after the launch.
  if (gpus == 0 && o.hostfile.empty()) {
    std::cerr << "error: the spec trains on the cuda target, and this node "
                 "has no GPU (CUDA sees none"
              << (std::getenv("CUDA_VISIBLE_DEVICES")
                      ? fmt::format("; CUDA_VISIBLE_DEVICES='{}'",
                                    std::getenv("CUDA_VISIBLE_DEVICES"))
                      : std::string())
              << ")\nhelp: run it on a GPU node, or train on the CPU with "
                 "--target cpu\n";
    return false;
  }
  if (comm == schedule::CommKind::Nccl) {
    std::cerr << fmt::format(
        "error: {} = {} ranks over --comm nccl need a GPU each, and this "
        "node has {}{}\nhelp: use --comm mpi-staged (or auto) to share the "
        "GPUs, or run where every rank has a GPU of its own\n",
        spec.parallel.tp > 1
            ? fmt::format("tp {} x pp {} x dp {}", spec.parallel.tp,
                          spec.parallel.pp, spec.parallel.dp)
            : fmt::format("pp {} x dp {}", spec.parallel.pp, spec.parallel.dp),
        ranks, gpus, o.gpus > 0 ? " (--gpus)" : " visible");
    return false;
  }
  if (ranks > 1 && gpus > 0 &&
      (comm == schedule::CommKind::Auto ||
       comm == schedule::CommKind::MpiStaged))
    fmt::print("note: {} ranks share {} GPU{} over mpi-staged\n", ranks, gpus,
               gpus == 1 ? "" : "s");
  return true;
}

struct LaunchResult {
  int status = 0;
  bool stopped = false; ///< ended by Ctrl-C (the stop file), not a failure
  std::string launcher;
  int signal = 0; ///< the signal that ended the launcher itself, or 0
};

/// Step 2 of `hypipe train`: launches tp x pp x dp ranks of hypipe-run on the
/// artifact (mpirun, or HYPIPE_MPIRUN, or one process) and waits for them.
LaunchResult launchRun(const TrainOptions &o, const ModelSpec &spec,
                       const std::string &run, const std::string &artifact,
                       const std::string &log, const std::string &trace) {
  const int64_t ranks = spec.parallel.ranks();
  std::string stopFile = run + "/.stop";
  ::unlink(stopFile.c_str());
  std::vector<std::string> argv;
  if (ranks > 1) {
    if (const char *custom = std::getenv("HYPIPE_MPIRUN")) {
      std::istringstream words(custom);
      for (std::string w; words >> w;)
        argv.push_back(w);
    } else if (o.launcher == "srun") {
      // Inside an allocation (sbatch, salloc) or making one; PMIx is how
      // Open MPI's ranks meet under srun.
      argv = {"srun", "-n", std::to_string(ranks), "--mpi=pmix"};
      if (ranks > int64_t(std::thread::hardware_concurrency()))
        argv.push_back("--overcommit");
    } else {
      argv = {"mpirun", "-np", std::to_string(ranks)};
      if (::geteuid() == 0)
        argv.push_back("--allow-run-as-root");
      // The hosts' slots decide where ranks go; past them mpirun says so.
      if (!o.hostfile.empty())
        argv.insert(argv.end(), {"--hostfile", run + "/hostfile"});
      else if (ranks > int64_t(std::thread::hardware_concurrency()))
        argv.push_back("--oversubscribe");
    }
  }
  argv.push_back(selfDirectory() + "/hypipe-run");
  argv.push_back(artifact);
  argv.push_back("--progress");
  argv.push_back(::isatty(STDOUT_FILENO) ? "bar" : "lines");
  for (const std::string &a :
       {std::string("--json-log"), log, std::string("--stop-file"), stopFile,
        std::string("--started-file"), run + "/.started"})
    argv.push_back(a);
  if (!o.noTrace)
    argv.insert(argv.end(), {"--trace", trace});
  if (!o.traceSteps.empty())
    argv.insert(argv.end(), {"--trace-steps", o.traceSteps});
  if (o.logInterval > 0)
    argv.insert(argv.end(), {"--log-interval", std::to_string(o.logInterval)});
  if (o.evalInterval > 0)
    argv.insert(argv.end(),
                {"--eval-interval", std::to_string(o.evalInterval)});
  if (o.evalIters > 0)
    argv.insert(argv.end(), {"--eval-iters", std::to_string(o.evalIters)});
  if (!o.noSave) {
    argv.push_back("--save");
    argv.push_back(run + "/ckpt");
  }
  if (!o.costsOut.empty()) {
    argv.push_back("--costs-out");
    argv.push_back(o.costsOut);
  }
  if (o.saveInterval > 0) {
    argv.push_back("--save-interval");
    argv.push_back(std::to_string(o.saveInterval));
  }
  if (o.keepLast > 0) {
    argv.push_back("--keep-last");
    argv.push_back(std::to_string(o.keepLast));
  }
  if (o.watchdog >= 0) {
    argv.push_back("--watchdog");
    argv.push_back(fmt::format("{:g}", o.watchdog));
  }
  if (!o.initFrom.empty()) {
    argv.push_back("--init-from");
    argv.push_back(o.initFrom);
  }
  if (o.lrDecaySteps > 0) {
    argv.push_back("--lr-decay-steps");
    argv.push_back(std::to_string(o.lrDecaySteps));
  }
  if (o.overrideOptParamScheduler)
    argv.push_back("--override-opt-param-scheduler");
  if (!o.tensorboardDir.empty()) {
    argv.push_back("--tensorboard-dir");
    argv.push_back(o.tensorboardDir);
  }
  if (!o.resume.empty()) {
    argv.push_back("--resume");
    argv.push_back(o.resume == "auto" ? run + "/ckpt" : o.resume);
  }
  if (!o.data.empty()) {
    argv.push_back("--data");
    argv.push_back(o.data);
  }
  if (o.threads > 0) {
    argv.push_back("--threads");
    argv.push_back(std::to_string(o.threads));
  }
  if (!o.comm.empty()) {
    argv.push_back("--comm");
    argv.push_back(o.comm);
  }
  if (o.gradBucketMib > 0) {
    argv.push_back("--grad-bucket-mib");
    argv.push_back(fmt::format("{:g}", o.gradBucketMib));
  }
  if (o.savedFp32)
    argv.push_back("--saved-fp32");
  fmt::print("launch: {}\n", fmt::join(argv, " "));
  std::fflush(stdout);
  int signal = 0;
  int status = launch(argv, stopFile, o.startTimeout, &signal);
  bool stopped = status == 130 && ::access(stopFile.c_str(), F_OK) == 0;
  if (hungUp)
    status = 128 + SIGHUP;
  ::unlink(stopFile.c_str());
  return {status, stopped, ranks > 1 ? argv[0] : "hypipe-run", signal};
}

/// What the summary reads from the run's JSON log.
struct LoggedRun {
  report::LossCurve curve;
  double tokensPerSecond = 0; ///< the mean of the steps after the first
  /// The most microbatches a step had (packing varies them; 0: not logged).
  int64_t maxMicrobatches = 0;
};

LoggedRun readRunLog(const std::string &log) {
  LoggedRun logged;
  const std::string text = readFile(log);
  logged.curve = report::lossCurveOfLog(text);
  double secondsPerToken = 0;
  int64_t timed = 0, steps = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded())
      continue;
    if (j.contains("microbatches"))
      logged.maxMicrobatches =
          std::max(logged.maxMicrobatches, j["microbatches"].get<int64_t>());
    // Every step has the same tokens: the mean rate is the harmonic mean
    // of the steps' rates.
    if (++steps > 1) {
      secondsPerToken += 1.0 / j["tokens_per_s"].get<double>();
      ++timed;
    }
  }
  logged.tokensPerSecond = timed ? double(timed) / secondsPerToken : 0.0;
  return logged;
}

/// The summary's measurements: the measured bubble (from the trace, unless
/// --no-trace) next to the simulator's for the same programs fed the
/// measured stage costs, written as RUN/trace.sim.json; memory next to its
/// estimate. True when both traces were written.
bool reportMeasurements(const TrainOptions &o, const std::string &run,
                        const std::string &artifact, const std::string &trace,
                        const LoggedRun &logged,
                        nlohmann::ordered_json &summary) {
  if (o.noTrace)
    fmt::print("  bubble: not measured (--no-trace): the measured bubble "
               "needs the trace; train without --no-trace (--trace-steps "
               "A-B keeps it small)\n");
  nlohmann::json traceJson =
      o.noTrace ? nlohmann::json()
                : nlohmann::json::parse(readFile(trace), nullptr, false);
  bool traced = false;
  try {
    rt::Artifact art = rt::loadArtifact(artifact);
    if (std::optional<schedule::Schedule> s = art.asSchedule()) {
      std::optional<Measured> m = measure(traceJson, *s);
      auto sim = schedule::simulate(*s, m ? m->costs : schedule::Costs{});
      if (sim) {
        if (m) {
          traced = writeRunFile(run + "/trace.sim.json",
                                schedule::chromeTrace(*s, *sim));
          summary["bubble"] = {{"steps", {m->firstStep, m->lastStep}},
                               {"measured", m->bubble},
                               {"predicted", sim->bubbleFraction}};
          std::string rows;
          for (int64_t r = 0; r < art.pp; ++r)
            rows +=
                fmt::format("{}rank {} {:.1f}% vs {:.1f}%", r ? ", " : "", r,
                            100 * m->bubble[r], 100 * sim->bubbleFraction[r]);
          fmt::print("  bubble (mean of steps {}-{}, measured vs simulated "
                     "with the measured stage costs): {}\n",
                     m->firstStep, m->lastStep, rows);
          // Said every time: the two differ most where they mean most to
          // a reader (a small model, a short step).
          fmt::print("  (the simulation gives every microbatch its "
                     "stage's mean time and leaves out the transfers' "
                     "and the per-step agreement's waits and the runtime's "
                     "own work between kernels: a small model's steps are "
                     "mostly those)\n");
        }
        if (!m && !o.noTrace)
          fmt::print("  bubble: not measured: {} holds no step{}\n", trace,
                     o.traceSteps.empty()
                         ? std::string()
                         : fmt::format(" (--trace-steps {})", o.traceSteps));
        art.savedFp32 = o.savedFp32; // the run's, for its estimate
        summary["memory_mib"] =
            memoryReport(art, traceJson, logged.maxMicrobatches);
      }
    }
  } catch (const rt::RuntimeError &e) {
    std::cerr << e.what() << "\n";
  }
  return traced;
}

/// Step 3 of `hypipe train`: the summary (losses, throughput, measured
/// bubble next to the simulator's, memory next to its estimate), the loss
/// curve and the simulated trace; returns the exit code.
int summariseRun(const TrainOptions &o, const ModelSpec &spec,
                 const std::string &run, const std::string &artifact,
                 const std::string &log, const std::string &trace,
                 bool stopped) {
  LoggedRun logged = readRunLog(log);
  const auto &losses = logged.curve.points;
  if (losses.empty()) {
    std::cerr << "error: " << log << " has no steps\n";
    return 1;
  }
  nlohmann::ordered_json summary;
  summary["spec"] = o.spec;
  summary["layout"] = {
      {"pp", spec.parallel.pp},
      {"vpp", spec.parallel.vpp},
      {"dp", spec.parallel.dp},
      {"tp", spec.parallel.tp},
      {"sequence_parallel", spec.parallel.sequenceParallel},
      {"schedule", schedule::scheduleName(spec.parallel.schedule)},
      {"microbatches", spec.parallel.microbatches}};
  summary["steps"] = losses.back().first;
  summary["first_loss"] = losses.front().second;
  summary["last_loss"] = losses.back().second;
  summary["tokens_per_s"] = logged.tokensPerSecond;
  const std::optional<double> entropy = logged.curve.unigramEntropy;
  if (entropy)
    summary["unigram_entropy"] = *entropy;
  fmt::print(
      "\nsummary ({}):\n  steps {}..{}: loss {:.4f} -> {:.4f}, mean "
      "{} tokens/s (steps after the first){}\n",
      run, losses.front().first, losses.back().first, losses.front().second,
      losses.back().second, withCommas(std::llround(logged.tokensPerSecond)),
      entropy ? fmt::format("; unigram entropy of the data {:.4f}", *entropy)
              : "");
  const bool traced =
      reportMeasurements(o, run, artifact, trace, logged, summary);
  const ParallelSpec &par = spec.parallel;
  logged.curve.title = fmt::format(
      "{} ({}), {}pp {} vpp {} dp {}, {}", spec.name, spec.pattern.text,
      par.tp > 1
          ? fmt::format("tp {}{} ", par.tp, par.sequenceParallel ? " sp" : "")
          : "",
      par.pp, par.vpp, par.dp, schedule::scheduleName(par.schedule));
  writeRunFile(run + "/loss.svg", report::lossSvg(logged.curve, {o.logScale}));
  writeRunFile(run + "/summary.json", summary.dump(2) + "\n");
  fmt::print("  wrote {0}/loss.svg, {0}/summary.json, {1}{2}{3}\n", run, log,
             traced ? fmt::format(", {0}/trace.json (measured) and "
                                  "{0}/trace.sim.json (simulated)",
                                  run)
                    : "",
             o.noSave ? "" : fmt::format(", checkpoints in {}/ckpt", run));
  if (stopped) {
    if (latestCheckpointStep(run))
      fmt::print("stopped on {}; continue with: {}\n", stopRequest(),
                 resumeCommand(o, run));
    else
      fmt::print("stopped on {} (no checkpoint was saved: --no-save)\n",
                 stopRequest());
    return 130;
  }
  return 0;
}

/// Reads the hostfile, waiting at most 5 s for a pipe or FIFO to be written
/// (a FIFO nobody writes would block for ever), at most 1 MiB.
std::optional<std::string> readHostfile(const std::string &path,
                                        std::string &why) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    why = std::strerror(errno);
    return std::nullopt;
  }
  struct stat st {};
  const bool fifo = ::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
  std::string text;
  constexpr size_t kMost = 1 << 20;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (true) {
    struct pollfd p {
      fd, POLLIN, 0
    };
    int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(
                       deadline - std::chrono::steady_clock::now())
                       .count());
    if (left <= 0 || ::poll(&p, 1, left) == 0) {
      why = "nothing came in 5 s (a FIFO nobody writes?)";
      break;
    }
    char buffer[4096];
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      // A FIFO with no writer yet reads as empty: keep waiting for one.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    if (n < 0) {
      why = std::strerror(errno);
      break;
    }
    if (n == 0 && text.empty() && fifo) {
      // A FIFO whose writer has not come yet reads as at its end.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    if (n == 0) {
      ::close(fd);
      if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
        why = "it names no host";
        return std::nullopt;
      }
      return text;
    }
    text.append(buffer, size_t(n));
    if (text.size() > kMost) {
      why = "it is over 1 MiB, more than a hostfile holds";
      break;
    }
  }
  ::close(fd);
  return std::nullopt;
}

/// --hostfile goes to mpirun: refused with another launcher, and a file
/// mpirun could not read is said here, not in Open MPI's words; its text,
/// read once, goes to `text`.
bool checkHostfile(const TrainOptions &o, std::string &text) {
  if (o.hostfile.empty())
    return true;
  if (std::getenv("HYPIPE_MPIRUN")) {
    std::cerr << "error: --hostfile is for the mpirun hypipe train writes, "
                 "and HYPIPE_MPIRUN gives the whole launch line\nhelp: put "
                 "--hostfile in HYPIPE_MPIRUN, or unset it\n";
    return false;
  }
  if (o.launcher != "mpirun") {
    std::cerr << "error: --hostfile is mpirun's; srun takes its hosts from "
                 "the Slurm allocation\nhelp: drop --hostfile (sbatch -N / "
                 "--nodelist choose the hosts), or use --launcher mpirun\n";
    return false;
  }
  std::string why;
  if (std::optional<std::string> read = readHostfile(o.hostfile, why)) {
    text = std::move(*read);
    return true;
  }
  std::cerr << "error: cannot read the hostfile '" << o.hostfile << "': " << why
            << "\nhelp: give a file of lines 'HOST slots=N' (Open MPI's "
               "hostfile), one per host\n";
  return false;
}

/// A launch that failed: what ended it, and how to resume when a
/// checkpoint can.
int reportFailedRun(const TrainOptions &o, const ModelSpec &spec,
                    const std::string &run, const LaunchResult &launched) {
  std::optional<int64_t> step =
      o.noSave ? std::nullopt : latestCheckpointStep(run);
  // A checkpoint at or past the last step has nothing left to resume:
  // the error above says to raise --steps, and the hint would repeat
  // the command that just failed.
  if (step && *step >= spec.training.steps)
    step.reset();
  std::cerr << fmt::format(
      "error: training failed: {} exited with status {}{}\nhelp: the "
      "messages above name the rank and the cause{}\n",
      launched.launcher, launched.status,
      // An exit status over 128 is a signal only when one ended it
      // (mpirun exits 255 on its own).
      launched.signal ? fmt::format(" (ended by signal {}: {})",
                                    launched.signal, strsignal(launched.signal))
                      : "",
      step ? fmt::format("; resume from the last checkpoint (step {}) "
                         "with: {}",
                         *step, resumeCommand(o, run))
           : "");
  return 1;
}

int runTrain(const TrainOptions &o) {
  if (!o.resume.empty() && o.overwrite) {
    std::cerr << "error: --resume and --overwrite contradict each other: "
                 "--resume continues the run in the run directory, "
                 "--overwrite removes it first\nhelp: drop one of them\n";
    return 2;
  }
  // Read once (a pipe such as `--hostfile <(...)` gives its text once):
  // mpirun gets the copy RUN/hostfile.
  std::string hostfileText;
  if (!checkHostfile(o, hostfileText))
    return 1;
  auto spec = loadSpec(o.spec, o.overrides);
  if (!spec) {
    llvm::errs() << toString(spec.takeError());
    return 1;
  }
  if (!spec->unrunnable.empty()) {
    llvm::errs() << spec->unrunnable;
    return 1;
  }
  // What the ranks would find only after the compile and the launch.
  if (!checkData(o, *spec) || !checkGpus(o, *spec))
    return 1;
  std::string run = o.runDir.empty() ? "runs/" + spec->name : o.runDir;
  std::string artifact = run + "/artifact";
  if (std::error_code ec = llvm::sys::fs::create_directories(run)) {
    std::cerr << "error: cannot create the run directory '" << run
              << "': " << ec.message()
              << "\nhelp: pass --run-dir DIR somewhere writable\n";
    return 1;
  }
  if (!o.hostfile.empty() && !writeRunFile(run + "/hostfile", hostfileText))
    return 1;
  std::string log = o.jsonLog.empty() ? run + "/log.jsonl" : o.jsonLog;
  std::string trace = run + "/trace.json";
  if (auto err = checkRunOutputs(o, *spec, run, log, trace)) {
    std::cerr << "error: " << toString(err) << "\n";
    return 1;
  }

  if (auto err = files::lockDirectory(
          run, "the run directory",
          "wait for that run to end, or train into another --run-dir")) {
    std::cerr << "error: " << toString(err) << "\n";
    return 1;
  }
  if (!claimRunDirectory(o, run, log))
    return 1;
  if (!resumeHasStepsLeft(o, *spec, run) ||
      !compileRun(o, *spec, run, artifact))
    return 1;
  if (o.noTrace) {
    // An earlier launch's traces would pass for this one's.
    std::error_code ec;
    for (const std::string &p : {trace, run + "/trace.sim.json"})
      std::filesystem::remove(p, ec);
  }
  LaunchResult launched = launchRun(o, *spec, run, artifact, log, trace);
  int status = launched.status;
  bool stopped = launched.stopped;
  // Ended on the user's word: say so, and how to go on when one can.
  auto endedBy = [&](const char *how, int code) {
    std::cerr << "hypipe train: " << how;
    if (std::optional<int64_t> step = latestCheckpointStep(run))
      std::cerr << fmt::format("; continue from step {} with: {}", *step,
                               resumeCommand(o, run));
    std::cerr << "\n";
    return code;
  };
  if (hungUp)
    return endedBy("hung up (SIGHUP): the ranks were ended", 128 + SIGHUP);
  if (ended)
    return endedBy(endedBeforeStart
                       ? (lastStopSignal == SIGTERM
                              ? "ended on SIGTERM before any rank started"
                              : "ended on Ctrl-C before any rank started")
                   : lastStopSignal == SIGTERM ? "ended on a second SIGTERM"
                                               : "ended on a second Ctrl-C",
                   130);
  if (status != 0 && !stopped)
    return reportFailedRun(o, *spec, run, launched);

  return summariseRun(o, *spec, run, artifact, log, trace, stopped);
}

} // namespace

void addTrainCommand(CLI::App &app, Runner &run) {
  auto o = std::make_shared<TrainOptions>();
  CLI::App *sub = app.add_subcommand(
      "train", "Compile a spec (cached) and train it on tp x pp x dp ranks "
               "(mpirun), with progress, checkpoints and a summary");
  sub->add_option("spec", o->spec, "model spec (YAML)")->required();
  addOverrideOptions(sub, o->overrides);
  sub->add_option("--run-dir", o->runDir,
                  "where the artifact, log, checkpoints, trace and summary "
                  "go (default: runs/<model name>)");
  sub->add_option("--json-log", o->jsonLog,
                  "one JSON object per step (default: RUN/log.jsonl)");
  sub->add_option("--launcher", o->launcher,
                  "what starts the ranks: mpirun (default) or srun (Slurm, "
                  "--mpi=pmix); HYPIPE_MPIRUN, a whole launch line, wins")
      ->check(CLI::IsMember({"mpirun", "srun"}));
  sub->add_option("--hostfile", o->hostfile,
                  "Open MPI's hostfile ('HOST slots=N' lines): the hosts "
                  "mpirun starts the ranks on, in order (docs/runtime.md, "
                  "\"Several hosts\")");
  sub->add_option("--costs-out", o->costsOut,
                  "write each layer kind's measured time (the steps after "
                  "the first) for `hypipe plan --costs` (cpu target)");
  sub->add_option("--save-interval", o->saveInterval,
                  "checkpoint every N steps (always after the last)")
      ->check(wholeAtLeast(1));
  sub->add_flag("--no-save", o->noSave, "write no checkpoints");
  sub->add_flag("--log-scale", o->logScale,
                "draw RUN/loss.svg's loss and grad-norm axes logarithmic");
  CLI::Option *noTrace = sub->add_flag(
      "--no-trace", o->noTrace,
      "write no RUN/trace.json (the summary then has no measured bubble)");
  sub->add_option("--trace-steps", o->traceSteps,
                  "trace only steps A to B, both included (default: all; "
                  "the measured bubble is their mean)")
      ->check(stepRange())
      ->excludes(noTrace);
  sub->add_option("--log-interval", o->logInterval,
                  "print a step line every N steps, and the first and last "
                  "(Megatron's --log-interval; default 1); the JSON log "
                  "keeps every step")
      ->check(wholeAtLeast(1));
  sub->add_option("--eval-interval", o->evalInterval,
                  "every N steps and after the last, the validation loss of "
                  "--eval-iters batches, forward only (Megatron's; needs a "
                  "validation part in --split)")
      ->check(wholeAtLeast(1));
  sub->add_option("--eval-iters", o->evalIters,
                  "global batches per evaluation (Megatron's; default 100)")
      ->check(wholeAtLeast(1));
  sub->add_option("--keep-last", o->keepLast,
                  "keep only the newest N checkpoints (default: all)")
      ->check(wholeAtLeast(1));
  sub->add_option("--init-from", o->initFrom,
                  "start from these weights (a checkpoint or a `hypipe ckpt "
                  "import` file) with a fresh optimizer: fine-tuning "
                  "(instead of training.init_from)");
  sub->add_option("--tensorboard-dir", o->tensorboardDir,
                  "write TensorBoard event files here (Megatron's flag; "
                  "instead of the spec's training.tensorboard_dir)");
  sub->add_flag("--override-opt-param-scheduler", o->overrideOptParamScheduler,
                "on resume, use this run's learning-rate schedule and AdamW "
                "settings instead of the checkpoint's (Megatron's flag)");
  sub->add_option("--lr-decay-steps,--lr-decay-iters", o->lrDecaySteps,
                  "the step by which the learning rate reaches min_lr "
                  "(default: the spec's training.lr_decay_steps, else the "
                  "last step; a resumed run keeps its checkpoint's)")
      ->check(wholeAtLeast(1));
  sub->add_option("--start-timeout", o->startTimeout,
                  "end the launch when no rank has started this many "
                  "seconds after it (a host whose ssh never answers; "
                  "default 300, 0: no limit)")
      ->check(nonNegativeNumber());
  sub->add_option("--watchdog", o->watchdog,
                  "end the run when one wait on other ranks lasts this many "
                  "seconds (default 600; 0: no limit)")
      ->check(nonNegativeNumber());
  sub->add_flag("--overwrite", o->overwrite,
                "start a new run in a run directory that holds another "
                "run's log and checkpoints, removing them");
  sub->add_option("--resume,--load", o->resume,
                  "continue from a checkpoint ('auto': RUN/ckpt; --load is "
                  "Megatron's name)");
  sub->add_option("--data", o->data, "training data instead of data.path");
  sub->add_option("--threads", o->threads, "CPU threads per rank")
      ->check(wholeBetween(1, kMaxThreads));
  sub->add_option("--comm", o->comm,
                  "how tensors cross ranks: auto, mpi, mpi-staged, cuda-ipc "
                  "or nccl (instead of parallel.comm; docs/runtime.md)")
      ->check(CLI::IsMember({"auto", "mpi", "mpi-staged", "cuda-ipc", "nccl"}));
  sub->add_option(
         "--grad-bucket-mib", o->gradBucketMib,
         "the data-parallel gradient reduction's bucket size in MiB "
         "(Megatron's --ddp-bucket-size; default 16, at least 4 KiB; the "
         "distributed optimizer shards each bucket over the dp ranks)")
      ->check(numberBetween(1.0 / 256, true, 1e6));
  sub->add_flag("--saved-fp32", o->savedFp32,
                "bf16 runs: keep the tensors the backward reads in four "
                "bytes each, not the activations among them in two as "
                "Megatron's --bf16 does (the same losses; for comparison)");
  sub->add_option("--gpus", o->gpus,
                  "the GPUs of this node for a cuda run (default: those "
                  "visible): --comm nccl needs one per rank")
      ->check(wholeBetween(1, ClusterBounds::kMostRanksPerNode));
  sub->callback([o, &run] { run = [o] { return runTrain(*o); }; });
}

namespace {

/// hypipe ckpt merge CHECKPOINT -o FILE.
void addMergeCommand(CLI::App *ckpt, Runner &run) {
  auto path = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  CLI::App *merge = ckpt->add_subcommand(
      "merge", "Write one safetensors file with every parameter (Megatron "
               "names) and the optimizer state of a checkpoint");
  merge
      ->add_option("checkpoint", *path,
                   "a --save directory, or one of its step_N directories")
      ->required();
  merge->add_option("-o,--output", *out, "the merged .safetensors file")
      ->required();
  merge->callback([path, out, &run] {
    run = [path, out] {
      try {
        int64_t n = rt::mergeCheckpoint(*path, *out);
        fmt::print("wrote {} ({} tensors)\n", *out, n);
        return 0;
      } catch (const rt::RuntimeError &e) {
        std::cerr << e.what() << "\n";
        return 1;
      }
    };
  });
}

/// hypipe ckpt export CHECKPOINT -o DIR: a Hugging Face model.
void addExportCommand(CLI::App *ckpt, Runner &run) {
  struct ExportOptions {
    std::string checkpoint, output, format = "hf", artifact, dtype = "fp32";
    double maxShardGiB = 5;
  };
  auto ex = std::make_shared<ExportOptions>();
  CLI::App *exportCmd = ckpt->add_subcommand(
      "export", "Write a checkpoint as a Hugging Face model (config.json, "
                "sharded safetensors, index): NemotronH, or Qwen3-Next for a "
                "model of G layers, DeepSeek-V3 for one of + layers");
  exportCmd
      ->add_option("checkpoint", ex->checkpoint,
                   "a --save directory, one of its step_N directories, or a "
                   "merged file")
      ->required();
  exportCmd->add_option("-o,--output", ex->output, "the model directory")
      ->required();
  exportCmd->add_option("--format", ex->format, "what to write: hf")
      ->check(CLI::IsMember({"hf"}))
      ->default_val("hf");
  exportCmd
      ->add_option("--dtype", ex->dtype,
                   "the tensors' type: fp32 (as trained) or bf16 (rounded to "
                   "the nearest, ties to even; half the bytes)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->default_val("fp32");
  exportCmd->add_option("--artifact", ex->artifact,
                        "the artifact that trained it, for checkpoints that "
                        "do not record their model (older than model_config)");
  exportCmd
      ->add_option("--max-shard-gib", ex->maxShardGiB,
                   "largest safetensors shard in GiB")
      ->check(positiveNumber())
      ->default_val(5);
  exportCmd->callback([ex, &run] {
    run = [ex] {
      try {
        rt::ModelInfo model = rt::checkpointModel(ex->checkpoint, ex->artifact);
        // --dtype is one of the names (checked by CLI11).
        const bool bf16 = parsePrecision(ex->dtype) == TrainingPrecision::Bf16;
        // A bound past what an int64_t counts bounds nothing (converting
        // it would overflow): one shard of everything.
        const double shardBytes = ex->maxShardGiB * double(int64_t(1) << 30);
        rt::ExportResult r = rt::exportHuggingFace(
            ex->checkpoint, model, ex->output,
            shardBytes < 0x1p62 ? int64_t(shardBytes) : int64_t(1) << 62,
            bf16 ? rt::DType::BF16 : rt::DType::F32);
        fmt::print("wrote {}: {}, {} tensors in {} shard{} ({:.1f} "
                   "MiB, {})\n",
                   ex->output, r.architecture, r.tensors, r.files,
                   r.files == 1 ? "" : "s", double(r.bytes) / (1 << 20),
                   bf16 ? "bfloat16" : "float32");
        return 0;
      } catch (const rt::RuntimeError &e) {
        std::cerr << e.what() << "\n";
        return 1;
      }
    };
  });
}

/// hypipe ckpt import INPUT -o FILE.
void addImportCommand(CLI::App *ckpt, Runner &run) {
  auto in = std::make_shared<std::pair<std::string, std::string>>();
  CLI::App *importCmd = ckpt->add_subcommand(
      "import", "Read a Hugging Face NemotronH, Qwen3-Next or DeepSeek-V3 "
                "model or a Megatron-LM state dict (.safetensors) into a "
                "hypipe checkpoint file that "
                "training.init_from starts from");
  importCmd
      ->add_option("input", in->first,
                   "a NemotronH, Qwen3-Next or DeepSeek-V3 directory, or a "
                   ".safetensors state dict")
      ->required();
  importCmd->add_option("-o,--output", in->second, "the checkpoint file")
      ->required();
  importCmd->callback([in, &run] {
    run = [in] {
      try {
        rt::ImportResult r = rt::importCheckpoint(in->first, in->second);
        fmt::print("wrote {} ({} parameters from a {} checkpoint)\n",
                   in->second, r.tensors, r.kind);
        return 0;
      } catch (const rt::RuntimeError &e) {
        std::cerr << e.what() << "\n";
        return 1;
      }
    };
  });
}

} // namespace

void addCheckpointCommand(CLI::App &app, Runner &run) {
  CLI::App *ckpt = app.add_subcommand("ckpt", "Work with checkpoints");
  ckpt->require_subcommand(1);
  addMergeCommand(ckpt, run);
  addExportCommand(ckpt, run);
  addImportCommand(ckpt, run);
}

} // namespace hypipe::cli
