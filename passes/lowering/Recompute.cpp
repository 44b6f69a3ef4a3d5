//===- Recompute.cpp - pipe-recompute -------------------------------------===//
//
// Full activation recompute as a change of each stage's kernel program: the
// layers of each chunk keep their saved tensors in the recompute buffer, the
// forward keeps the chunk's input, and the input-gradient pass runs the
// chunk's forward again from it just before the chunk's first input-gradient
// call. Nothing else moves, so every kernel sees the values it saw without
// recompute.
//
//===----------------------------------------------------------------------===//

#include "core/model/Recompute.h"
#include "core/model/TensorParallel.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace hypipe {

#define GEN_PASS_DEF_PIPERECOMPUTE
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {

using pipe::KernelLayerOp;
using pipe::KernelPass;
using pipe::Slot;

/// One chunk: layers of the program recomputed together, in forward order,
/// and whether its input is an activation the forward keeps (a chunk of
/// main layers) or the tokens and the normed hidden states the stage keeps
/// anyway (an MTP depth).
struct Chunk {
  std::vector<KernelLayerOp> layers;
  bool keepsInput = true;
};

bool isMain(KernelLayerOp l) { return l.getLayer() > 0; }

/// The chunks of `layers` (a program's, in order) under `spec`.
std::vector<Chunk> chunksOf(std::vector<KernelLayerOp> layers,
                            const RecomputeSpec &spec) {
  std::vector<KernelLayerOp> mains;
  for (KernelLayerOp l : layers)
    if (isMain(l))
      mains.push_back(l);
  std::vector<Chunk> chunks;
  for (auto [begin, end] : recomputeChunks(spec, int64_t(mains.size())))
    chunks.push_back(
        {std::vector<KernelLayerOp>(mains.begin() + begin, mains.begin() + end),
         true});
  // An MTP depth: its input projection and the layers up to its output.
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i].getKind() != pipe::KernelKind::mtp_input)
      continue;
    Chunk depth{{}, false};
    for (size_t j = i; j < layers.size() &&
                       layers[j].getKind() != pipe::KernelKind::mtp_output;
         ++j)
      depth.layers.push_back(layers[j]);
    chunks.push_back(std::move(depth));
  }
  return chunks;
}

class ProgramRewriter {
public:
  explicit ProgramRewriter(pipe::KernelProgramOp program)
      : program(program), context(program.getContext()),
        activation(int64_t(program.getBatch() * program.getSeq() *
                           program.getHidden()) *
                   int64_t(sizeof(float))),
        keptActivation(pipe::keptActivationBytes(program)) {
    for (auto l : program.getBody().front().getOps<KernelLayerOp>())
      layers.push_back(l);
    for (auto pass : program.getBody().front().getOps<pipe::KernelPassOp>())
      passes[size_t(pass.getPass())] = pass;
  }

  void rewrite(const RecomputeSpec &spec) {
    std::vector<Chunk> chunks = chunksOf(layers, spec);
    if (chunks.empty())
      return;
    std::vector<pipe::RangeAttr> checkpoints = placeBuffers(chunks);
    placeSlots();
    for (size_t c = 0; c < chunks.size(); ++c) {
      if (chunks[c].keepsInput)
        keepInput(chunks[c], checkpoints[c]);
      recomputeBeforeGradient(chunks[c], checkpoints[c]);
    }
  }

private:
  pipe::RangeAttr range(int64_t offset, int64_t bytes) {
    return pipe::RangeAttr::get(context, offset, bytes,
                                Float32Type::get(context));
  }

