//===- hypipe-run.cpp - execute a compiled artifact
//------------------------===//
//
// Links no LLVM or MLIR: the artifact, the runtime, OpenBLAS.
//
//===----------------------------------------------------------------------===//

#include "runtime/Artifact.h"
#include "runtime/Data.h"
#include "runtime/NumberFormat.h"
#include "runtime/Trainer.h"
#include "runtime/kernels/cpu/Primitives.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cmath>
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
  return std::max(1u, std::thread::hardware_concurrency());
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
  CLI::App app{"hypipe-run: train the model of a compiled hypipe artifact"};
  std::string dir, dataPath, jsonLog, dump;
  int64_t steps = 0, seed = -1;
  int threads = defaultThreads();
  bool quiet = false;
  app.add_option("artifact", dir, "artifact directory (hypipe compile -o)")
      ->required();
  app.add_option("--data", dataPath,
                 "training text (bytes); default: the spec's data.path");
  app.add_option("--steps", steps, "training steps (default: the spec's)");
  app.add_option("--seed", seed, "seed of weights and data order");
  app.add_option("--threads", threads, "CPU threads (default: all cores)");
  app.add_option("--json-log", jsonLog,
                 "write one JSON object per step to this file");
  app.add_option("--dump-step", dump,
                 "write the first step's parameters, gradients and batch to "
                 "this safetensors file (for reference checks)");
  app.add_flag("-q,--quiet", quiet, "print only the summary");
  bool profile = false;
  app.add_flag("--profile", profile,
               "report the share of step time spent in OpenBLAS GEMMs");
  CLI11_PARSE(app, argc, argv);

  try {
    Artifact artifact = loadArtifact(dir);
    if (artifact.pp * artifact.dp != 1)
      throw RuntimeError(fmt::format(
          "error: {} was compiled for pp {} x dp {} = {} ranks; this "
          "hypipe-run runs a single rank\nhelp: recompile with --pp 1 --dp 1 "
          "(vpp > 1 runs all virtual stages on the one rank)",
          dir, artifact.pp, artifact.dp, artifact.pp * artifact.dp));
    if (steps > 0)
      artifact.training.steps = steps;
    if (seed >= 0)
      artifact.training.seed = seed;
    if (artifact.dataFormat != "text")
      throw RuntimeError(fmt::format(
          "error: data format '{}' is not supported by this hypipe-run\n"
          "help: use data.format: text",
          artifact.dataFormat));
    cpu::setNumThreads(threads);
    TextDataset data(dataPath.empty() ? artifact.dataPath : dataPath,
                     artifact.training.seqLength, artifact.vocab);
    Trainer trainer(artifact, 0, data);

    std::ofstream log;
    if (!jsonLog.empty()) {
      log.open(jsonLog);
      if (!log)
        throw RuntimeError(fmt::format(
            "error: cannot write '{}'\nhelp: check the path", jsonLog));
    }
    const bool tty = isatty(STDOUT_FILENO);
    const int64_t total = artifact.training.steps;
    if (!quiet)
      fmt::print("hypipe-run: {} ({}), {} stages on 1 rank, schedule {}, {} "
                 "microbatches x {} x {} tokens, {} threads\n",
                 artifact.modelName, artifact.pattern, artifact.numStages,
                 artifact.schedule, artifact.microbatches,
                 artifact.training.microBatchSize, artifact.training.seqLength,
                 threads);
    double elapsed = 0, firstLoss = 0, lastLoss = 0;
    for (int64_t s = 1; s <= total; ++s) {
      StepStats st = trainer.step(s, s == 1 ? dump : "");
      elapsed += st.seconds;
      if (s == 1)
        firstLoss = st.loss;
      lastLoss = st.loss;
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
      if (quiet)
        continue;
      std::string line = fmt::format(
          "step {:>{}}/{} | loss {:.4f} | lr {:.3e} | grad_norm {:.4f} | {} "
          "tokens/s",
          s, std::to_string(total).size(), total, st.loss, st.lr, st.gradNorm,
          hypipe::withCommas(std::llround(st.tokensPerSecond)));
      if (tty) {
        int width = 20, done = int(width * s / total);
        double eta = elapsed / double(s) * double(total - s);
        fmt::print("\r[{}{}] {} | ETA {:.0f}s\x1b[K", std::string(done, '#'),
                   std::string(width - done, '.'), line, eta);
        if (s == total)
          fmt::print("\n");
        std::fflush(stdout);
      } else {
        fmt::print("{}\n", line);
      }
    }
    fmt::print("done: {} steps in {:.2f}s, loss {:.4f} -> {:.4f}, byte "
               "unigram entropy {:.4f}\n",
               total, elapsed, firstLoss, lastLoss, data.unigramEntropy());
    if (profile)
      fmt::print("profile: GEMM (OpenBLAS, top-level calls) {:.2f}s = {:.1f}% "
                 "of step time\n",
                 cpu::gemmSeconds(), 100.0 * cpu::gemmSeconds() / elapsed);
  } catch (const RuntimeError &e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
