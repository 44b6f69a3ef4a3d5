//===- BuildModel.cpp -----------------------------------------------------===//
#include "conversion/SpecToHybrid.h"
#include "dialects/hybrid/HybridOps.h"

#include "mlir/IR/Builders.h"

namespace hypipe {

using namespace mlir;

namespace {

/// Creates the layer op for pattern symbol `symbol`.
Value buildLayer(OpBuilder &b, Location loc, char symbol, Value input,
                 hybrid::PlacementAttr placement) {
  Type type = input.getType();
  switch (symbol) {
  case 'M':
    return b.create<hybrid::MambaOp>(loc, type, input, placement);
  case '*':
    return b.create<hybrid::AttentionOp>(loc, type, input, placement);
  case '-':
    return b.create<hybrid::MlpOp>(loc, type, input, placement);
  case 'E':
    return b.create<hybrid::MoeOp>(loc, type, input, placement);
  case 'G':
    return b.create<hybrid::GdnOp>(loc, type, input, placement);
  case 'D':
    return b.create<hybrid::DsaOp>(loc, type, input, placement);
  case '+':
    return b.create<hybrid::MlaOp>(loc, type, input, placement);
  }
  llvm_unreachable("the pattern parser admits only layer symbols");
}

} // namespace

OwningOpRef<ModuleOp> buildModel(MLIRContext &context, const ModelSpec &spec) {
  context.getOrLoadDialect<hybrid::HybridDialect>();
  Location loc = FileLineColLoc::get(&context, spec.file, 1, 1);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  OpBuilder b(&context);
  b.setInsertionPointToEnd(module->getBody());

  const ParallelSpec &par = spec.parallel;
  auto parallel = hybrid::ParallelAttr::get(
      &context, par.pp, par.vpp, par.dp, hybrid::toSchedule(par.schedule),
      par.microbatches, par.groupSize, par.tp, par.sequenceParallel, par.ep,
      par.etp == par.tp ? 0 : par.etp);
  auto model = b.create<hybrid::ModelOp>(
      loc, spec.name, hybrid::toDimsAttr(&context, spec.dims), parallel,
      patternWithStages(spec.pattern, spec.placement));
  // Settings only the kernels need ride along as discardable attributes.
  if (spec.positionEmbedding != "none")
    model->setAttr(kPositionEmbeddingAttr,
                   b.getStringAttr(spec.positionEmbedding));
  if (spec.dims.numExperts > 0)
    model->setAttr(kMoeAuxLossCoeffAttr,
                   b.getF64FloatAttr(spec.moeAuxLossCoeff));
  if (spec.dims.numExperts > 0 && spec.moeExpertCapacityFactor) {
    model->setAttr(kMoeCapacityFactorAttr,
                   b.getF64FloatAttr(*spec.moeExpertCapacityFactor));
    model->setAttr(kMoeDropPolicyAttr,
                   b.getStringAttr(spec.moeTokenDropPolicy));
  }
  if (spec.dims.numExperts > 0 &&
      spec.moeDispatcher != MoeDispatcher::AllGather)
    model->setAttr(kMoeDispatcherAttr,
                   b.getStringAttr(moeDispatcherName(spec.moeDispatcher)));
  if (spec.crossEntropyFusionImpl == "linear")
    model->setAttr(
        kCrossEntropyChunkAttr,
        b.getI64IntegerAttr(spec.crossEntropyChunkTokens.value_or(0)));
  if (spec.pattern.mtpDepths > 0)
    model->setAttr(kMtpLossScaleAttr,
                   b.getF64FloatAttr(spec.mtpLossScalingFactor));
  if (spec.pattern.text.find_first_of("+D") != std::string::npos) {
    const MlaRopeSpec &r = spec.mlaRope;
    model->setAttr(
        kMlaRopeAttr,
        b.getDictionaryAttr(
            {b.getNamedAttr("rope_type",
                            b.getStringAttr(mlaRopeTypeName(r.type))),
             b.getNamedAttr("rotary_scaling_factor",
                            b.getF64FloatAttr(r.rotaryScalingFactor)),
             b.getNamedAttr("mscale", b.getF64FloatAttr(r.mscale)),
             b.getNamedAttr("mscale_all_dim",
                            b.getF64FloatAttr(r.mscaleAllDim))}));
  }
  if (spec.pattern.text.find('D') != std::string::npos)
    model->setAttr(
        kDsaIndexerAttr,
        b.getDictionaryAttr(
            {b.getNamedAttr("loss_coeff",
                            b.getF64FloatAttr(spec.dsaIndexerLossCoeff)),
             b.getNamedAttr("use_sparse_loss",
                            b.getBoolAttr(spec.dsaIndexerUseSparseLoss))}));

  int64_t batch = spec.training.microBatchSize, seq = spec.training.seqLength;
  auto tokensType = RankedTensorType::get({batch, seq}, b.getI64Type());
  auto hiddenType =
      RankedTensorType::get({batch, seq, spec.dims.hidden}, b.getF32Type());
  auto lossType = RankedTensorType::get({}, b.getF32Type());

  Block *body =
      b.createBlock(&model.getBody(), {}, {tokensType, tokensType}, {loc, loc});
  Value tokens = body->getArgument(0), labels = body->getArgument(1);
  Value hidden = b.create<hybrid::EmbeddingOp>(loc, hiddenType, tokens);
  // Each layer is located at its character of the pattern in the spec, so
  // that errors of later passes point into the pattern.
  std::vector<size_t> layerOffsets; // offset in the pattern text, by layer
  for (size_t i = 0; i < spec.pattern.main.size(); ++i)
    if (spec.pattern.main[i] != '|')
      layerOffsets.push_back(i);
  auto locAt = [&](size_t offset) -> Location {
    if (spec.patternLine == 0)
      return loc;
    return FileLineColLoc::get(&context, spec.file, spec.patternLine,
                               spec.patternColumn + unsigned(offset));
  };
  for (const PatternStage &stage : spec.placement.stages) {
    for (auto [i, symbol] : llvm::enumerate(stage.layers)) {
      auto placement =
          hybrid::PlacementAttr::get(&context, stage.index, stage.ppRank,
                                     stage.vpStage, stage.layerNumbers[i]);
      size_t k = size_t(stage.layerNumbers[i] - 1);
      Location at = k < layerOffsets.size() ? locAt(layerOffsets[k]) : loc;
      hidden = buildLayer(b, at, symbol, hidden, placement);
    }
  }
  Value mainHidden = hidden;
  Value normed = b.create<hybrid::FinalNormOp>(loc, hiddenType, hidden);
  SmallVector<Value> losses{
      b.create<hybrid::OutputOp>(loc, lossType, normed, labels).getLoss()};

  for (int depth = 1; depth <= spec.pattern.mtpDepths; ++depth) {
    auto mtp =
        b.create<hybrid::MtpOp>(loc, hiddenType, lossType, mainHidden, tokens,
                                labels, depth, hybrid::PlacementAttr());
    OpBuilder::InsertionGuard guard(b);
    Block *mtpBody = b.createBlock(&mtp.getBody(), {}, {hiddenType}, {loc});
    Value h = mtpBody->getArgument(0);
    size_t part = spec.pattern.mtpOffset +
                  size_t(depth - 1) * (spec.pattern.mtp.size() + 1);
    for (auto [j, symbol] : llvm::enumerate(spec.pattern.mtp))
      h = buildLayer(b, locAt(part + j), symbol, h, hybrid::PlacementAttr());
    b.create<hybrid::YieldOp>(loc, h);
    mainHidden = mtp.getNextHidden();
    losses.push_back(mtp.getLoss());
  }
  b.create<hybrid::ReturnOp>(loc, losses);
  return module;
}

} // namespace hypipe
