//===- ScheduleRuntime.h - walk a rank's schedule program, action by action
//===//
//
// As PyTorch's pipelining schedules (schedules.py) run a rank's action list:
// the runtime takes the rank's program for the step's microbatch count and
// hands each action to its stage (Stage.h) in the verified order: F, B, I, W,
// the sends and receives, REDUCE_GRAD to the gradient synchronisation
// (GradientSync.h), and waits for the parameter gather of a stage's first
// forward (Optimizer.h). It times every action for the trace.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_EXEC_SCHEDULERUNTIME_H
#define HYPIPE_RUNTIME_EXEC_SCHEDULERUNTIME_H

#include "runtime/exec/Clock.h"
#include "runtime/exec/GradientSync.h"
#include "runtime/exec/Optimizer.h"
#include "runtime/exec/Stage.h"
#include "runtime/exec/StepBatch.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hypipe::rt {

class Comm;

/// One span of a step, in seconds since the trainer started (for traces):
/// a compute or transfer action, the wait on a posted receive, the
/// data-parallel gradient reduction, the optimizer step.
struct TimedSpan {
  /// An action's is Megatron's notation (schedule::megatronText, as the
  /// simulator's trace names it): `F3.1`, `wait B2.0`.
  std::string name;
  /// schedule::traceCategory of the action (F, B, I, W, SEND_F, RECV_B,
  /// REDUCE_GRAD: the stage's data-parallel reduction started, ...),
  /// schedule::kWaitCategory for the wait on a posted receive,
  /// kDpReductionCategory or kOptimizerCategory.
  const char *category;
  double start, end;
  /// The action's stage and microbatch; -1 for spans of no action.
  int32_t stage = -1, microbatch = -1;
  /// Runs beside the rank's actions instead of between them (the
  /// reduction, from its first bucket's start until the rank saw the last
  /// one done): the trace shows it on a track of its own.
  bool overlapping = false;
};

class ScheduleRuntime {
public:
  ScheduleRuntime(const Artifact &artifact, std::vector<Stage> &stages,
                  ActivationPool &pool, GradientSync &gradSync,
                  AdamWOptimizer &optimizer, Transport &transport, Comm &comm);

  /// The world ranks this rank's program sends to and receives from (a
  /// packed step's program for another microbatch count has the same
  /// peers).
  std::pair<std::vector<int>, std::vector<int>> pipelinePeers();

  /// Spans are timed from now on.
  void startClock() { epoch = steadySeconds(); }
  double secondsSinceStart(double at = steadySeconds()) const {
    return at - epoch;
  }

  /// Runs the rank's program over `batch`'s microbatches: adds the
  /// forwards' losses to `losses` and returns the bytes its sends put on
  /// the wire. The step's spans start anew.
  int64_t run(const StepBatch &batch, StepLosses &losses);
  /// Runs the rank's forward-only program (Artifact::forwardPrograms) over
  /// `batch`'s microbatches, as Megatron evaluates with forward_only=True:
  /// adds the forwards' losses to `losses`; no activation is kept for a
  /// backward, no gradient or optimizer state is touched.
  void runForward(const StepBatch &batch, StepLosses &losses);

  const std::vector<TimedSpan> &timings() const { return spans; }
  /// Adds a span of no action (the reduction, the optimizer step).
  void record(TimedSpan span) { spans.push_back(std::move(span)); }

private:
  /// A rank's program for some microbatch count, with its actions' texts.
  struct Program {
    std::vector<ActionEntry> actions;
    /// PyTorch's text of each action (`1RECV_F0`, with the stage), as the
    /// manifest and messages name it; and its trace name (TimedSpan::name).
    std::vector<std::string> texts, traceNames;
    /// Global stages whose REDUCE_GRAD the program carries.
    std::vector<int32_t> reduceGradStages;
  };
  /// This rank's program for `microbatches` microbatches.
  const Program &programFor(int64_t microbatches);
  /// `actions` with their texts, formatted once rather than in every step.
  Program describe(std::vector<ActionEntry> actions) const;
  /// Runs `program` over `stepBatch` from start to end.
  void runProgram(const Program &program, const StepBatch &stepBatch,
                  StepTensors &tensors, StepLosses &losses);
  size_t localStage(int64_t stage) const;

  StepTensors startProgram(const Program &program, const StepBatch &batch);
  void runAction(const Program &program, size_t i, StepTensors &t,
                 StepLosses &losses);
  void dispatch(const ActionEntry &a, StepTensors &t, StepLosses &losses);
  void backward(const ActionEntry &a, StepTensors &t);
  void finishProgram(StepTensors &t);

  const Artifact &artifact;
  std::vector<Stage> &stages;
  ActivationPool &pool;
  GradientSync &gradSync;
  AdamWOptimizer &optimizer;
  Transport &transport;
  Comm &comm;
  std::map<int64_t, Program> programs; ///< by microbatch count
  std::optional<Program> forwardProgram;
  bool forwardOnly = false;         ///< while runForward runs
  const StepBatch *batch = nullptr; ///< while a step runs
  /// Per local stage, this step: B or W actions done, and whether the
  /// program starts its data-parallel reduction at its REDUCE_GRAD
  /// (otherwise it starts in the last backward).
  std::vector<int64_t> backwardsDone;
  std::vector<bool> reducedByProgram;
  std::vector<TimedSpan> spans;
  double epoch = 0;
};

} // namespace hypipe::rt

#endif
