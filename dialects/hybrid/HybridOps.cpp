//===- HybridOps.cpp - verifiers of the hybrid dialect --------------------===//
//
// Each check is tagged with the label of the invariant it enforces, as the
// op's or attribute's description in HybridOps.td / HybridAttrs.td states it
// (`model_c4`), and its message ends with that label in parentheses.
//
//===----------------------------------------------------------------------===//
#include "dialects/hybrid/HybridOps.h"
#include "core/lang/HybridPattern.h"
#include "core/schedule/Vocabulary.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace hypipe::hybrid;

namespace hypipe::hybrid {

ModelDims toModelDims(DimsAttr a) {
  ModelDims d;
  d.hidden = a.getHidden();
  d.ffnHidden = a.getFfnHidden();
  d.numHeads = a.getNumHeads();
  d.numQueryGroups = a.getNumQueryGroups();
  d.mambaState = a.getMambaState();
  d.mambaNumHeads = a.getMambaNumHeads();
  d.mambaHeadDim = a.getMambaHeadDim();
  d.mambaNumGroups = a.getMambaNumGroups();
  d.mambaConvWidth = a.getMambaConvWidth();
  d.numExperts = a.getNumExperts();
  d.moeTopK = a.getMoeTopK();
  d.moeFfnHidden = a.getMoeFfnHidden();
  d.vocab = a.getVocab();
  d.tieEmbeddings = a.getTieEmbeddings();
  d.activation = a.getActivation().str();
  d.qLoraRank = a.getQLoraRank();
  d.kvLoraRank = a.getKvLoraRank();
  d.qkHeadDim = a.getQkHeadDim();
  d.qkPosEmbHeadDim = a.getQkPosEmbHeadDim();
  d.vHeadDim = a.getVHeadDim();
  d.qkLayernorm = a.getQkLayernorm();
  d.gdnNumKeyHeads = a.getLinearNumKeyHeads();
  d.gdnNumValueHeads = a.getLinearNumValueHeads();
  d.gdnKeyHeadDim = a.getLinearKeyHeadDim();
  d.gdnValueHeadDim = a.getLinearValueHeadDim();
  d.gdnConvWidth = a.getLinearConvKernelDim();
  d.dsaIndexerNHeads = a.getDsaIndexerNHeads();
  d.dsaIndexerHeadDim = a.getDsaIndexerHeadDim();
  d.dsaIndexerTopk = a.getDsaIndexerTopk();
  return d;
}

DimsAttr toDimsAttr(MLIRContext *ctx, const ModelDims &d) {
  return DimsAttr::get(
      ctx, d.hidden, d.ffnHidden, d.numHeads, d.numQueryGroups, d.mambaState,
      d.mambaNumHeads, d.mambaHeadDim, d.mambaNumGroups, d.mambaConvWidth,
      d.numExperts, d.moeTopK, d.moeFfnHidden, d.vocab, d.tieEmbeddings,
      d.activation, d.qLoraRank, d.kvLoraRank, d.qkHeadDim, d.qkPosEmbHeadDim,
      d.vHeadDim, d.qkLayernorm, d.gdnNumKeyHeads, d.gdnNumValueHeads,
      d.gdnKeyHeadDim, d.gdnValueHeadDim, d.gdnConvWidth, d.dsaIndexerNHeads,
      d.dsaIndexerHeadDim, d.dsaIndexerTopk);
}

char layerSymbol(Operation *op) {
  return llvm::TypeSwitch<Operation *, char>(op)
      .Case<MambaOp, AttentionOp, MlpOp, MoeOp, GdnOp, DsaOp, MlaOp>(
          [](auto layer) { return decltype(layer)::kSymbol; })
      .Default([](Operation *) { return '\0'; });
}

} // namespace hypipe::hybrid

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