  /// The chunks' layers into the recompute buffer, the other layers' saved
  /// tensors packed from the saved buffer's start, then one checkpoint per
  /// chunk that keeps its input (null for the others).
  std::vector<pipe::RangeAttr> placeBuffers(const std::vector<Chunk> &chunks) {
    llvm::DenseSet<Operation *> recomputed;
    for (const Chunk &c : chunks)
      for (KernelLayerOp l : c.layers)
        recomputed.insert(l);
    int64_t kept = 0, again = 0;
    for (KernelLayerOp l : layers) {
      const int64_t bytes = l.getSaved().getBytes();
      int64_t &cursor = recomputed.contains(l) ? again : kept;
      l.setSavedAttr(range(cursor, bytes));
      if (recomputed.contains(l))
        l.setRecomputed(true);
      cursor += bytes;
    }
    std::vector<pipe::RangeAttr> checkpoints;
    // A checkpoint keeps the rank's rows (its sequence shard's with
    // sequence parallelism: what the stage's input holds).
    for (const Chunk &c : chunks) {
      checkpoints.push_back(c.keepsInput ? range(kept, keptActivation)
                                         : nullptr);
      kept += c.keepsInput ? keptActivation : 0;
    }
    OpBuilder b(context);
    program.setSavedBytesAttr(b.getI64IntegerAttr(kept));
    program.setRecomputeBytesAttr(b.getI64IntegerAttr(again));
    return checkpoints;
  }

  /// rc0 and rc1 after the workspace's other parts.
  void placeSlots() {
    const int64_t end = int64_t(program.getWorkspaceBytes());
    program.setRc0Attr(range(end, activation));
    program.setRc1Attr(range(end + activation, activation));
    program.setWorkspaceBytesAttr(
        OpBuilder(context).getI64IntegerAttr(end + 2 * activation));
  }

  /// The first call of `pass` that runs one of `chunk`'s layers.
  pipe::KernelCallOp firstCall(KernelPass pass, const Chunk &chunk) {
    for (auto call :
         passes[size_t(pass)].getBody().front().getOps<pipe::KernelCallOp>())
      for (KernelLayerOp l : chunk.layers)
        if (call.getLayer() == l.getResult())
          return call;
    return nullptr;
  }

  /// Forward: the chunk's input kept before its first layer reads it.
  void keepInput(const Chunk &chunk, pipe::RangeAttr checkpoint) {
    pipe::KernelCallOp first = firstCall(KernelPass::forward, chunk);
    OpBuilder b(first);
    b.create<pipe::KernelSaveOp>(first.getLoc(), slot(first.getIn()),
                                 checkpoint);
  }

  /// Input gradient: the chunk's forward again, from its kept input (or,
  /// an MTP depth, from what its input projection reads), before the
  /// gradient reaches the chunk.
  void recomputeBeforeGradient(const Chunk &chunk, pipe::RangeAttr checkpoint) {
    pipe::KernelCallOp first = firstCall(KernelPass::backward_input, chunk);
    OpBuilder b(first);
    const Location loc = first.getLoc();
    const Slot rc[2] = {Slot::rc0, Slot::rc1};
    int cur = 0;
    Slot x = Slot::none;
    if (checkpoint) {
      b.create<pipe::KernelLoadOp>(loc, checkpoint, slot(rc[cur]));
      x = rc[cur];
      cur ^= 1;
    }
    for (KernelLayerOp l : chunk.layers) {
      b.create<pipe::KernelRecomputeOp>(
          loc, l.getResult(), slot(x), slot(rc[cur]),
          pipe::collectivesAttr(
              context,
              pipe::collectivesOfCall(l, KernelPass::backward_input, true)));
      x = rc[cur];
      cur ^= 1;
    }
  }

