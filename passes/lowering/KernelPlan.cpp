//===- KernelPlan.cpp - lower a pipe.stage to planned kernel calls --------===//

#include "passes/lowering/KernelPlan.h"

#include "core/model/TensorParallel.h"
#include "dialects/hybrid/HybridOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/TypeSwitch.h"

#include <fmt/format.h>

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
/// What a stage's layers lower to, read off its ops and its model's
/// attributes: one kernel per layer (and two per MTP depth), with shapes,
/// parameters and buffer sizes. Errors are reported at the op.
class StageDescriber {
public:
  StageDescriber(pipe::StageOp stage, hybrid::ModelOp model, rt::Target target)
      : dims(hybrid::toModelDims(model.getDims())),
        numLayers(int64_t(model.getMainLayers().size())), target(target) {
    if (auto pe = model->getAttrOfType<StringAttr>(kPositionEmbeddingAttr))
      rope = pe.getValue() == "rope";
    if (auto c = model->getAttrOfType<FloatAttr>(kMoeAuxLossCoeffAttr))
      auxCoeff = c.getValueAsDouble();
    if (auto c = model->getAttrOfType<FloatAttr>(kMoeCapacityFactorAttr))
      capacityFactor = c.getValueAsDouble();
    if (auto p = model->getAttrOfType<StringAttr>(kMoeDropPolicyAttr))
      dropByPosition = p.getValue() == "position";
    if (auto d = model->getAttrOfType<StringAttr>(kMoeDispatcherAttr))
      allToAll = d.getValue() == "alltoall";
    if (auto c = model->getAttrOfType<FloatAttr>(kMtpLossScaleAttr))
      mtpScale = c.getValueAsDouble();
    if (auto c = model->getAttrOfType<IntegerAttr>(kCrossEntropyChunkAttr))
      lossChunkTokens = c.getInt();
    if (auto r = model->getAttrOfType<DictionaryAttr>(kMlaRopeAttr))
      readMlaRope(r);
    if (auto d = model->getAttrOfType<DictionaryAttr>(kDsaIndexerAttr)) {
      if (auto c = d.getAs<FloatAttr>("loss_coeff"))
        dsaLossCoeff = c.getValueAsDouble();
      if (auto sparse = d.getAs<BoolAttr>("use_sparse_loss"))
        dsaSparseLoss = sparse.getValue();
    }
    // Depths over the whole model (they may sit inside pipe.stage ops).
    model.walk([&](hybrid::MtpOp) { ++mtpDepths; });
    plan.target = target;
    plan.index = int64_t(stage.getIndex());
    plan.ppRank = int64_t(stage.getPpRank());
    plan.vpStage = int64_t(stage.getVpStage());
    plan.tokens = tokenShapeOf(stage, model);
    plan.hidden = dims.hidden;
    plan.numLayers = numLayers;
    plan.tensorParallel = model.getParallel().getTp();
    plan.sequenceParallel = model.getParallel().getSequenceParallel();
    ep = model.getParallel().getEp();
    etp = model.getParallel().getExpertTensorParallel();
    plan.activations = Float32Type::get(model.getContext());
    if (auto p = model->getAttrOfType<TypeAttr>(pipe::kPrecisionAttr))
      plan.activations = p.getValue();
  }

  FailureOr<StagePlan> describe(pipe::StageOp stage) {
    stage.getBody().front().walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (auto mtp = dyn_cast<hybrid::MtpOp>(op)) {
        describeMtp(mtp);
        return failed ? WalkResult::interrupt() : WalkResult::skip();
      }
      KernelLayer layer;
      const int64_t number = layerNumber(op);
      layer.layer = number;
      bool isLayer = describeLayer(
          op, "decoder.layers." + std::to_string(number - 1) + ".", layer);
      if (failed)
        return WalkResult::interrupt();
      if (isLayer)
        plan.layers.push_back(std::move(layer));
      return WalkResult::skip();
    });
    if (failed)
      return failure();
    return plan;
  }