LogicalResult DimsAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, int64_t hidden,
    int64_t ffnHidden, int64_t numHeads, int64_t numQueryGroups,
    int64_t mambaState, int64_t mambaNumHeads, int64_t mambaHeadDim,
    int64_t mambaNumGroups, int64_t mambaConvWidth, int64_t numExperts,
    int64_t moeTopK, int64_t moeFfnHidden, int64_t vocab, bool tieEmbeddings,
    StringRef activation, int64_t qLoraRank, int64_t kvLoraRank,
    int64_t qkHeadDim, int64_t qkPosEmbHeadDim, int64_t vHeadDim,
    bool qkLayernorm, int64_t gdnNumKeyHeads, int64_t gdnNumValueHeads,
    int64_t gdnKeyHeadDim, int64_t gdnValueHeadDim, int64_t gdnConvWidth,
    int64_t dsaIndexerNHeads, int64_t dsaIndexerHeadDim,
    int64_t dsaIndexerTopk) {
  ModelDims d;
  d.hidden = hidden;
  d.ffnHidden = ffnHidden;
  d.numHeads = numHeads;
  d.numQueryGroups = numQueryGroups;
  d.mambaState = mambaState;
  d.mambaNumHeads = mambaNumHeads;
  d.mambaHeadDim = mambaHeadDim;
  d.mambaNumGroups = mambaNumGroups;
  d.mambaConvWidth = mambaConvWidth;
  d.gdnNumKeyHeads = gdnNumKeyHeads;
  d.gdnNumValueHeads = gdnNumValueHeads;
  d.gdnKeyHeadDim = gdnKeyHeadDim;
  d.gdnValueHeadDim = gdnValueHeadDim;
  d.gdnConvWidth = gdnConvWidth;
  d.numExperts = numExperts;
  d.moeTopK = moeTopK;
  d.moeFfnHidden = moeFfnHidden;
  d.vocab = vocab;
  d.tieEmbeddings = tieEmbeddings;
  d.activation = activation.str();
  d.qLoraRank = qLoraRank;
  d.kvLoraRank = kvLoraRank;
  d.qkHeadDim = qkHeadDim;
  d.qkPosEmbHeadDim = qkPosEmbHeadDim;
  d.vHeadDim = vHeadDim;
  d.qkLayernorm = qkLayernorm;
  d.dsaIndexerNHeads = dsaIndexerNHeads;
  d.dsaIndexerHeadDim = dsaIndexerHeadDim;
  d.dsaIndexerTopk = dsaIndexerTopk;
  // dims_c0 ... dims_c7
  if (auto problem = hypipe::checkModelDims(d))
    return emitError() << problem->message << " (" << problem->label << ")";
  return success();
}

LogicalResult ParallelAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   int64_t pp, int64_t vpp, int64_t dp,
                                   Schedule, int64_t microbatches,
                                   int64_t groupSize, int64_t tp,
                                   bool sequenceParallel, int64_t ep,
                                   int64_t etp) {
  // parallel_c1
  if (pp < 1 || vpp < 1 || dp < 1 || microbatches < 1 || groupSize < 1 ||
      tp < 1 || ep < 1 || etp < 0)
    return emitError() << "pp, vpp, dp, microbatches, group_size, tp and ep "
                          "must be positive and etp not negative "
                          "(parallel_c1)";
  // parallel_c2
  if (sequenceParallel && tp < 2)
    return emitError() << "sequence_parallel needs tp above 1 (parallel_c2)";
  // parallel_c3
  const int64_t expertRanks = (etp ? etp : tp) * ep;
  if ((tp * dp) % expertRanks != 0)
    return emitError() << "etp x ep (" << expertRanks
                       << ") must divide tp x dp (" << tp * dp
                       << ") (parallel_c3)";
  return success();
}

