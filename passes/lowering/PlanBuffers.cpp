//===- PlanBuffers.cpp - pipe-plan-buffers
//---------------------------------===//

#include "passes/Passes.h"
#include "passes/lowering/KernelPlan.h"

#include "mlir/IR/Builders.h"

namespace hypipe {

#define GEN_PASS_DEF_PIPEPLANBUFFERS
#include "passes/Passes.h.inc"

using namespace mlir;

LogicalResult planBuffers(hybrid::ModelOp model) {
  OpBuilder b(model.getContext());
  for (auto stage : model.getBody().front().getOps<pipe::StageOp>()) {
    FailureOr<cpu::StagePlan> plan = cpu::planStage(stage);
    if (failed(plan))
      return failure();
    for (const cpu::KernelLayer &layer : plan->layers) {
      NamedAttribute fields[] = {
          b.getNamedAttr("kind",
                         b.getStringAttr(rt::layerKindName(layer.kind))),
          b.getNamedAttr("params", b.getDenseI64ArrayAttr(
                                       {layer.paramOffset, layer.paramFloats})),
          b.getNamedAttr("saved", b.getDenseI64ArrayAttr(
                                      {layer.savedOffset, layer.savedFloats})),
      };
      layer.op->setAttr(layer.planAttr(), b.getDictionaryAttr(fields));
    }
    NamedAttribute totals[] = {
        b.getNamedAttr("params", b.getI64IntegerAttr(plan->paramFloats)),
        b.getNamedAttr("saved", b.getI64IntegerAttr(plan->savedFloats)),
        b.getNamedAttr("workspace", b.getI64IntegerAttr(plan->workspaceFloats)),
    };
    stage->setAttr(cpu::kStagePlanAttr, b.getDictionaryAttr(totals));
  }
  return success();
}

namespace {
struct PipePlanBuffersPass : impl::PipePlanBuffersBase<PipePlanBuffersPass> {
  void runOnOperation() override {
    if (failed(forEachModel(getOperation(), planBuffers)))
      signalPassFailure();
  }
};
} // namespace

} // namespace hypipe
