//===- KernelPlan.cpp - lower a pipe.stage to planned kernel calls --------===//

#include "passes/lowering/KernelPlan.h"

#include "dialects/hybrid/HybridOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>

using namespace mlir;

namespace hypipe::cpu {

namespace {

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

namespace {

/// The stage's layers with their kernels, shapes and parameters: everything
/// but the buffer offsets, which are the plan.
FailureOr<StagePlan> describeStage(pipe::StageOp stage) {
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
  rt::Target target = rt::Target::Cpu;
  if (auto t = model->getAttrOfType<StringAttr>(kTargetAttr)) {
    if (t.getValue() == "cuda")
      target = rt::Target::Cuda;
    else if (t.getValue() != "cpu")
      return model.emitError() << "'" << kTargetAttr << "' is '" << t.getValue()
                               << "'; expected cpu or cuda";
  }

  StagePlan plan;
  plan.target = target;
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

  double mtpScale = 0.1;
  if (auto c = model->getAttrOfType<FloatAttr>(kMtpLossScaleAttr))
    mtpScale = c.getValueAsDouble();
  // Depths over the whole model (they may sit inside pipe.stage ops).
  int64_t mtpDepths = 0;
  model.walk([&](hybrid::MtpOp) { ++mtpDepths; });

  bool failed = false;
  const rt::TokenShape &t = plan.tokens;
  // One layer op as a kernel with its parameters and buffer sizes; false
  // when `op` is no layer (or could not be lowered: `failed`).
  auto describe = [&](Operation *op, const std::string &prefix,
                      KernelLayer &layer) {
    layer.op = op;
    layer.prefix = prefix;
    bool isLayer = true;
    // A layer's parameters and buffer sizes, all from its shape.
    auto size = [&](const auto &shape, std::vector<rt::ParamSpec> params) {
      layer.params = std::move(params);
      layer.savedFloats = shape.savedFloats(t, target);
      layer.workspaceFloats = shape.workspaceFloats(t, target);
    };
    llvm::TypeSwitch<Operation *>(op)
        .Case([&](hybrid::EmbeddingOp) {
          layer.kind = KernelKind::Embedding;
          layer.prefix.clear();
          layer.embedding = rt::embeddingShape(dims);
          size(layer.embedding, layer.embedding.params());
          plan.hasEmbedding = true;
        })
        .Case([&](hybrid::MambaOp) {
          layer.kind = KernelKind::Mamba;
          layer.mamba = rt::mambaShape(dims);
          size(layer.mamba, layer.mamba.params(numLayers));
        })
        .Case([&](hybrid::AttentionOp) {
          layer.kind = KernelKind::Attention;
          layer.attention = rt::attentionShape(dims, rope);
          size(layer.attention, layer.attention.params(numLayers));
        })
        .Case([&](hybrid::MlpOp) {
          layer.kind = KernelKind::Mlp;
          layer.mlp = rt::mlpShape(dims);
          size(layer.mlp, layer.mlp.params(numLayers));
        })
        .Case([&](hybrid::MoeOp) {
          layer.kind = KernelKind::Moe;
          layer.moe = rt::moeShape(dims, auxCoeff);
          size(layer.moe, layer.moe.params(numLayers));
        })
        .Case([&](hybrid::FinalNormOp) { isLayer = false; })
        .Case([&](hybrid::OutputOp) {
          layer.kind = KernelKind::Head;
          layer.prefix.clear();
          layer.head = rt::headShape(dims);
          size(layer.head, layer.head.params());
          plan.hasHead = true;
        })
        .Case<hybrid::GdnOp, hybrid::DsaOp, hybrid::MlaOp>([&](Operation *) {
          op->emitError() << "the "
                          << (target == rt::Target::Cuda ? "CUDA" : "CPU")
                          << " target cannot lower '"
                          << op->getName().getStringRef()
                          << "' yet; use M, *, - and E layers in the "
                             "pattern for models that hypipe-run trains";
          failed = true;
        })
        .Default([&](Operation *) { isLayer = false; });
    if (!isLayer || failed)
      return false;
    layer.paramFloats = rt::numel(layer.params);
    return true;
  };

  // A multi-token-prediction depth: input (embedding, norms, eh_proj), its
  // layers (Megatron's mtp.layers.<d>.mtp_model_layer.layers.<j>.), output.
  auto describeMtp = [&](hybrid::MtpOp mtp) {
    if (!plan.hasHead) {
      mtp.emitError() << "multi-token prediction must run in the stage that "
                         "holds the output layer (it shares it); place the "
                         "MTP depths in the last stage";
      failed = true;
      return;
    }
    const int64_t depth = mtp.getDepth();
    const std::string prefix = "mtp.layers." + std::to_string(depth - 1) + ".";
    KernelLayer in;
    in.op = mtp;
    in.kind = KernelKind::MtpInput;
    in.prefix = prefix;
    // The model's embedding table: the stage's own (embedding or tied
    // head) when it has one, else a copy carried by the first depth and
    // summed with the first stage's like the tied output layer.
    bool tableHere = false;
    for (const KernelLayer &l : plan.layers)
      for (const rt::ParamSpec &p : l.params)
        tableHere |=
            l.prefix.empty() && p.name == "embedding.word_embeddings.weight";
    in.mtpInput = {dims.vocab, dims.hidden, depth, !tableHere};
    in.params = in.mtpInput.params();
    in.savedFloats = in.mtpInput.savedFloats(t, target);
    in.workspaceFloats = in.mtpInput.workspaceFloats(t, target);
    in.paramFloats = rt::numel(in.params);
    plan.layers.push_back(std::move(in));
    int64_t j = 0;
    for (Operation &inner : mtp.getBody().front().without_terminator()) {
      KernelLayer layer;
      if (describe(&inner,
                   prefix + "mtp_model_layer.layers." + std::to_string(j) + ".",
                   layer)) {
        plan.layers.push_back(std::move(layer));
        ++j;
      }
      if (failed)
        return;
    }
    KernelLayer out;
    out.op = mtp;
    out.kind = KernelKind::MtpOutput;
    out.prefix = prefix;
    out.mtpOutput = {dims.vocab, dims.hidden, depth,
                     mtpScale / double(std::max<int64_t>(1, mtpDepths))};
    out.params = out.mtpOutput.params();
    out.savedFloats = out.mtpOutput.savedFloats(t, target);
    out.workspaceFloats = out.mtpOutput.workspaceFloats(t, target);
    out.paramFloats = rt::numel(out.params);
    plan.layers.push_back(std::move(out));
  };

  stage.getBody().front().walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (auto mtp = dyn_cast<hybrid::MtpOp>(op)) {
      describeMtp(mtp);
      return failed ? WalkResult::interrupt() : WalkResult::skip();
    }
    KernelLayer layer;
    const int64_t number = layerNumber(op);
    layer.layer = number;
    bool isLayer = describe(
        op, "decoder.layers." + std::to_string(number - 1) + ".", layer);
    if (failed)
      return WalkResult::interrupt();
    if (!isLayer)
      return WalkResult::skip();
    plan.layers.push_back(std::move(layer));
    return WalkResult::skip();
  });
  if (failed)
    return failure();
  return plan;
}

} // namespace

