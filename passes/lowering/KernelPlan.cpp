//===- KernelPlan.cpp - lower a pipe.stage to planned kernel calls --------===//

#include "passes/lowering/KernelPlan.h"

#include "conversion/SpecToHybrid.h"
#include "dialects/hybrid/HybridOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>

using namespace mlir;

namespace hypipe::cpu {

const char *kernelKindName(KernelKind kind) {
  switch (kind) {
  case KernelKind::Embedding:
    return "embedding";
  case KernelKind::Mamba:
    return "mamba";
  case KernelKind::Attention:
    return "attention";
  case KernelKind::Mlp:
    return "mlp";
  case KernelKind::Moe:
    return "moe";
  case KernelKind::Head:
    return "head";
  }
  return "?";
}

namespace {

rt::Activation activationOf(const ModelDims &d) {
  if (d.activation == "gelu")
    return rt::Activation::Gelu;
  if (d.activation == "swiglu")
    return rt::Activation::Swiglu;
  return rt::Activation::SquaredRelu;
}

/// (batch, seq, hidden) of the stage, from the first hidden-state tensor
/// it touches, or from the model's token arguments for a stage without one.
rt::TokenShape tokenShapeOf(pipe::StageOp stage, hybrid::ModelOp model) {
  rt::TokenShape shape;
  auto fromType = [&](Type type) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || tensor.getRank() < 2)
      return false;
    shape.batch = tensor.getDimSize(0);
    shape.seq = tensor.getDimSize(1);
    return true;
  };
  WalkResult found = stage.walk([&](Operation *op) {
    for (Type t : op->getResultTypes())
      if (fromType(t))
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  if (!found.wasInterrupted())
    fromType(model.getBody().front().getArgument(0).getType());
  return shape;
}

} // namespace

FailureOr<StagePlan> planStage(pipe::StageOp stage) {
  auto model = stage->getParentOfType<hybrid::ModelOp>();
  if (!model)
    return stage.emitError("pipe.stage must sit inside a hybrid.model to be "
                           "lowered to kernels");
  ModelDims dims = hybrid::toModelDims(model.getDims());
  const int64_t numLayers = int64_t(model.getMainLayers().size());
  bool rope = false;
  if (auto pe = model->getAttrOfType<StringAttr>(kPositionEmbeddingAttr))
    rope = pe.getValue() == "rope";
  double auxCoeff = 0.0;
  if (auto c = model->getAttrOfType<FloatAttr>(kMoeAuxLossCoeffAttr))
    auxCoeff = c.getValueAsDouble();
  const rt::Activation act = activationOf(dims);

  StagePlan plan;
  plan.index = int64_t(stage.getIndex());
  plan.ppRank = int64_t(stage.getPpRank());
  plan.vpStage = int64_t(stage.getVpStage());
  plan.tokens = tokenShapeOf(stage, model);
  plan.hidden = dims.hidden;

  auto layerNumber = [](Operation *op) -> int64_t {
    if (auto placement = op->getAttrOfType<hybrid::PlacementAttr>("placement"))
      return placement.getLayer();
    return 0;
  };

  bool failed = false;
  stage.getBody().front().walk<WalkOrder::PreOrder>([&](Operation *op) {
    KernelLayer layer;
    layer.op = op;
    layer.layer = layerNumber(op);
    layer.prefix = "decoder.layers." + std::to_string(layer.layer - 1) + ".";
    const rt::TokenShape &t = plan.tokens;
    bool isLayer = true;
    // A layer's parameters and buffer sizes, all from its shape.
    auto size = [&](const auto &shape, std::vector<rt::ParamSpec> params) {
      layer.params = std::move(params);
      layer.savedFloats = shape.savedFloats(t);
      layer.workspaceFloats = shape.workspaceFloats(t);
    };
    llvm::TypeSwitch<Operation *>(op)
        .Case([&](hybrid::EmbeddingOp) {
          layer.kind = KernelKind::Embedding;
          layer.prefix.clear();
          layer.embedding = {dims.vocab, dims.hidden};
          size(layer.embedding, layer.embedding.params());
          plan.hasEmbedding = true;
        })
        .Case([&](hybrid::MambaOp) {
          layer.kind = KernelKind::Mamba;
          layer.mamba = {dims.hidden,         dims.mambaNumHeads,
                         dims.mambaHeadDim,   dims.mambaState,
                         dims.mambaNumGroups, dims.mambaConvWidth};
          size(layer.mamba, layer.mamba.params(numLayers));
        })
        .Case([&](hybrid::AttentionOp) {
          layer.kind = KernelKind::Attention;
          layer.attention = {dims.hidden, dims.numHeads, dims.numQueryGroups,
                             dims.kvChannels(), rope};
          size(layer.attention, layer.attention.params(numLayers));
        })
        .Case([&](hybrid::MlpOp) {
          layer.kind = KernelKind::Mlp;
          layer.mlp = {dims.hidden, dims.ffnHidden, act};
          size(layer.mlp, layer.mlp.params(numLayers));
        })
        .Case([&](hybrid::MoeOp) {
          layer.kind = KernelKind::Moe;
          layer.moe = {dims.hidden,
                       dims.expertFfnHidden(),
                       dims.numExperts,
                       dims.moeTopK,
                       act,
                       auxCoeff};
          size(layer.moe, layer.moe.params(numLayers));
        })
        .Case([&](hybrid::FinalNormOp) { isLayer = false; })
        .Case([&](hybrid::OutputOp) {
          layer.kind = KernelKind::Head;
          layer.prefix.clear();
          layer.head = {dims.vocab, dims.hidden, dims.tieEmbeddings};
          size(layer.head, layer.head.params());
          plan.hasHead = true;
        })
        .Case<hybrid::GdnOp, hybrid::DsaOp, hybrid::MlaOp>([&](Operation *) {
          op->emitError() << "the CPU target cannot lower '"
                          << op->getName().getStringRef()
                          << "' yet; use M, *, - and E layers in the "
                             "pattern for models that hypipe-run trains";
          failed = true;
        })
        .Case([&](hybrid::MtpOp) {
          op->emitError() << "the CPU target cannot lower multi-token "
                             "prediction yet; drop the '/' part of the "
                             "pattern to train this model";
          failed = true;
        })
        .Default([&](Operation *) { isLayer = false; });
    if (failed)
      return WalkResult::interrupt();
    if (!isLayer)
      return WalkResult::skip();
    for (const rt::ParamSpec &p : layer.params)
      layer.paramFloats += p.numel();
    layer.paramOffset = plan.paramFloats;
    layer.savedOffset = plan.savedFloats;
    plan.paramFloats += layer.paramFloats;
    plan.savedFloats += layer.savedFloats;
    plan.workspaceFloats =
        std::max(plan.workspaceFloats, layer.workspaceFloats);
    plan.layers.push_back(std::move(layer));
    return WalkResult::skip();
  });
  if (failed)
    return failure();
  plan.workspaceFloats += 2 * plan.tokens.tokens() * plan.hidden;
  return plan;
}

} // namespace hypipe::cpu