LogicalResult
PlacementAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      int64_t segment, int64_t ppRank, int64_t vpStage,
                      int64_t layer) {
  // placement_c1
  if (segment < 0 || ppRank < 0 || vpStage < 0 || layer < 1)
    return emitError() << "placement fields must be non-negative and layer "
                          "must be positive (placement_c1)";
  return success();
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

namespace {

ModelOp parentModel(Operation *op) { return op->getParentOfType<ModelOp>(); }

/// `<op>_c0` of the model-part ops: `label` is the op's.
LogicalResult verifyInsideModel(Operation *op, StringRef label) {
  if (!parentModel(op))
    return op->emitOpError()
           << "must be inside a hybrid.model (" << label << ")";
  return success();
}

/// The main stack in program order: looks into nested regions (pipe.stage)
/// but not into hybrid.mtp bodies.
void collectMainOps(Region &region, SmallVectorImpl<Operation *> &out) {
  for (Block &block : region)
    for (Operation &op : block) {
      out.push_back(&op);
      if (!isa<MtpOp>(op))
        for (Region &nested : op.getRegions())
          collectMainOps(nested, out);
    }
}

bool isIntegerTensor(Type type, int64_t rank) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.getRank() == rank &&
         isa<IntegerType>(tensor.getElementType());
}

/// A `BxSxH` f32 tensor with `H` the model's hidden size; `label` is the
/// invariant of `op` that says so. The caller has checked `<op>_c0`.
LogicalResult verifyHiddenType(Operation *op, Type type, StringRef what,
                               StringRef label) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  int64_t hidden = parentModel(op).getDims().getHidden();
  if (!tensor || tensor.getRank() != 3 || !tensor.getElementType().isF32() ||
      tensor.getDimSize(2) != hidden)
    return op->emitOpError() << what << " must be a BxSx" << hidden
                             << " f32 tensor (hidden size of the model), got "
                             << type << " (" << label << ")";
  return success();
}

/// The label `<mnemonic>_c<number>` of a layer op's invariant: the layer ops
/// share their invariants and this verifier, each under its own mnemonic.
std::string layerLabel(Operation *op, int number) {
  return (op->getName().stripDialect() + "_c" + Twine(number)).str();
}

