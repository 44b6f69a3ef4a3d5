//===- Pipelines.cpp - the registered pass pipelines ----------------------===//
#include "passes/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

namespace hypipe {

void buildArtifactPassPipeline(mlir::OpPassManager &pm,
                               const std::string &scheduleCsv) {
  pm.addPass(createPipeOutlineStages());
  pm.addPass(createPipeInsertP2P());
  pm.addPass(createPipeBuildSchedule({scheduleCsv}));
  pm.addPass(createPipeInsertComms());
  pm.addPass(createPipeVerifySchedule());
  pm.addPass(createPipePlanBuffers());
}

void registerHypipePassPipelines() {
  mlir::PassPipelineRegistration<>(
      "hypipe-artifact-pipeline",
      "From placed layers to planned, scheduled stages: outline stages, "
      "insert p2p, build, communicate and verify the schedule, plan buffers",
      [](mlir::OpPassManager &pm) { buildArtifactPassPipeline(pm); });
}

} // namespace hypipe