private:
  /// MLA's rotary settings (kMlaRopeAttr) into its shape; a missing entry
  /// keeps Megatron's default.
  void readMlaRope(DictionaryAttr r) {
    if (auto type = r.getAs<StringAttr>("rope_type"))
      mla.yarn = type.getValue() != "rope";
    for (auto [name, field] :
         {std::pair{"rotary_scaling_factor", &mla.scalingFactor},
          {"mscale", &mla.mscale},
          {"mscale_all_dim", &mla.mscaleAllDim}})
      if (auto v = r.getAs<FloatAttr>(name))
        *field = v.getValueAsDouble();
  }

  /// Whether the target's attention core takes an MLA or DSA layer's
  /// padded heads (`symbol`'s); if not, the error at `op`.
  bool latentHeadsFit(Operation *op, char symbol) {
    if (target != rt::Target::Cuda || mla.coreHeadDim() <= 128)
      return true;
    op->emitError() << "the CUDA target runs '" << symbol
                    << "' layers with heads up to 128 wide, and "
                       "max(qk_head_dim + qk_pos_emb_head_dim, v_head_dim) "
                       "pads to "
                    << mla.coreHeadDim()
                    << "; use smaller head dimensions or the CPU target";
    failed = true;
    return false;
  }

  static int64_t layerNumber(Operation *op) {
    if (auto placement = op->getAttrOfType<hybrid::PlacementAttr>("placement"))
      return placement.getLayer();
    return 0;
  }

  /// A layer's parameters and buffer sizes, all from its shape, in bytes
  /// of the f32 every buffer is kept in (a bf16 run rounds its activations
  /// in f32 storage: docs/precision.md).
  template <typename Shape>
  void size(KernelLayer &layer, const Shape &shape,
            std::vector<rt::ParamSpec> params) {
    constexpr int64_t f32 = sizeof(float);
    layer.shape = shape;
    layer.params = std::move(params);
    // Split over tensor-parallel ranks, a rank keeps its shard's tensors.
    const int64_t tp = plan.tensorParallel;
    if (std::string why = rt::tensorParallelProblem(shape, tp); !why.empty()) {
      layer.op->emitError()
          << "cannot split over " << tp << " tensor-parallel ranks: " << why;
      failed = true;
      return;
    }
    const Shape shard = std::get<Shape>(
        rt::tensorParallelShard(shape, tp, plan.sequenceParallel));
    layer.savedBytes = f32 * shard.savedFloats(plan.tokens, target);
    layer.workspaceBytes = f32 * shard.workspaceFloats(plan.tokens, target);
    layer.paramBytes = f32 * rt::rankNumel(layer.params, tp);
  }

  /// One layer op as a kernel with its parameters and buffer sizes; false
  /// when `op` is no layer (or could not be lowered: `failed`).
  bool describeLayer(Operation *op, const std::string &prefix,
                     KernelLayer &layer) {
    layer.op = op;
    layer.prefix = prefix;
    bool isLayer = true;
    llvm::TypeSwitch<Operation *>(op)
        .Case([&](hybrid::EmbeddingOp) {
          layer.kind = KernelKind::Embedding;
          layer.prefix.clear();
          const rt::EmbeddingShape shape = rt::embeddingShape(dims);
          size(layer, shape, shape.params());
          plan.hasEmbedding = true;
        })
        .Case([&](hybrid::MambaOp) {
          layer.kind = KernelKind::Mamba;
          const rt::MambaShape shape = rt::mambaShape(dims);
          size(layer, shape, shape.params(numLayers));
        })
        .Case([&](hybrid::AttentionOp) {
          layer.kind = KernelKind::Attention;
          const rt::AttentionShape shape = rt::attentionShape(dims, rope);
          size(layer, shape, shape.params(numLayers));
        })
        .Case([&](hybrid::MlpOp) {
          layer.kind = KernelKind::Mlp;
          const rt::MlpShape shape = rt::mlpShape(dims);
          size(layer, shape, shape.params(numLayers));
        })
        .Case([&](hybrid::MoeOp) {
          // The expert grid fills the tensor-parallel group (m = 1) or m
          // data-parallel replicas' (Megatron-LM's tp-ep group).
          const int64_t tp = plan.tensorParallel;
          if (!rt::runsExpertGrid(tp, etp, ep)) {
            op->emitError()
                << "the " << (target == rt::Target::Cuda ? "CUDA" : "CPU")
                << " target runs an expert grid of etp x ep = m x tp ranks"
                << " with ep > 1"
                << ", and this one is ep " << ep << ", etp " << etp
                << " with tp " << tp
                << "; hypipe plan lays such grids out and prints "
                   "Megatron-LM's flags: for hypipe-run, use etp = tp / ep, "
                   "or leave out parallel.ep and parallel.etp";
            failed = true;
            return;
          }
          layer.kind = KernelKind::Moe;
          rt::MoeShape shape = rt::moeShape(dims, auxCoeff);
          shape.expertRanks = ep;
          shape.expertTp = etp;
          shape.groupReplicas = (etp * ep) / plan.tensorParallel;
          // Megatron-LM's router runs on each rank's sequence shard: the
          // capacity is counted per shard.
          shape.capacityFactor = capacityFactor;
          shape.dropByPosition = dropByPosition;
          shape.capacityBlocks =
              plan.sequenceParallel ? plan.tensorParallel : 1;
          const rt::LayerGroup group = rt::layerGroupOf(
              shape, plan.tensorParallel, plan.sequenceParallel);
          shape.allToAll =
              rt::moeAllToAll(allToAll, group.size, group.sequenceParallel);
          size(layer, shape, shape.params(numLayers));
        })
        .Case([&](hybrid::FinalNormOp) { isLayer = false; })
        .Case([&](hybrid::OutputOp) {
          layer.kind = KernelKind::Head;
          layer.prefix.clear();
          const rt::HeadShape shape = rt::headShape(dims, lossChunk());
          size(layer, shape, shape.params());
          plan.hasHead = true;
        })
        .Case([&](hybrid::GdnOp) {
          layer.kind = KernelKind::Gdn;
          const rt::GdnShape shape = rt::gdnShape(dims);
          size(layer, shape, shape.params(numLayers));
        })
        .Case([&](hybrid::MlaOp) {
          layer.kind = KernelKind::Mla;
          if (latentHeadsFit(op, '+'))
            size(layer, mla, mla.params(numLayers));
        })
        .Case([&](hybrid::DsaOp) {
          layer.kind = KernelKind::Dsa;
          if (!latentHeadsFit(op, 'D'))
            return;
          rt::DsaShape shape = rt::dsaShape(dims);
          static_cast<rt::MlaShape &>(shape) = mla; // the rotary settings
          shape.lossCoeff = dsaLossCoeff;
          shape.sparseLoss = dsaSparseLoss;
          shape.seq = plan.tokens.seq;
          size(layer, shape, shape.params(numLayers));
        })
        .Default([&](Operation *) { isLayer = false; });
    return isLayer && !failed;
  }

  /// A multi-token-prediction depth: input (embedding, norms, eh_proj), its
  /// layers (Megatron's mtp.layers.<d>.mtp_model_layer.layers.<j>.), output.
  void describeMtp(hybrid::MtpOp mtp) {
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
    const rt::MtpInputShape inShape{dims.vocab, dims.hidden, depth, !tableHere};
    size(in, inShape, inShape.params());
    plan.layers.push_back(std::move(in));
    int64_t j = 0;
    for (Operation &inner : mtp.getBody().front().without_terminator()) {
      KernelLayer layer;
      if (describeLayer(&inner,
                        prefix + "mtp_model_layer.layers." + std::to_string(j) +
                            ".",
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
    const rt::MtpOutputShape outShape{
        dims.vocab, dims.hidden, depth,
        mtpScale / double(std::max<int64_t>(1, mtpDepths)), lossChunk()};
    size(out, outShape, outShape.params());
    plan.layers.push_back(std::move(out));
  }

  const ModelDims dims;
  const int64_t numLayers;
  const rt::Target target;
  bool rope = false;
  /// The MoE layers' expert grid (parallel.ep, parallel.etp): every expert
  /// on every rank (ep 1, etp tp), inside the tensor-parallel group, or
  /// over m data-parallel replicas' (etp x ep = m tp).
  int64_t ep = 1, etp = 1;
  double auxCoeff = 0.0, mtpScale = 0.1;
  /// The MoE layers' capacity factor (0: dropless) and drop policy.
  double capacityFactor = 0.0;
  bool dropByPosition = false;
  bool allToAll = false;
  /// DSA's loss settings (kDsaIndexerAttr).
  double dsaLossCoeff = 0.0;
  /// kCrossEntropyChunkAttr's value: absent (native) is -1.
  int64_t lossChunkTokens = -1;
  /// Rows of the linear cross-entropy's chunk over the stage's microbatch
  /// and this rank's vocabulary; 0 for the native loss.
  int64_t lossChunk() const {
    if (lossChunkTokens < 0)
      return 0;
    return rt::lossChunkRows(plan.tokens.tokens(),
                             dims.vocab / plan.tensorParallel, dims.hidden,
                             lossChunkTokens);
  }
  bool dsaSparseLoss = false;
  /// Every MLA layer's shape: the dims' sizes, the model's rotary settings.
  rt::MlaShape mla = rt::mlaShape(dims);
  int64_t mtpDepths = 0;
  bool failed = false;
  StagePlan plan;
};

FailureOr<StagePlan> describeStage(pipe::StageOp stage) {
  auto model = stage->getParentOfType<hybrid::ModelOp>();
  if (!model)
    return stage.emitError("pipe.stage must sit inside a hybrid.model to be "
                           "lowered to kernels");
  return StageDescriber(stage, model, pipe::targetOf(model)).describe(stage);
}

} // namespace

int64_t StagePlan::activationBytes() const {
  return int64_t(sizeof(float)) * tokens.tokens() * hidden;
}

FailureOr<StagePlan> planStage(pipe::StageOp stage) {
  FailureOr<StagePlan> plan = describeStage(stage);
  if (failed(plan))
    return failure();
  // Parameters and saved tensors: one range per layer, in layer order;
  // the workspace: the two activation buffers the stage ping-pongs between
  // layers, then the largest scratch any layer needs.
  int64_t scratch = 0;
  for (KernelLayer &layer : plan->layers) {
    layer.paramOffset = plan->paramBytes;
    layer.savedOffset = plan->savedBytes;
    plan->paramBytes += layer.paramBytes;
    plan->savedBytes += layer.savedBytes;
    scratch = std::max(scratch, layer.workspaceBytes);
  }
  plan->workspaceBytes = 2 * plan->activationBytes() + scratch;
  return plan;
}

} // namespace hypipe::cpu
