//===- TrainingLoop.h - hypipe-run's loop over training steps -------------===//
//
// Loads the artifact and the data, builds the rank's Trainer, and runs the
// steps: resume, per-step log and progress, checkpoints at the intervals,
// the stop file (hypipe train's Ctrl-C), the trace and the summary. The
// hypipe-run tool is the command line around it.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_EXEC_TRAININGLOOP_H
#define HYPIPE_RUNTIME_EXEC_TRAININGLOOP_H

#include "core/schedule/CommKind.h"
#include "runtime/comm/Comm.h"

#include <csignal>
#include <cstdint>
#include <optional>
#include <string>

namespace hypipe::rt {

/// hypipe-run's options (docs/runtime.md); empty strings and zeros mean
/// "not given".
struct RunOptions {
  std::string dir, dataPath, jsonLog, dump, save, resume, trace, stopFile;
  /// Starting weights (training.init_from, or the flag): parameters only,
  /// from step 1 with fresh optimizer state. Ignored with `resume`.
  std::string initFrom;
  int64_t steps = 0, seed = -1, saveInterval = 0, exitInterval = 0;
  int64_t keepLast = 0;     ///< step directories of `save` kept; 0: all
  int64_t lrDecaySteps = 0; ///< --lr-decay-steps; 0: not given
  /// --override-opt-param-scheduler: a resumed run takes its learning-rate
  /// and AdamW settings from the artifact, not from the checkpoint.
  bool overrideOptParamScheduler = false;
  /// --tensorboard-dir: where rank 0 writes TensorBoard event files
  /// (instead of the artifact's training.tensorboard_dir).
  std::string tensorboardDir;
  /// --log-interval: a step line every N steps, the first and last too.
  int64_t logInterval = 1;
  /// --split: the train, validation and test weights instead of the
  /// manifest's data.split (core/data/Split.h).
  std::string split;
  /// --eval-interval: the validation loss every N steps and after the last
  /// (0: never), over --eval-iters global batches (Megatron's default 100).
  int64_t evalInterval = 0, evalIters = 100;
  /// --trace-steps: the steps `trace` keeps, both included.
  int64_t traceFirst = 1, traceLast = INT64_MAX;
  /// Seconds one wait on other ranks may last before the run ends naming
  /// the stuck action (0: no limit).
  double watchdog = 600;
  int threads = 1;
  bool quiet = false;
  std::string progress = "auto"; ///< bar, lines or auto
  bool profile = false;
  /// Measured layer costs for `hypipe plan --costs` (core/model/
  /// MeasuredCosts.h): every kernel call of the steps after the first
  /// timed, written here by rank 0 (cpu artifacts).
  std::string costsOut;
  /// --comm: the transport instead of the manifest's parallel.comm;
  /// none: the manifest's.
  std::optional<schedule::CommKind> comm;
  /// --grad-bucket-mib: the data-parallel all-reduce's bucket size in MiB
  /// of fp32 gradients; 0: the default (16).
  double gradBucketMib = 0;
  /// --saved-fp32: a bf16 run keeps its saved tensors in four bytes each
  /// (Artifact::savedFp32).
  bool savedFp32 = false;
};

/// The signal that asked this rank to stop after its step (SIGINT or
/// SIGTERM: hypipe-run's handler when no stop file is given, as under
/// srun or a bare mpirun), else 0. Read where the stop file is: a run stops
/// once any rank has it, saving as on the stop file.
extern volatile std::sig_atomic_t stopSignal;

/// Trains as `options` say on this rank of `comm`; returns the exit code
/// (0, or 130 when stopped on request). Throws RuntimeError (this rank
/// alone) or CollectiveError (every rank at once).
int runTraining(const RunOptions &options, Comm &comm);

} // namespace hypipe::rt

#endif
