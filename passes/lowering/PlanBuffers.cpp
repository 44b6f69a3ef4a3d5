//===- PlanBuffers.cpp - pipe-plan-buffers --------------------------------===//

#include "passes/Passes.h"
#include "passes/lowering/KernelPlan.h"

#include "mlir/IR/Builders.h"

namespace hypipe {

#define GEN_PASS_DEF_PIPEPLANBUFFERS
#include "passes/Passes.h.inc"

using namespace mlir;

LogicalResult planBuffers(hybrid::ModelOp model) {
  MLIRContext *context = model.getContext();
  const Type f32 = Float32Type::get(context);
  // The plan counts floats; the attributes are typed byte ranges.
  auto floats = [&](int64_t offset, int64_t count) {
    return pipe::RangeAttr::get(context, 4 * offset, 4 * count, f32);
  };
  for (auto stage : model.getBody().front().getOps<pipe::StageOp>()) {
    FailureOr<cpu::StagePlan> plan = cpu::planStage(stage);
    if (failed(plan))
      return failure();
    for (const cpu::KernelLayer &layer : plan->layers)
      layer.op->setAttr(
          layer.planAttr(),
          pipe::KernelAttr::get(context, rt::layerKindName(layer.kind),
                                floats(layer.paramOffset, layer.paramFloats),
                                floats(layer.savedOffset, layer.savedFloats)));
    stage->setAttr(pipe::kBufferPlanAttr,
                   pipe::BufferPlanAttr::get(context, 4 * plan->paramFloats,
                                             4 * plan->savedFloats,
                                             4 * plan->workspaceFloats));
  }
  return success();
}

namespace {
struct PipePlanBuffersPass : impl::PipePlanBuffersBase<PipePlanBuffersPass> {
  void runOnOperation() override {
    if (failed(planBuffers(getOperation())))
      signalPassFailure();
  }
};
} // namespace

} // namespace hypipe
