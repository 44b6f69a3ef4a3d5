//===- VerifySchedule.cpp - pipe-verify-schedule --------------------------===//
#include "core/schedule/Simulate.h"
#include "dialects/pipe/PipeOps.h"
#include "passes/Passes.h"
#include "passes/schedule/Programs.h"

#include "mlir/IR/Builders.h"

namespace hypipe {

#define GEN_PASS_DEF_PIPEVERIFYSCHEDULE
#include "passes/Passes.h.inc"

using namespace mlir;

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
struct PipeVerifySchedulePass
    : impl::PipeVerifyScheduleBase<PipeVerifySchedulePass> {
  using PipeVerifyScheduleBase::PipeVerifyScheduleBase;
  void runOnOperation() override {
    if (failed(verifySchedule(getOperation(), costs)))
      signalPassFailure();
  }
};
} // namespace

} // namespace hypipe
