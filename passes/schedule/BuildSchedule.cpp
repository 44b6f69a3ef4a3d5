//===- BuildSchedule.cpp - pipe-build-schedule ----------------------------===//
#include "dialects/pipe/PipeOps.h"
#include "passes/Passes.h"
#include "passes/schedule/Programs.h"

namespace hypipe {

#define GEN_PASS_DEF_PIPEBUILDSCHEDULE
#include "passes/Passes.h.inc"

using namespace mlir;

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
        importCsv.str(), parallel.getScheduleKind(), parallel.getPp(),
        parallel.getVpp(), parallel.getMicrobatches());
    if (!imported)
      return model.emitOpError() << toString(imported.takeError());
    schedule::writePrograms(model, imported->schedule);
    return success();
  }
  auto built = schedule::buildSchedule(
      {parallel.getScheduleKind(), parallel.getPp(), parallel.getVpp(),
       parallel.getMicrobatches(), parallel.getGroupSize()});
  if (!built)
    return model.emitOpError() << toString(built.takeError());
  schedule::writePrograms(model, *built);
  return success();
}

namespace {
struct PipeBuildSchedulePass
    : impl::PipeBuildScheduleBase<PipeBuildSchedulePass> {
  using PipeBuildScheduleBase::PipeBuildScheduleBase;
  void runOnOperation() override {
    if (failed(buildSchedulePrograms(getOperation(), importCsv)))
      signalPassFailure();
  }
};
} // namespace

} // namespace hypipe