FailureOr<StagePlan> planStage(pipe::StageOp stage) {
  FailureOr<StagePlan> plan = describeStage(stage);
  if (failed(plan))
    return failure();
  // Parameters and saved tensors: one range per layer, in layer order;
  // the workspace: the largest any layer needs plus the two activation
  // buffers the stage ping-pongs between layers.
  for (KernelLayer &layer : plan->layers) {
    layer.paramOffset = plan->paramFloats;
    layer.savedOffset = plan->savedFloats;
    plan->paramFloats += layer.paramFloats;
    plan->savedFloats += layer.savedFloats;
    plan->workspaceFloats =
        std::max(plan->workspaceFloats, layer.workspaceFloats);
  }
  plan->workspaceFloats += 2 * plan->tokens.tokens() * plan->hidden;
  return plan;
}

FailureOr<StagePlan> readStagePlan(pipe::StageOp stage) {
  FailureOr<StagePlan> plan = describeStage(stage);
  if (failed(plan))
    return failure();
  auto totals = stage->getAttrOfType<pipe::BufferPlanAttr>(kStagePlanAttr);
  if (!totals)
    return stage.emitError()
           << "has no '" << kStagePlanAttr << "': run pipe-plan-buffers first";
  // The kernels take f32 (kernel_c2), so every range counts floats.
  plan->paramFloats = totals.getParams() / 4;
  plan->savedFloats = totals.getSaved() / 4;
  plan->workspaceFloats = totals.getWorkspace() / 4;
  for (KernelLayer &layer : plan->layers) {
    auto kernel = layer.op->getAttrOfType<pipe::KernelAttr>(layer.planAttr());
    if (!kernel)
      return layer.op->emitError() << "has no '" << layer.planAttr()
                                   << "': run pipe-plan-buffers first";
    pipe::RangeAttr p = kernel.getParams(), v = kernel.getSaved();
    if (kernel.getKind() != layerKindName(layer.kind) ||
        p.getBytes() != 4 * layer.paramFloats ||
        v.getBytes() != 4 * layer.savedFloats || p.end() > totals.getParams() ||
        v.end() > totals.getSaved())
      return layer.op->emitError()
             << "'" << layer.planAttr() << "' " << kernel
             << " does not match the layer's " << layerKindName(layer.kind)
             << " kernel (" << 4 * layer.paramFloats << " parameter and "
             << 4 * layer.savedFloats << " saved bytes) or its stage's buffers";
    layer.paramOffset = p.getOffset() / 4;
    layer.savedOffset = v.getOffset() / 4;
  }
  return plan;
}

} // namespace hypipe::cpu
