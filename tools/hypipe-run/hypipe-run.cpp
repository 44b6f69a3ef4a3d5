//===- hypipe-run.cpp - execute a compiled artifact -----------------------===//
//
// Links no LLVM or MLIR: the artifact, the runtime, OpenBLAS. This file is
// the command line; the training loop is runtime/exec/TrainingLoop.cpp.
//
//===----------------------------------------------------------------------===//

#include "core/model/SizeBounds.h"
#include "runtime/comm/Comm.h"
#include "runtime/exec/TrainingLoop.h"
#include "runtime/formats/Artifact.h"
#include "runtime/kernels/cpu/Primitives.h"
#include "tools/Version.h"
#include "tools/common/CliChecks.h"
#include "tools/common/CliErrors.h"

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
#include <new>
#include <thread>
#include <tuple>

using namespace hypipe::rt;
using namespace hypipe::cli;

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

/// Sets what libgomp and OpenBLAS read only when they load, unless the user
/// set it: the OpenMP wait policy and OpenBLAS's core type
/// (cpu::setOpenBlasEnvironment, for a CPU it does not recognise). True when
/// something was set, so the process must start again to apply it.
///
/// Passive waiting: OpenMP threads that spin between the kernels' parallel
/// loops hold their cores while the rank communicates or runs serial work,
/// and other ranks on the node may need them; sleeping costs a wake-up per
/// loop instead (measured in bench/results/train.md).
bool needsRestart() {
  bool restart = false;
  if (!std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    restart = true;
  }
  if (cpu::setOpenBlasEnvironment())
    restart = true;
  return restart;
}

/// `traceSteps` receives --trace-steps' text, parsed after the command line.
void addRunOptions(CLI::App &app, RunOptions &options,
                   std::string &traceSteps) {
  app.add_option("artifact", options.dir,
                 "artifact directory (hypipe compile -o)")
      ->required();
  app.add_option("--data", options.dataPath,
                 "training text (bytes); default: the spec's data.path");
  app.add_option("--steps,--train-iters", options.steps,
                 "training steps (default: the spec's)");
  app.add_option("--seed", options.seed, "seed of weights and data order");
  app.add_option("--threads", options.threads,
                 "CPU threads per rank (default: the node's cores / ranks "
                 "on the node)")
      ->check(wholeBetween(1, hypipe::kMaxThreads));
  app.add_option("--json-log", options.jsonLog,
                 "write one JSON object per step to this file");
  app.add_option("--dump-step", options.dump,
                 "write the first step this run takes (step 1, or the step "
                 "after the checkpoint it resumes) to this safetensors file: "
                 "its parameters, gradients and batch (for reference "
                 "checks; one rank)");
  app.add_option("--save", options.save,
                 "checkpoint directory: a step_N directory per save and "
                 "'latest'");
  app.add_option("--save-interval", options.saveInterval,
                 "save every N steps (default: only after the last step)")
      ->check(wholeAtLeast(1));
  app.add_option("--tensorboard-dir", options.tensorboardDir,
                 "write TensorBoard event files here (Megatron's flag; "
                 "instead of the spec's training.tensorboard_dir): loss, "
                 "learning rate, grad norm, tokens/s, peak tensor bytes");
  app.add_flag("--override-opt-param-scheduler",
               options.overrideOptParamScheduler,
               "on resume, use this artifact's learning-rate schedule and "
               "AdamW settings instead of the checkpoint's (Megatron's flag)");
  app.add_option("--lr-decay-steps,--lr-decay-iters", options.lrDecaySteps,
                 "the step by which the learning rate reaches min_lr "
                 "(Megatron's --lr-decay-iters; default: the spec's, else "
                 "the last step; on resume: the checkpointed run's)")
      ->check(wholeAtLeast(1));
  app.add_option("--watchdog", options.watchdog,
                 "end the run when one wait on other ranks lasts this many "
                 "seconds, naming the step and action (default 600; 0: no "
                 "limit)")
      ->check(nonNegativeNumber());
  app.add_option("--keep-last", options.keepLast,
                 "keep only the newest N step directories of --save "
                 "(default: all)")
      ->check(wholeAtLeast(1));
  app.add_option("--exit-interval", options.exitInterval,
                 "stop after step N (saving first when --save is given)")
      ->check(wholeAtLeast(1));
  app.add_option("--resume,--load", options.resume,
                 "continue from a checkpoint: a --save directory, a step_N "
                 "directory or a merged file (any pp/vpp/schedule)");
  app.add_option("--init-from", options.initFrom,
                 "start from these weights (a checkpoint or `hypipe ckpt "
                 "import` file; fresh optimizer, step 1): fine-tuning; "
                 "instead of training.init_from");
  CLI::Option *trace = app.add_option(
      "--trace", options.trace,
      "write a Chrome trace of every rank's actions to this file");
  app.add_option("--trace-steps", traceSteps,
                 "trace only steps A to B, both included (default: all)")
      ->check(stepRange())
      ->needs(trace);
  app.add_option("--log-interval", options.logInterval,
                 "print a step line every N steps, and the first and last "
                 "(Megatron's --log-interval; default 1); --json-log keeps "
                 "every step")
      ->check(wholeAtLeast(1));
  app.add_option("--split", options.split,
                 "train, validation and test weights over the data's "
                 "documents, e.g. 969,30,1 (Megatron's --split; default: the "
                 "spec's data.split)");
  app.add_option("--eval-interval", options.evalInterval,
                 "every N steps and after the last, the validation loss of "
                 "--eval-iters global batches, forward only (Megatron's)")
      ->check(wholeAtLeast(1));
  app.add_option("--eval-iters", options.evalIters,
                 "global batches per evaluation (Megatron's; default 100)")
      ->check(wholeAtLeast(1));
  app.add_option("--stop-file", options.stopFile,
                 "stop cleanly (after the current step, saving) once this "
                 "file exists (hypipe train uses it for Ctrl-C)");
  app.add_flag("-q,--quiet", options.quiet, "print only the summary");
  app.add_option("--progress", options.progress,
                 "bar (one updating line), lines (a line per step) or auto "
                 "(bar on a terminal)")
      ->check(CLI::IsMember({"auto", "bar", "lines"}));
  app.add_flag("--profile", options.profile,
               "report the share of step time spent in OpenBLAS GEMMs");
  app.add_option(
         "--grad-bucket-mib", options.gradBucketMib,
         "the data-parallel gradient reduction's bucket size in MiB "
         "(Megatron's --ddp-bucket-size; default 16, at least 4 KiB; the "
         "distributed optimizer shards each bucket over the dp ranks)")
      ->check(numberBetween(1.0 / 256, true, 1e6));
  app.add_option_function<std::string>(
         "--comm",
         [&options](const std::string &name) {
           options.comm =
               hypipe::schedule::parseCommKind(name); // a member, checked
         },
         "how tensors cross ranks: auto, mpi, mpi-staged, cuda-ipc or nccl "
         "(instead of the manifest's parallel.comm)")
      ->check(CLI::IsMember({"auto", "mpi", "mpi-staged", "cuda-ipc", "nccl"}));
  app.add_flag("--saved-fp32", options.savedFp32,
               "bf16 artifacts: keep the tensors the backward reads in four "
               "bytes each, not the activations among them in two as "
               "Megatron's --bf16 does (the same losses; for comparison)");
  app.add_option("--costs-out", options.costsOut,
                 "time every layer of the steps after the first and write "
                 "the measured costs that `hypipe plan --costs` reads (cpu "
                 "artifacts)");
}

} // namespace

