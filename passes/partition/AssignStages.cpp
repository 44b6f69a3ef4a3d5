//===- AssignStages.cpp - hybrid-assign-stages ----------------------------===//
#include "core/lang/PipelineLayout.h"
#include "passes/Passes.h"

#include "mlir/IR/BuiltinOps.h"

namespace hypipe {

#define GEN_PASS_DEF_HYBRIDASSIGNSTAGES
#include "passes/Passes.h.inc"

using namespace mlir;

LogicalResult applyPlacement(hybrid::ModelOp model,
                             const PatternPlacement &placement) {
  SmallVector<Operation *> layers = model.getMainLayers();
  size_t next = 0;
  for (const PatternStage &stage : placement.stages) {
    for (int64_t number : stage.layerNumbers) {
      if (next >= layers.size())
        return model.emitOpError()
               << "the placement has more layers than the model";
      layers[next++]->setAttr(
          "placement",
          hybrid::PlacementAttr::get(model.getContext(), stage.index,
                                     stage.ppRank, stage.vpStage, number));
    }
  }
  if (next != layers.size())
    return model.emitOpError() << "the placement covers " << next << " of "
                               << layers.size() << " layers";
  return success();
}

LogicalResult assignStages(hybrid::ModelOp model, StringRef layoutText) {
  auto pattern = parseHybridPattern(model.getPattern());
  if (!pattern)
    return model.emitOpError() << toString(pattern.takeError());
  hybrid::ParallelAttr parallel = model.getParallel();
  int64_t pp = parallel.getPp(), vpp = parallel.getVpp();

  PatternPlacement placement;
  if (!layoutText.empty()) {
    if (pattern->hasPipes())
      return model.emitOpError()
             << "a layout string places a pattern without '|'; this "
                "pattern already has its segments";
    auto layout = parsePipelineLayout(layoutText, pp);
    std::optional<int64_t> mtp;
    if (pattern->hasMtp())
      mtp = pattern->mtpDepths;
    Error err = layout
                    ? validatePipelineLayout(*layout, pattern->numLayers(), mtp)
                          .takeError()
                    : layout.takeError();
    if (err)
      return model.emitOpError()
             << "layout '" << layoutText << "': " << toString(std::move(err));
    if (layout->vpp != vpp)
      return model.emitOpError()
             << "layout '" << layoutText << "' has " << layout->vpp
             << " virtual stages per rank but the model has vpp = " << vpp;
    auto placed = placementFromLayout(*pattern, *layout);
    if (!placed)
      return model.emitOpError() << "layout '" << layoutText
                                 << "': " << toString(placed.takeError());
    placement = std::move(*placed);
    // Write the boundaries into the pattern so the IR says where they are.
    std::string withPipes;
    for (const PatternStage &s : placement.stages)
      withPipes += (s.index ? "|" : "") + s.layers;
    for (int d = 0; d < pattern->mtpDepths; ++d)
      withPipes += "/" + pattern->mtp;
    model.setPattern(withPipes);
  } else {
    if (!pattern->hasPipes() && pp * vpp > 1)
      return model.emitOpError()
             << "pattern '" << model.getPattern()
             << "' has no '|' but pp * vpp = " << pp * vpp
             << "; run hybrid-auto-partition to choose the split, or give "
                "layout=<Megatron layout string>";
    auto placed = placeHybridPattern(
        *pattern,
        PlacementOptions{pp,
                         vpp,
                         {},
                         {},
                         schedule::placementOf(parallel.getScheduleKind())});
    if (!placed)
      return model.emitOpError() << toString(placed.takeError());
    placement = std::move(*placed);
  }
  return applyPlacement(model, placement);
}

namespace {
struct HybridAssignStagesPass
    : impl::HybridAssignStagesBase<HybridAssignStagesPass> {
  using HybridAssignStagesBase::HybridAssignStagesBase;
  void runOnOperation() override {
    if (failed(assignStages(getOperation(), layout)))
      signalPassFailure();
  }
};
} // namespace

} // namespace hypipe
