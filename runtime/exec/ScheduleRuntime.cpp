//===- ScheduleRuntime.cpp - walk a rank's schedule program ---------------===//

#include "runtime/exec/ScheduleRuntime.h"

#include "core/schedule/Schedule.h"
#include "runtime/comm/Comm.h"

#include <fmt/format.h>

#include <set>

namespace hypipe::rt {

ScheduleRuntime::ScheduleRuntime(const Artifact &artifact,
                                 std::vector<Stage> &stages,
                                 ActivationPool &pool, GradientSync &gradSync,
                                 AdamWOptimizer &optimizer,
                                 Transport &transport, Comm &comm)
    : artifact(artifact), stages(stages), pool(pool), gradSync(gradSync),
      optimizer(optimizer), transport(transport), comm(comm),
      backwardsDone(stages.size(), 0), reducedByProgram(stages.size(), false) {}

const ScheduleRuntime::Program &
ScheduleRuntime::programFor(int64_t microbatches) {
  auto it = programs.find(microbatches);
  if (it != programs.end())
    return it->second;
  std::vector<ActionEntry> actions;
  try {
    // Every rank looks up the same count in the same artifact, so a
    // missing one is collective.
    // NCCL matches messages by their order on a link, not by tag.
    actions = rankProgram(artifact, comm.ppRank(), microbatches,
                          transport.matchesByOrder());
  } catch (const RuntimeError &e) {
    throw CollectiveError(e.what());
  }
  return programs.emplace(microbatches, describe(std::move(actions)))
      .first->second;
}

ScheduleRuntime::Program
ScheduleRuntime::describe(std::vector<ActionEntry> actions) const {
  Program p;
  p.actions = std::move(actions);
  const schedule::Placement placement =
      schedule::placementOf(artifact.schedule);
  for (const ActionEntry &a : p.actions) {
    p.texts.push_back(schedule::pytorchText(a));
    p.traceNames.push_back(schedule::megatronText(a, placement, artifact.pp));
    if (a.op == schedule::Op::ReduceGrad)
      p.reduceGradStages.push_back(a.stage);
  }
  return p;
}

std::pair<std::vector<int>, std::vector<int>> ScheduleRuntime::pipelinePeers() {
  std::set<int> sendTo, receiveFrom;
  for (const ActionEntry &a : programFor(artifact.microbatches).actions) {
    if (a.op == schedule::Op::SendF || a.op == schedule::Op::SendB)
      sendTo.insert(comm.worldRankOf(a.peer));
    if (a.op == schedule::Op::RecvF || a.op == schedule::Op::RecvB)
      receiveFrom.insert(comm.worldRankOf(a.peer));
  }
  return {{sendTo.begin(), sendTo.end()},
          {receiveFrom.begin(), receiveFrom.end()}};
}

size_t ScheduleRuntime::localStage(int64_t stage) const {
  for (size_t i = 0; i < stages.size(); ++i)
    if (stages[i].index() == stage)
      return i;
  throw RuntimeError(fmt::format(
      "error: rank {}'s program names stage {}, which runs on another rank\n"
      "help: the artifact is corrupt; recompile it",
      comm.ppRank(), stage));
}

StepTensors ScheduleRuntime::startProgram(const Program &program,
                                          const StepBatch &batch) {
  const TrainingConfig &t = artifact.training;
  const int64_t hidden = artifact.stages[0].hidden;
  StepTensors tensors;
  tensors.microbatches = batch.microbatches();
  tensors.activation = t.microBatchSize * t.seqLength * hidden;
  for (int64_t mb = 0; mb < tensors.microbatches; ++mb)
    // With sequence parallelism a stage's boundary holds this rank's
    // tp-th of the tokens.
    tensors.activationFloats.push_back((artifact.sequenceParallel
                                            ? batch.rows(mb) / artifact.tp
                                            : batch.rows(mb)) *
                                       hidden);
  spans.clear();
  std::fill(backwardsDone.begin(), backwardsDone.end(), 0);
  std::fill(reducedByProgram.begin(), reducedByProgram.end(), false);
  for (int32_t stage : program.reduceGradStages)
    reducedByProgram[localStage(stage)] = true;
  return tensors;
}

int64_t ScheduleRuntime::run(const StepBatch &stepBatch, StepLosses &losses) {
  const Program &program = programFor(stepBatch.microbatches());
  StepTensors tensors = startProgram(program, stepBatch);
  runProgram(program, stepBatch, tensors, losses);
  return tensors.sentBytes;
}

void ScheduleRuntime::runForward(const StepBatch &stepBatch,
                                 StepLosses &losses) {
  if (!forwardProgram) {
    try {
      // The same artifact on every rank: a missing program is collective.
      forwardProgram = describe(rankForwardProgram(artifact, comm.ppRank(),
                                                   transport.matchesByOrder()));
    } catch (const RuntimeError &e) {
      throw CollectiveError(e.what());
    }
  }
  StepTensors tensors = startProgram(*forwardProgram, stepBatch);
  forwardOnly = true;
  runProgram(*forwardProgram, stepBatch, tensors, losses);
  forwardOnly = false;
}

void ScheduleRuntime::runProgram(const Program &program,
                                 const StepBatch &stepBatch,
                                 StepTensors &tensors, StepLosses &losses) {
  batch = &stepBatch;
  losses.mtp.resize(size_t(artifact.model.mtpDepths), 0.0);
  for (size_t i = 0; i < program.actions.size(); ++i)
    runAction(program, i, tensors, losses);
  finishProgram(tensors);
  batch = nullptr;
}

void ScheduleRuntime::runAction(const Program &program, size_t i,
                                StepTensors &t, StepLosses &losses) {
  const ActionEntry &a = program.actions[i];
  double begin = secondsSinceStart();
  if (comm.distributed())
    comm.setWaitContext(program.texts[i]);
  // FSDP's UNSHARD and RESHARD: nothing is sharded, nothing to do.
  if (a.op == schedule::Op::Unshard || a.op == schedule::Op::Reshard)
    return;
  if (schedule::isTransfer(a.op) && !comm.distributed())
    throw RuntimeError(fmt::format(
        "error: action '{}' exchanges tensors with rank {}; this run has a "
        "single process\nhelp: launch {} ranks with mpirun (or compile "
        "with --pp 1)",
        program.texts[i], a.peer, artifact.pp * artifact.dp));
  // The data of a posted receive: the wait is traced apart, so the
  // action's own span is compute only.
  if (schedule::isCompute(a.op) &&
      stages[localStage(a.stage)].awaitInput(a, t)) {
    spans.push_back({"wait " + program.traceNames[i], schedule::kWaitCategory,
                     begin, secondsSinceStart(), a.stage, a.microbatch});
    begin = secondsSinceStart();
  }
  dispatch(a, t, losses);
  spans.push_back({program.traceNames[i], schedule::traceCategory(a.op), begin,
                   secondsSinceStart(), a.stage, a.microbatch});
  // Let MPI move pending sends and reductions along between kernels; a
  // transfer needs no progress call of its own.
  if (comm.distributed() && schedule::isCompute(a.op)) {
    transport.testAll(t.sends);
    gradSync.progress();
    optimizer.progress();
  }
}

void ScheduleRuntime::dispatch(const ActionEntry &a, StepTensors &t,
                               StepLosses &losses) {
  switch (a.op) {
  case schedule::Op::SendF:
  case schedule::Op::SendB:
    stages[localStage(a.stage)].send(a, t);
    break;
  case schedule::Op::RecvF:
  case schedule::Op::RecvB:
    stages[localStage(a.stage)].receive(a, t, pool);
    break;
  case schedule::Op::F: {
    const size_t local = localStage(a.stage);
    optimizer.finishParamSync(local);
    stages[local].forward(a.microbatch, batch->argsFor(a.microbatch),
                          batch->scale(a.microbatch), t, pool, losses,
                          forwardOnly);
    break;
  }
  case schedule::Op::B:
  case schedule::Op::I:
  case schedule::Op::W:
    backward(a, t);
    break;
  case schedule::Op::ReduceGrad:
    // The verifier put it after the stage's last backward on this rank.
    gradSync.startGradSync(localStage(a.stage));
    break;
  case schedule::Op::Unshard:
  case schedule::Op::Reshard:
    break; // skipped by runAction
  }
}

void ScheduleRuntime::backward(const ActionEntry &a, StepTensors &t) {
  const size_t local = localStage(a.stage);
  Stage &s = stages[local];
  const StageArgs args = batch->argsFor(a.microbatch);
  if (a.op == schedule::Op::B || a.op == schedule::Op::I)
    s.backwardInput(a.microbatch, args, t, pool);
  if (a.op != schedule::Op::B && a.op != schedule::Op::W)
    return;
  // The stage's last backward: each bucket's all-reduce (reduce-scatter
  // when sharded) starts once the last call writing into it has run, under
  // the rest of the pass.
  const bool last = backwardsDone[local] + 1 == t.microbatches;
  const bool bucketed = last && !reducedByProgram[local] && comm.dpSize() > 1;
  s.backwardWeight(a.microbatch, args,
                   bucketed ? gradSync.gradReadyHook(local)
                            : WeightGradientHook{});
  if (bucketed)
    gradSync.gradsReadyAfterPass(local);
  if (++backwardsDone[local] == t.microbatches && !reducedByProgram[local] &&
      !bucketed)
    gradSync.startGradSync(local);
}

void ScheduleRuntime::finishProgram(StepTensors &t) {
  if (comm.distributed())
    comm.setWaitContext("the end of the program");
  transport.waitAll(t.sends);
  gradSync.finishGradSync();
  for (auto *posted : {&t.postedActs, &t.postedGrads})
    for (auto &[key, requests] : *posted)
      transport.waitAll(requests); // a verified program reads all it receives
  if (comm.distributed())
    comm.setWaitContext(""); // what follows names itself
  for (Buffer &b : t.sendBuffers)
    pool.giveBack(std::move(b));
}

} // namespace hypipe::rt