/// SIGINT or SIGTERM on a run without a stop file (srun, a bare mpirun, one
/// process): the first stops the run after its step, saving; a second ends
/// it at once, as the signal would have.
extern "C" void stopOnSignal(int signal) {
  if (hypipe::rt::stopSignal != 0) {
    std::signal(signal, SIG_DFL);
    std::raise(signal);
    return;
  }
  hypipe::rt::stopSignal = signal;
}

int main(int argc, char **argv) {
  if (needsRestart())
    execv("/proc/self/exe", argv);
  // A full disk or a file-size limit fails the write (and the checkpoint is
  // refused cleanly) instead of killing the process.
  std::signal(SIGXFSZ, SIG_IGN);
  Comm comm(&argc, &argv);

  CLI::App app{"hypipe-run: train the model of a compiled hypipe artifact "
               "(one process, or every rank under mpirun/srun)"};
  app.set_version_flag("--version", "hypipe-run " HYPIPE_VERSION
                                    " (git " HYPIPE_GIT_REVISION ")");
  RunOptions options;
  options.threads = defaultThreads();
  std::string traceSteps;
  addRunOptions(app, options, traceSteps);
  // hypipe train's: rank 0 creates it once every rank has joined (MPI is
  // up), so a launch that never gets there can be told and ended.
  std::string startedFile;
  app.add_option("--started-file", startedFile)->group("");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    // --help and --version succeed; a usage error exits 2, as in hypipe.
    if (comm.rank() == 0)
      return reportParseError(app, e);
    return e.get_exit_code() == 0 ? 0 : 2;
  }
  if (auto steps = parseStepRange(traceSteps))
    std::tie(options.traceFirst, options.traceLast) = *steps;
  // hypipe train asks through the stop file, and ends the ranks at once with
  // SIGTERM on a second Ctrl-C: its ranks keep the signals' default.
  if (options.stopFile.empty()) {
    std::signal(SIGINT, stopOnSignal);
    std::signal(SIGTERM, stopOnSignal);
  }

  // An error raised by this rank alone: said with its rank, and the others,
  // which may wait for it forever, stopped.
  auto failAlone = [&comm](const std::string &text) {
    if (comm.distributed())
      std::cerr << "[rank " << comm.rank() << "] ";
    std::cerr << text << "\n";
    std::cerr.flush();
    if (comm.distributed())
      comm.abort(1);
    return 1;
  };
  // A backstop, not the way errors are reported: every input is checked
  // where it is read, and what reaches it is a bug.
  auto backstop = [&failAlone](const std::exception &e) {
    return failAlone(fmt::format(
        "error: {}\nhelp: this is a bug in hypipe; please report it",
        e.what()));
  };
  const bool root = comm.rank() == 0;
  if (root && !startedFile.empty())
    std::ofstream(startedFile) << "started\n";
  try {
    return runTraining(options, comm);
  } catch (const CollectiveError &e) {
    if (root)
      std::cerr << e.what() << "\n";
    return 1;
  } catch (const std::runtime_error &e) {
    // RuntimeError, or a CUDA or cuBLAS failure inside a stage.
    return failAlone(e.what());
  } catch (const std::bad_alloc &e) {
    // The machine (or the process's limit) ran out; a size no allocation
    // can have (std::bad_array_new_length) is a bug, for the backstop.
    if (dynamic_cast<const std::bad_array_new_length *>(&e))
      return backstop(e);
    return failAlone(
        "error: out of memory: this rank could not allocate what its stages "
        "need\nhelp: `hypipe explain SPEC` estimates the memory per rank; "
        "lower micro_batch_size, seq_length or "
        "data.max_tokens_per_microbatch, recompute activations, or spread the "
        "model over more ranks (pp, tp)");
  } catch (const std::exception &e) {
    return backstop(e);
  }
}
