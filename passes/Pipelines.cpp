//===- Pipelines.cpp - the registered pass pipelines ----------------------===//
#include "passes/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

namespace hypipe {

void buildArtifactPassPipeline(mlir::OpPassManager &pm,
                               const std::string &scheduleCsv,
                               const RecomputeSpec &recompute) {
  // Every pass runs on a hybrid.model (IsolatedFromAbove).
  mlir::OpPassManager &model = pm.nest<hybrid::ModelOp>();
  model.addPass(createPipeOutlineStages());
  model.addPass(createPipeInsertP2P());
  model.addPass(createPipeBuildSchedule({scheduleCsv}));
  model.addPass(createPipeInsertComms());
  model.addPass(createPipeVerifySchedule());
  model.addPass(createPipeLowerKernels());
  if (recompute.granularity != RecomputeGranularity::None) {
    PipeRecomputeOptions options;
    options.granularity = recomputeGranularityName(recompute.granularity);
    options.method = recomputeMethodName(recompute.method);
    options.numLayers = recompute.numLayers;
    std::vector<std::string> modules;
    for (RecomputeModule m : recompute.modules)
      modules.push_back(recomputeModuleName(m));
    options.modules = modules;
    model.addPass(createPipeRecompute(options));
  }
}

void registerHypipePassPipelines() {
  mlir::PassPipelineRegistration<>(
      "hypipe-artifact-pipeline",
      "From placed layers to scheduled stages lowered to kernel programs: "
      "outline stages, insert p2p, build, communicate and verify the "
      "schedule, lower each stage to its kernel program",
      [](mlir::OpPassManager &pm) { buildArtifactPassPipeline(pm); });
}

} // namespace hypipe