template <typename LayerOp> LogicalResult verifyLayer(LayerOp op) {
  // mamba_c0, attention_c0, mlp_c0, moe_c0, gdn_c0, dsa_c0, mla_c0
  if (failed(verifyInsideModel(op, layerLabel(op, 0))))
    return failure();
  // mamba_c1, attention_c1, mlp_c1, moe_c1, gdn_c1, dsa_c1, mla_c1
  if (failed(verifyHiddenType(op, op.getInput().getType(), "input",
                              layerLabel(op, 1))))
    return failure();
  // mamba_c2, attention_c2, mlp_c2, moe_c2, gdn_c2, dsa_c2, mla_c2
  ModelOp model = parentModel(op);
  if (auto problem = hypipe::checkLayerKindDims(LayerOp::kSymbol,
                                                toModelDims(model.getDims())))
    return op.emitOpError()
           << problem->message << " (" << layerLabel(op, 2) << ")";
  // mamba_c3, attention_c3, mlp_c3, moe_c3, gdn_c3, dsa_c3, mla_c3
  if (op.getPlacement() && isa<MtpOp>(op->getParentOp()))
    return op.emitOpError()
           << "layers inside hybrid.mtp take the placement of their block ("
           << layerLabel(op, 3) << ")";
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// hybrid.model
//===----------------------------------------------------------------------===//

SmallVector<Operation *> ModelOp::getMainLayers() {
  SmallVector<Operation *> ops, layers;
  collectMainOps(getBody(), ops);
  for (Operation *op : ops)
    if (layerSymbol(op))
      layers.push_back(op);
  return layers;
}

/// model_c7 - model_c11: the main layers' placements, all or none, each
/// where the schedule's placement and the pattern put it.
static LogicalResult verifyPlacements(ModelOp model,
                                      ArrayRef<Operation *> layers,
                                      const hypipe::HybridPattern &pattern) {
  ParallelAttr parallel = model.getParallel();
  // model_c7
  int64_t placed = llvm::count_if(
      layers, [](Operation *op) { return op->hasAttr("placement"); });
  if (placed != 0 && placed != static_cast<int64_t>(layers.size()))
    return model.emitOpError()
           << "either every layer or none carries a placement (" << placed
           << " of " << layers.size() << " do) (model_c7)";
  if (!placed)
    return success();
  std::vector<int64_t> segmentOfLayer;
  for (auto [i, segment] : llvm::enumerate(pattern.segments))
    segmentOfLayer.insert(segmentOfLayer.end(), segment.size(),
                          static_cast<int64_t>(i));
  int64_t previousSegment = 0;
  const hypipe::schedule::Placement style =
      hypipe::schedule::placementOf(parallel.getScheduleKind());
  for (auto [i, op] : llvm::enumerate(layers)) {
    // model_c7: the layer itself is verified after the model, so the
    // attribute's kind is checked here.
    auto p = dyn_cast<PlacementAttr>(op->getAttr("placement"));
    if (!p)
      return op->emitOpError()
             << "placement must be a #hybrid.placement (model_c7)";
    // model_c8
    if (p.getPpRank() >= parallel.getPp() ||
        p.getVpStage() >= parallel.getVpp() ||
        p.getPpRank() != hypipe::schedule::rankOfStage(style, parallel.getPp(),
                                                       p.getSegment()) ||
        p.getVpStage() != hypipe::schedule::chunkOfStage(
                              style, parallel.getPp(), p.getSegment()))
      return op->emitOpError()
             << "placement " << p << " does not fit pp = " << parallel.getPp()
             << ", vpp = " << parallel.getVpp()
             << (style == hypipe::schedule::Placement::V
                     ? " (the V of zbv and dualpipev: segment s < pp on "
                       "pp_rank s, vp_stage 0; s >= pp on pp_rank "
                       "2 pp - 1 - s, vp_stage 1)"
                     : " (segment must be vp_stage * pp + pp_rank)")
             << " (model_c8)";
    // model_c9
    if (p.getSegment() < previousSegment)
      return op->emitOpError()
             << "placement segment " << p.getSegment()
             << " comes after segment " << previousSegment
             << ": layers must be placed in pattern order (model_c9)";
    // model_c10
    if (p.getLayer() != static_cast<int64_t>(i) + 1)
      return op->emitOpError() << "layer number " << p.getLayer()
                               << " should be " << i + 1 << " (model_c10)";
    // model_c11
    if (pattern.hasPipes() && p.getSegment() != segmentOfLayer[i])
      return op->emitOpError()
             << "layer " << i + 1 << " is in segment " << segmentOfLayer[i]
             << " of the pattern but placed in segment " << p.getSegment()
             << " (model_c11)";
    previousSegment = p.getSegment();
  }
  return success();
}

static LogicalResult verifyMtpBlocks(ModelOp model,
                                     ArrayRef<Operation *> mainOps,
                                     const hypipe::HybridPattern &pattern) {
  int64_t depth = 0;
  SmallVector<MtpOp> mtps;
  for (Operation *op : mainOps)
    if (auto mtp = dyn_cast<MtpOp>(op))
      mtps.push_back(mtp);
  for (MtpOp mtp : mtps) {
    ++depth;
    // model_c12
    if (mtp.getDepth() != depth)
      return mtp.emitOpError()
             << "depth " << mtp.getDepth() << " out of order, expected "
             << depth << " (model_c12)";
    // model_c13
    std::string mtpSpelled;
    for (Operation &op : mtp.getBody().front())
      if (char c = layerSymbol(&op))
        mtpSpelled.push_back(c);
    if (mtpSpelled != pattern.mtp)
      return mtp.emitOpError() << "layers spell '" << mtpSpelled
                               << "' but the pattern's MTP part is '"
                               << pattern.mtp << "' (model_c13)";
  }
  // model_c14
  if (depth != pattern.mtpDepths)
    return model.emitOpError()
           << "pattern has " << pattern.mtpDepths << " MTP depths but the body "
           << "has " << depth << " hybrid.mtp blocks (model_c14)";
  // model_c15
  const int64_t ep = model.getParallel().getEp();
  const int64_t experts = model.getDims().getNumExperts();
  if (ep > 1 && (experts < 1 || experts % ep != 0))
    return model.emitOpError() << "ep " << ep << " must divide num_experts ("
                               << experts << ") (model_c15)";
  return success();
}

LogicalResult ModelOp::verify() {
  Block &body = getBody().front();
  // model_c1
  if (body.getNumArguments() != 2 ||
      !isIntegerTensor(body.getArgument(0).getType(), 2) ||
      body.getArgument(0).getType() != body.getArgument(1).getType())
    return emitOpError()
           << "body must take two rank-2 integer tensors of one shape "
              "(tokens, labels) (model_c1)";
  // model_c2
  SmallVector<Operation *> mainOps;
  collectMainOps(getBody(), mainOps);
  Operation *firstHybrid = nullptr;
  int64_t embeddingCount = 0;
  for (Operation *op : mainOps) {
    if (!firstHybrid && isa<HybridDialect>(op->getDialect()))
      firstHybrid = op;
    embeddingCount += isa<EmbeddingOp>(op);
  }
  if (!isa_and_nonnull<EmbeddingOp>(firstHybrid) || embeddingCount != 1)
    return emitOpError() << "the first op of the main stack must be its only "
                            "hybrid.embedding (model_c2)";
  // model_c3
  auto pattern = hypipe::parseHybridPattern(getPattern());
  if (!pattern)
    return emitOpError() << "pattern '" << getPattern()
                         << "' is invalid: " << toString(pattern.takeError())
                         << " (model_c3)";
  // model_c4
  SmallVector<Operation *> layers = getMainLayers();
  std::string spelled;
  for (Operation *layer : layers)
    spelled.push_back(layerSymbol(layer));
  if (spelled != pattern->layers())
    return emitOpError() << "layers spell '" << spelled
                         << "' but the pattern's main part is '"
                         << pattern->layers() << "' (model_c4)";
  // model_c5
  SmallVector<Operation *> norms, outputs;
  for (Operation *op : mainOps) {
    if (isa<FinalNormOp>(op))
      norms.push_back(op);
    if (isa<OutputOp>(op))
      outputs.push_back(op);
  }
  if (norms.size() != 1 || outputs.size() != 1)
    return emitOpError() << "needs exactly one hybrid.final_norm and one "
                            "hybrid.output (model_c5)";
  auto position = [&](Operation *op) {
    return llvm::find(mainOps, op) - mainOps.begin();
  };
  if (position(norms[0]) > position(outputs[0]) ||
      (!layers.empty() && position(layers.back()) > position(norms[0])))
    return emitOpError() << "hybrid.final_norm and then hybrid.output must "
                            "follow the last layer (model_c5)";
  // model_c6
  ParallelAttr parallel = getParallel();
  int64_t segments = pattern->numSegments();
  if (segments > 1 && segments != parallel.getPp() * parallel.getVpp())
    return emitOpError() << "pattern has " << segments
                         << " segments but pp * vpp = " << parallel.getPp()
                         << " * " << parallel.getVpp() << " (model_c6)";
  if (failed(verifyPlacements(*this, layers, *pattern)) ||
      failed(verifyMtpBlocks(*this, mainOps, *pattern)))
    return failure();
  return success();
}

LogicalResult ReturnOp::verify() {
  // return_c1
  for (Value loss : getLosses()) {
    auto type = dyn_cast<RankedTensorType>(loss.getType());
    if (!type || type.getRank() != 0 || !type.getElementType().isF32())
      return emitOpError() << "losses must be 0-d f32 tensors (return_c1)";
  }
  // return_c2
  ModelOp model = parentModel(*this);
  auto pattern = hypipe::parseHybridPattern(model.getPattern());
  int64_t expected = 1 + (pattern ? pattern->mtpDepths : 0);
  if (static_cast<int64_t>(getLosses().size()) != expected)
    return emitOpError()
           << "must return " << expected
           << " losses (the main loss and one per MTP depth), got "
           << getLosses().size() << " (return_c2)";
  // return_c3
  Block &body = model.getBody().front();
  auto outputs = body.getOps<OutputOp>();
  if (outputs.empty())
    return success(); // outlined into stages: the stages' results are returned
  SmallVector<Value> direct{(*outputs.begin()).getLoss()};
  for (MtpOp mtp : body.getOps<MtpOp>())
    direct.push_back(mtp.getLoss());
  if (SmallVector<Value>(getLosses()) != direct)
    return emitOpError()
           << "must return the loss of hybrid.output, then each MTP depth's "
              "loss in order (return_c3)";
  return success();
}

LogicalResult EmbeddingOp::verify() {
  // embedding_c0
  if (failed(verifyInsideModel(*this, "embedding_c0")))
    return failure();
  // embedding_c1
  auto tokens = dyn_cast<RankedTensorType>(getTokens().getType());
  if (!isIntegerTensor(tokens, 2))
    return emitOpError()
           << "tokens must be a rank-2 integer tensor (embedding_c1)";
  if (failed(verifyHiddenType(*this, getHidden().getType(), "result",
                              "embedding_c1")))
    return failure();
  auto hidden = cast<RankedTensorType>(getHidden().getType());
  if (hidden.getShape().take_front(2) != tokens.getShape())
    return emitOpError() << "result shape must be the tokens' shape plus the "
                            "hidden size (embedding_c1)";
  return success();
}

LogicalResult FinalNormOp::verify() {
  // final_norm_c0
  if (failed(verifyInsideModel(*this, "final_norm_c0")))
    return failure();
  // final_norm_c1
  return verifyHiddenType(*this, getInput().getType(), "input",
                          "final_norm_c1");
}

LogicalResult OutputOp::verify() {
  // output_c0
  if (failed(verifyInsideModel(*this, "output_c0")))
    return failure();
  // output_c1
  if (failed(verifyHiddenType(*this, getHidden().getType(), "hidden",
                              "output_c1")))
    return failure();
  auto hidden = cast<RankedTensorType>(getHidden().getType());
  if (!isIntegerTensor(getLabels().getType(), 2) ||
      cast<RankedTensorType>(getLabels().getType()).getShape() !=
          hidden.getShape().take_front(2))
    return emitOpError() << "labels must be a BxS integer tensor matching the "
                            "hidden states (output_c1)";
  auto loss = dyn_cast<RankedTensorType>(getLoss().getType());
  if (!loss || loss.getRank() != 0 || !loss.getElementType().isF32())
    return emitOpError() << "loss must be a 0-d f32 tensor (output_c1)";
  return success();
}

LogicalResult MtpOp::verify() {
  // mtp_c0
  if (failed(verifyInsideModel(*this, "mtp_c0")))
    return failure();
  // mtp_c1
  Block &block = getBody().front();
  Type hidden = getHidden().getType();
  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  if (block.getNumArguments() != 1 ||
      block.getArgument(0).getType() != hidden || !yield ||
      yield.getHidden().getType() != hidden ||
      getNextHidden().getType() != hidden)
    return emitOpError() << "body must take and yield the hidden-state type "
                         << hidden << " (mtp_c1)";
  auto loss = dyn_cast<RankedTensorType>(getLoss().getType());
  if (!loss || loss.getRank() != 0 || !loss.getElementType().isF32())
    return emitOpError() << "loss must be a 0-d f32 tensor (mtp_c1)";
  return success();
}

LogicalResult MambaOp::verify() { return verifyLayer(*this); }
LogicalResult AttentionOp::verify() { return verifyLayer(*this); }
LogicalResult MlpOp::verify() { return verifyLayer(*this); }
LogicalResult MoeOp::verify() { return verifyLayer(*this); }
LogicalResult GdnOp::verify() { return verifyLayer(*this); }
LogicalResult DsaOp::verify() { return verifyLayer(*this); }
LogicalResult MlaOp::verify() { return verifyLayer(*this); }

#define GET_OP_CLASSES
#include "dialects/hybrid/HybridOps.cpp.inc"
