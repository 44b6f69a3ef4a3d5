//===- Pipelines.cpp - the registered pass pipelines ----------------------===//
#include "passes/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

namespace hypipe {

void buildArtifactPassPipeline(mlir::OpPassManager &pm,
                               const std::string &scheduleCsv) {
  // Every pass runs on a hybrid.model (IsolatedFromAbove).
  mlir::OpPassManager &model = pm.nest<hybrid::ModelOp>();
  model.addPass(createPipeOutlineStages());
  model.addPass(createPipeInsertP2P());
  model.addPass(createPipeBuildSchedule({scheduleCsv}));
  model.addPass(createPipeInsertComms());
  model.addPass(createPipeVerifySchedule());
  model.addPass(createPipePlanBuffers());
}

void registerHypipePassPipelines() {
  mlir::PassPipelineRegistration<>(
      "hypipe-artifact-pipeline",
      "From placed layers to planned, scheduled stages: outline stages, "
      "insert p2p, build, communicate and verify the schedule, plan buffers",
      [](mlir::OpPassManager &pm) { buildArtifactPassPipeline(pm); });
}

} // namespace hypipe
