//===- AutoPartition.cpp - hybrid-auto-partition --------------------------===//
#include "core/partition/AutoPartition.h"
#include "dialects/hybrid/HybridOps.h"
#include "passes/Passes.h"

#include "mlir/IR/BuiltinOps.h"

namespace hypipe {

#define GEN_PASS_DEF_HYBRIDAUTOPARTITION
#include "passes/Passes.h.inc"

using namespace mlir;

LogicalResult autoPartitionModel(hybrid::ModelOp model,
                                 PartitionObjective objective,
                                 std::optional<double> maxMemoryGiB,
                                 bool bf16) {
  auto pattern = parseHybridPattern(model.getPattern());
  if (!pattern)
    return model.emitOpError() << toString(pattern.takeError());
  hybrid::ParallelAttr parallel = model.getParallel();
  if (pattern->hasPipes() || parallel.getPp() * parallel.getVpp() == 1)
    return assignStages(model, "");

  auto tokens =
      cast<RankedTensorType>(model.getBody().front().getArgument(0).getType());
  AutoPartitionRequest request;
  request.dims = hybrid::toModelDims(model.getDims());
  request.settings.microBatchSize = tokens.getDimSize(0);
  request.settings.seqLength = tokens.getDimSize(1);
  request.settings.bf16 = bf16;
  request.settings.tp = parallel.getTp();
  request.settings.sequenceParallel = parallel.getSequenceParallel();
  request.settings.ep = parallel.getEp();
  request.settings.etp = parallel.getEtp();
  if (auto c = model->getAttrOfType<FloatAttr>(kMoeCapacityFactorAttr))
    request.settings.capacityFactor = c.getValueAsDouble();
  request.settings.linearCrossEntropy = model->hasAttr(kCrossEntropyChunkAttr);
  request.layers = pattern->layers();
  request.mtpLayers = pattern->mtp;
  request.mtpDepths = pattern->mtpDepths;
  request.pp = parallel.getPp();
  request.vpp = parallel.getVpp();
  request.schedule = parallel.getScheduleKind();
  request.microbatches = parallel.getMicrobatches();
  request.objective = objective;
  request.maxMemoryGiB = maxMemoryGiB;
  auto result = autoPartition(request);
  if (!result)
    return model.emitOpError() << toString(result.takeError());
  model.setPattern(result->pattern);
  return applyPlacement(model, result->placement);
}

namespace {
struct HybridAutoPartitionPass
    : impl::HybridAutoPartitionBase<HybridAutoPartitionPass> {
  using HybridAutoPartitionBase::HybridAutoPartitionBase;
  void runOnOperation() override {
    std::optional<double> cap;
    if (maxMemoryGiB > 0)
      cap = maxMemoryGiB;
    if (failed(autoPartitionModel(getOperation(), objective, cap,
                                  dtype == TrainingPrecision::Bf16)))
      signalPassFailure();
  }
};
} // namespace

} // namespace hypipe
