//===- InsertComms.cpp - pipe-insert-comms --------------------------------===//
#include "passes/Passes.h"
#include "passes/schedule/Programs.h"

namespace hypipe {

#define GEN_PASS_DEF_PIPEINSERTCOMMS
#include "passes/Passes.h.inc"

using namespace mlir;

LogicalResult insertComms(hybrid::ModelOp model) {
  auto programs = schedule::readPrograms(model);
  if (!programs)
    return model.emitOpError() << toString(programs.takeError());
  // (An imported program's own communication is kept as written.)
  schedule::insertCommunication(*programs);
  schedule::writePrograms(model, *programs);
  return success();
}

namespace {
struct PipeInsertCommsPass : impl::PipeInsertCommsBase<PipeInsertCommsPass> {
  void runOnOperation() override {
    if (failed(insertComms(getOperation())))
      signalPassFailure();
  }
};
} // namespace

} // namespace hypipe
