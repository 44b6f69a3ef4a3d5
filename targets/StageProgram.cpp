//===- StageProgram.cpp - a kernel program as the manifest's stage --------===//

#include "targets/StageProgram.h"

#include "llvm/ADT/DenseMap.h"

namespace hypipe {
namespace {

rt::TensorRange rangeOf(pipe::RangeAttr range) {
  return {range.getOffset(), range.getBytes(),
          range.getDtype().isBF16() ? rt::DType::BF16 : rt::DType::F32};
}

rt::Slot slotOf(pipe::Slot slot) { return rt::Slot(int(slot)); }
static_assert(int(pipe::Slot::rc1) == int(rt::Slot::Rc1),
              "pipe.kernel_call slots are rt::Slot's, in its order");

/// The parameters of `layer`, from its shape, placed from its range's
/// start: their Megatron names, shapes and initialisation.
void addParams(pipe::KernelLayerOp layer, const rt::LayerShape &shape,
               int64_t numLayers, int64_t tp, rt::StageEntry &e) {
  const int64_t offset = rangeOf(layer.getParams()).elementOffset();
  const std::vector<rt::ParamSpec> params = rt::paramsOf(shape, numLayers);
  const std::vector<int64_t> offsets = rt::paramOffsets(params, tp);
  for (size_t i = 0; i < params.size(); ++i) {
    const rt::ParamSpec &p = params[i];
    rt::ParamEntry pe;
    pe.name = rt::parameterName(layer.getPrefix().str(), p);
    pe.shape = p.shape;
    pe.offset = offset + offsets[i];
    pe.split = p.split;
    pe.sections = p.sections;
    pe.expertRank = p.expertRank;
    pe.expertRanks = p.expertRanks;
    pe.expertTp = p.expertTp;
    pe.sharedByHeads = p.sharedByHeads;
    pe.numel = rt::paramNumel(p, tp);
    pe.init = rt::initName(p.init);
    pe.initA = p.a;
    pe.initB = p.b;
    pe.weightDecay = p.decay();
    e.params.push_back(std::move(pe));
  }
}

/// A call's `collectives` as the runtime's (`kind:floats`; the verifier
/// has checked them).
std::vector<rt::Collective> collectivesOf(mlir::ArrayAttr listed) {
  std::vector<rt::Collective> out;
  if (!listed)
    return out;
  for (llvm::StringRef text : listed.getAsValueRange<mlir::StringAttr>()) {
    auto [kind, floats] = text.split(':');
    rt::Collective c;
    c.kind = *rt::parseCollectiveKind(kind.str());
    floats.getAsInteger(10, c.perToken);
    out.push_back(c);
  }
  return out;
}

std::vector<rt::KernelCall>
callsOf(pipe::KernelPassOp pass,
        const llvm::DenseMap<mlir::Value, int32_t> &index) {
  std::vector<rt::KernelCall> calls;
  for (mlir::Operation &op : pass.getBody().front()) {
    if (auto call = mlir::dyn_cast<pipe::KernelCallOp>(op))
      calls.push_back({index.lookup(call.getLayer()),
                       slotOf(call.getIn()),
                       slotOf(call.getOut()),
                       rt::CallOp::Run,
                       {},
                       collectivesOf(call.getCollectivesAttr())});
    else if (auto copy = mlir::dyn_cast<pipe::KernelCopyOp>(op))
      calls.push_back({-1, slotOf(copy.getIn()), slotOf(copy.getOut())});
    else if (auto save = mlir::dyn_cast<pipe::KernelSaveOp>(op))
      calls.push_back({-1, slotOf(save.getIn()), rt::Slot::None,
                       rt::CallOp::Save, rangeOf(save.getRange())});
    else if (auto load = mlir::dyn_cast<pipe::KernelLoadOp>(op))
      calls.push_back({-1, rt::Slot::None, slotOf(load.getOut()),
                       rt::CallOp::Load, rangeOf(load.getRange())});
    else if (auto rc = mlir::dyn_cast<pipe::KernelRecomputeOp>(op))
      calls.push_back({index.lookup(rc.getLayer()),
                       slotOf(rc.getIn()),
                       slotOf(rc.getOut()),
                       rt::CallOp::Recompute,
                       {},
                       collectivesOf(rc.getCollectivesAttr())});
  }
  return calls;
}

} // namespace

mlir::FailureOr<rt::StageEntry> translateStage(pipe::StageOp stage,
                                               rt::Target target) {
  auto programs = stage.getBody().front().getOps<pipe::KernelProgramOp>();
  if (programs.empty())
    return stage.emitError()
           << "has no pipe.kernel_program: run pipe-lower-kernels first";
  pipe::KernelProgramOp program = *programs.begin();
  rt::StageEntry e;
  e.index = int64_t(stage.getIndex());
  e.ppRank = int64_t(stage.getPpRank());
  e.vpStage = int64_t(stage.getVpStage());
  e.batch = int64_t(program.getBatch());
  e.seq = int64_t(program.getSeq());
  e.hidden = int64_t(program.getHidden());
  rt::StageProgram &p = e.program;
  p.target = target;
  p.activations =
      program.getActivations().isBF16() ? rt::DType::BF16 : rt::DType::F32;
  p.tokens = rt::TokenShape{e.batch, e.seq};
  p.hidden = e.hidden;
  p.tensorParallel = pipe::tensorParallelOf(program);
  p.sequenceParallel = program.getSequenceParallel();
  p.paramBytes = int64_t(program.getParamBytes());
  p.savedBytes = int64_t(program.getSavedBytes());
  p.workspaceBytes = int64_t(program.getWorkspaceBytes());
  p.act0 = rangeOf(program.getAct0());
  p.act1 = rangeOf(program.getAct1());
  p.scratch = rangeOf(program.getScratch());
  if (auto shared = program.getSharedOutputAttr())
    p.sharedOutput = rangeOf(shared);
  if (auto shared = program.getSharedTableAttr())
    p.sharedTable = rangeOf(shared);
  if (std::optional<uint64_t> bytes = program.getRecomputeBytes())
    p.recomputeBytes = int64_t(*bytes);
  if (program.getRc0Attr()) {
    p.rc0 = rangeOf(program.getRc0Attr());
    p.rc1 = rangeOf(program.getRc1Attr());
  }
  // The manifest counts the buffers in f32 elements.
  const rt::DType f32 = rt::DType::F32;
  e.numParams = p.paramBytes / rt::dtypeBytes(f32);
  e.savedFloats = p.savedBytes / rt::dtypeBytes(f32);
  e.workspaceFloats = p.workspaceBytes / rt::dtypeBytes(f32);

  llvm::DenseMap<mlir::Value, int32_t> index;
  for (auto layer : program.getBody().front().getOps<pipe::KernelLayerOp>()) {
    std::string error;
    mlir::FailureOr<rt::LayerShape> shape =
        pipe::readShape(layer.getKind(), layer.getShape(), error);
    if (failed(shape))
      return layer.emitError() << error;
    const rt::LayerKind kind = pipe::layerKind(layer.getKind());
    e.hasEmbedding |= kind == rt::LayerKind::Embedding;
    e.hasHead |= kind == rt::LayerKind::Head;
    addParams(layer, *shape, int64_t(program.getNumLayers()), p.tensorParallel,
              e);
    index[layer.getResult()] = int32_t(p.layers.size());
    mlir::FailureOr<RecomputeModuleSet> modules =
        pipe::moduleSetOf(layer.getModulesAttr(), error);
    if (mlir::failed(modules))
      return layer.emitError() << error;
    p.layers.push_back({kind, int64_t(layer.getLayer()), *shape,
                        rangeOf(layer.getParams()), rangeOf(layer.getSaved()),
                        layer.getRecomputed(), *modules,
                        layer.getAgainAttr() ? rangeOf(layer.getAgainAttr())
                                             : rt::TensorRange{}});
  }
  if (std::string why = rt::shardLayers(p); !why.empty())
    return program.emitError() << why;
  for (auto pass : program.getBody().front().getOps<pipe::KernelPassOp>()) {
    std::vector<rt::KernelCall> calls = callsOf(pass, index);
    switch (pass.getPass()) {
    case pipe::KernelPass::forward:
      p.forward = std::move(calls);
      break;
    case pipe::KernelPass::backward_input:
      p.backwardInput = std::move(calls);
      break;
    case pipe::KernelPass::backward_weight:
      p.backwardWeight = std::move(calls);
      break;
    }
  }
  return e;
}

} // namespace hypipe
