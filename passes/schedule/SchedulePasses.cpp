//===- SchedulePasses.cpp - pipe-build-schedule, -insert-comms, -verify ---===//
#include "core/schedule/Simulate.h"
#include "dialects/pipe/PipeOps.h"
#include "passes/Passes.h"
#include "passes/schedule/Programs.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace hypipe {

#define GEN_PASS_DEF_PIPEBUILDSCHEDULE
#define GEN_PASS_DEF_PIPEINSERTCOMMS
#define GEN_PASS_DEF_PIPEVERIFYSCHEDULE
#include "passes/Passes.h.inc"

using namespace mlir;

namespace schedule {

Expected<Schedule> readPrograms(hybrid::ModelOp model) {
  hybrid::ParallelAttr parallel = model.getParallel();
  Schedule s;
  s.pp = parallel.getPp();
  s.vpp = parallel.getVpp();
  s.microbatches = parallel.getMicrobatches();
  s.name = parallel.getSchedule().str();
  s.placement = placementOf(s.name);
  for (auto program : model.getBody().front().getOps<pipe::ProgramOp>()) {
    std::vector<Action> actions;
    for (StringRef text : program.getActions().getAsValueRange<StringAttr>()) {
      auto action = parsePytorchAction(text, s.actionContext());
      if (!action)
        return action.takeError();
      actions.push_back(*action);
    }
    s.ranks.push_back(std::move(actions));
  }
  if (static_cast<int64_t>(s.ranks.size()) != s.pp)
    return makeError("the model has " + std::to_string(s.ranks.size()) +
                     " pipe.program ops but pp = " + std::to_string(s.pp) +
                     ": run pipe-build-schedule");
  return s;
}

void writePrograms(hybrid::ModelOp model, const Schedule &s) {
  Block &body = model.getBody().front();
  for (auto program :
       llvm::make_early_inc_range(body.getOps<pipe::ProgramOp>()))
    program.erase();
  OpBuilder b(body.getTerminator());
  for (int64_t r = 0; r < s.pp; ++r) {
    SmallVector<StringRef> texts;
    std::vector<std::string> storage;
    SmallVector<int64_t> batched;
    for (auto [i, a] : llvm::enumerate(s.ranks[r])) {
      storage.push_back(pytorchText(a));
      if (a.batched)
        batched.push_back(static_cast<int64_t>(i));
    }
    for (const std::string &t : storage)
      texts.push_back(t);
    auto program = b.create<pipe::ProgramOp>(model.getLoc(), r, s.name,
                                             b.getStrArrayAttr(texts));
    if (!batched.empty())
      program->setAttr("batched", b.getDenseI64ArrayAttr(batched));
  }
}

} // namespace schedule

LogicalResult buildSchedulePrograms(hybrid::ModelOp model,
                                    StringRef importCsv) {
  if (model.getBody().front().getOps<pipe::StageOp>().empty())
    return model.emitOpError()
           << "has no pipe.stage ops: run pipe-outline-stages first";
  if (!model.getBody().front().getOps<pipe::ProgramOp>().empty())
    return model.emitOpError() << "already has pipe.program ops";
  hybrid::ParallelAttr parallel = model.getParallel();
  if (!importCsv.empty()) {
    auto imported = schedule::readCsvForModel(
        importCsv.str(), parallel.getSchedule().str(), parallel.getPp(),
        parallel.getVpp(), parallel.getMicrobatches());
    if (!imported)
      return model.emitOpError() << toString(imported.takeError());
    schedule::writePrograms(model, imported->schedule);
    return success();
  }
  auto built = schedule::buildSchedule(
      {parallel.getSchedule().str(), parallel.getPp(), parallel.getVpp(),
       parallel.getMicrobatches(), parallel.getGroupSize()});
  if (!built)
    return model.emitOpError() << toString(built.takeError());
  schedule::writePrograms(model, *built);
  return success();
}

LogicalResult insertComms(hybrid::ModelOp model) {
  auto programs = schedule::readPrograms(model);
  if (!programs)
    return model.emitOpError() << toString(programs.takeError());
  // (An imported program's own communication is kept as written.)
  schedule::insertCommunication(*programs);
  schedule::writePrograms(model, *programs);
  return success();
}

LogicalResult verifySchedule(hybrid::ModelOp model, StringRef costText) {
  auto programs = schedule::readPrograms(model);
  if (!programs)
    return model.emitOpError() << toString(programs.takeError());
  schedule::Costs costs;
  if (auto err = schedule::parseCosts(costText, costs))
    return model.emitOpError() << toString(std::move(err));
  auto simulation = schedule::simulate(*programs, costs);
  if (!simulation)
    return model.emitOpError() << toString(simulation.takeError());
  Builder b(model.getContext());
  for (auto [r, program] :
       llvm::enumerate(model.getBody().front().getOps<pipe::ProgramOp>()))
    program->setAttr("bubble_fraction",
                     b.getF64FloatAttr(simulation->bubbleFraction[r]));
  model->setAttr("makespan", b.getF64FloatAttr(simulation->makespan));
  return success();
}

namespace {
template <typename Base, LogicalResult (*Work)(hybrid::ModelOp)>
struct ModelPass : Base {
  void runOnOperation() override {
    if (failed(forEachModel(this->getOperation(), [&](hybrid::ModelOp model) {
          return Work(model);
        })))
      this->signalPassFailure();
  }
};

struct PipeBuildSchedulePass
    : impl::PipeBuildScheduleBase<PipeBuildSchedulePass> {
  using PipeBuildScheduleBase::PipeBuildScheduleBase;
  void runOnOperation() override {
    if (failed(forEachModel(getOperation(), [&](hybrid::ModelOp model) {
          return buildSchedulePrograms(model, importCsv);
        })))
      signalPassFailure();
  }
};
struct PipeInsertCommsPass
    : ModelPass<impl::PipeInsertCommsBase<PipeInsertCommsPass>, insertComms> {};
struct PipeVerifySchedulePass
    : impl::PipeVerifyScheduleBase<PipeVerifySchedulePass> {
  using PipeVerifyScheduleBase::PipeVerifyScheduleBase;
  void runOnOperation() override {
    if (failed(forEachModel(getOperation(), [&](hybrid::ModelOp model) {
          return verifySchedule(model, costs);
        })))
      signalPassFailure();
  }
};
} // namespace

} // namespace hypipe