  pipe::SlotAttr slot(Slot s) { return pipe::SlotAttr::get(context, s); }

public:
  /// Selective recompute of `modules`: each attention, MLP and MoE layer
  /// keeps the tensors of the modules it has in the recompute buffer and
  /// computes them again just before its input gradient.
  LogicalResult rewriteSelective(RecomputeModuleSet modules) {
    const rt::TokenShape tokens{int64_t(program.getBatch()),
                                int64_t(program.getSeq())};
    const rt::Target target = pipe::targetOf(program);
    int64_t kept = 0, again = 0;
    std::vector<KernelLayerOp> selective;
    for (KernelLayerOp l : layers) {
      std::string error;
      FailureOr<rt::LayerShape> shape =
          pipe::readShape(l.getKind(), l.getShape(), error);
      if (failed(shape))
        return l.emitOpError() << error;
      // A rank keeps its shard's tensors (tensor parallelism).
      shape = rt::tensorParallelShard(*shape, pipe::tensorParallelOf(program),
                                      bool(program.getSequenceParallel()));
      const RecomputeModuleSet drops =
          modules & rt::selectiveModulesOf(rt::kindOf(*shape));
      const int64_t f32 = int64_t(sizeof(float));
      const int64_t dropped =
          f32 * rt::recomputedFloatsOf(*shape, tokens, drops);
      const int64_t bytes =
          f32 * rt::savedFloatsOf(*shape, tokens, target) - dropped;
      l.setSavedAttr(range(kept, bytes));
      kept += bytes;
      if (!drops)
        continue;
      l.setModulesAttr(pipe::modulesAttr(context, drops));
      l.setAgainAttr(range(again, dropped));
      again += dropped;
      selective.push_back(l);
    }
    if (selective.empty())
      return success();
    OpBuilder b(context);
    program.setSavedBytesAttr(b.getI64IntegerAttr(kept));
    program.setRecomputeBytesAttr(b.getI64IntegerAttr(again));
    // The moe module runs the layer's forward again, from its kept input
    // (through rc1) to an output it drops (rc0).
    const bool wholeMoe = modules & moduleBit(RecomputeModule::Moe);
    if (wholeMoe)
      placeSlots();
    for (KernelLayerOp l : selective) {
      pipe::KernelCallOp first =
          firstCall(KernelPass::backward_input, Chunk{{l}, false});
      const bool forward = wholeMoe && l.getKind() == pipe::KernelKind::moe;
      OpBuilder(first).create<pipe::KernelRecomputeOp>(
          first.getLoc(), l.getResult(), slot(Slot::none),
          slot(forward ? Slot::rc0 : Slot::none),
          pipe::collectivesAttr(
              context,
              pipe::collectivesOfCall(l, KernelPass::backward_input, true)));
    }
    return success();
  }

  pipe::KernelProgramOp program;
  MLIRContext *context;
  /// One activation slot's bytes ([tokens, hidden] whole), and one
  /// checkpoint's (the rank's rows: rt::rankActivationFloats).
  const int64_t activation, keptActivation;
  std::vector<KernelLayerOp> layers;
  pipe::KernelPassOp passes[3];
};

} // namespace

LogicalResult recomputeActivations(hybrid::ModelOp model,
                                   const RecomputeSpec &spec) {
  if (spec.granularity == RecomputeGranularity::None)
    return success();
  const RecomputeModuleSet modules = selectiveModuleSet(spec);
  for (auto stage : model.getBody().front().getOps<pipe::StageOp>())
    for (auto program :
         stage.getBody().front().getOps<pipe::KernelProgramOp>()) {
      if (program.getRecomputeBytes())
        return program.emitOpError()
               << "is recomputed already: run pipe-recompute once";
      if (spec.full())
        ProgramRewriter(program).rewrite(spec);
      else if (failed(ProgramRewriter(program).rewriteSelective(modules)))
        return failure();
    }
  return success();
}

namespace {
struct PipeRecomputePass : impl::PipeRecomputeBase<PipeRecomputePass> {
  using PipeRecomputeBase::PipeRecomputeBase;
  void runOnOperation() override {
    RecomputeSpec spec;
    std::optional<RecomputeGranularity> g =
        parseRecomputeGranularity(granularity);
    std::optional<RecomputeMethod> m = parseRecomputeMethod(method);
    if (!g || !m) {
      getOperation().emitError()
          << "pipe-recompute: unknown " << (g ? "method '" : "granularity '")
          << (g ? method : granularity) << "'";
      return signalPassFailure();
    }
    spec.granularity = *g;
    spec.method = *m;
    spec.numLayers = numLayers;
    for (const std::string &name : modules) {
      std::optional<RecomputeModule> module = parseRecomputeModule(name);
      if (!module) {
        getOperation().emitError()
            << "pipe-recompute: unknown module '" << name << "'";
        return signalPassFailure();
      }
      spec.modules.push_back(*module);
    }
    if (spec.granularity == RecomputeGranularity::Selective &&
        spec.modules.empty())
      spec.modules.push_back(RecomputeModule::CoreAttn);
    if (spec.full() && numLayers < 1) {
      getOperation().emitError()
          << "pipe-recompute: full recompute needs num-layers >= 1, got "
          << int64_t(numLayers);
      return signalPassFailure();
    }
    if (failed(recomputeActivations(getOperation(), spec)))
      signalPassFailure();
  }
};
} // namespace

} // namespace hypipe
