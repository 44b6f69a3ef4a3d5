//===- LowerKernels.cpp - pipe-lower-kernels ------------------------------===//
//
// Each stage's kernel program: its planned layers as pipe.kernel_layer ops,
// then the calls of its three passes. Forward runs the layers in order from
// the stage's input to its output, input gradients in reverse from the
// output's gradient to the input's; the layers write alternately into the
// workspace's two activation slots, except the last (forward) or first
// (backward) mixer of a stage without the head or embedding, which writes
// the stage's output or input gradient itself.
//
//===----------------------------------------------------------------------===//

#include "core/model/TensorParallel.h"
#include "passes/Passes.h"
#include "passes/lowering/KernelPlan.h"

#include "mlir/IR/Builders.h"

namespace hypipe {

#define GEN_PASS_DEF_PIPELOWERKERNELS
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {

using cpu::KernelLayer;
using cpu::StagePlan;
using pipe::Slot;
using rt::LayerKind;

class ProgramEmitter {
public:
  ProgramEmitter(pipe::StageOp stage, const StagePlan &plan)
      : plan(plan), b(stage.getBody().front().getTerminator()),
        context(stage.getContext()) {}

  void emit(Location loc) {
    auto program = b.create<pipe::KernelProgramOp>(
        loc, TypeAttr::get(plan.activations), i64(plan.tokens.batch),
        i64(plan.tokens.seq), i64(plan.hidden), i64(plan.numLayers),
        i64(plan.paramBytes), i64(plan.savedBytes), i64(plan.workspaceBytes),
        range(0, plan.activationBytes()),
        range(plan.activationBytes(), plan.activationBytes()),
        range(2 * plan.activationBytes(),
              plan.workspaceBytes - 2 * plan.activationBytes()),
        nullptr, nullptr, nullptr, nullptr, nullptr,
        plan.tensorParallel > 1 ? i64(plan.tensorParallel) : nullptr,
        plan.sequenceParallel ? b.getUnitAttr() : nullptr);
    placeSharedTensors(program);
    b.setInsertionPointToStart(&program.getBody().emplaceBlock());
    for (const KernelLayer &l : plan.layers)
      layers.push_back(b.create<pipe::KernelLayerOp>(
          loc, pipe::LayerType::get(context),
          pipe::KernelKindAttr::get(context, pipe::kernelKind(l.kind)),
          i64(l.layer), b.getStringAttr(l.prefix),
          range(l.paramOffset, l.paramBytes),
          range(l.savedOffset, l.savedBytes), pipe::shapeAttr(context, l.shape),
          /*recomputed=*/nullptr, /*modules=*/nullptr, /*again=*/nullptr));
    emitPass(loc, pipe::KernelPass::forward, [&] { forward(loc); });
    emitPass(loc, pipe::KernelPass::backward_input,
             [&] { backwardInput(loc); });
    emitPass(loc, pipe::KernelPass::backward_weight, [&] {
      for (size_t i = layers.size(); i-- > 0;)
        call(loc, i, Slot::none, Slot::none);
    });
  }

private:
  IntegerAttr i64(int64_t value) { return b.getI64IntegerAttr(value); }

  pipe::RangeAttr range(int64_t offset, int64_t bytes) {
    return pipe::RangeAttr::get(context, offset, bytes,
                                Float32Type::get(context));
  }

  template <typename Body>
  void emitPass(Location loc, pipe::KernelPass pass, Body body) {
    OpBuilder::InsertionGuard guard(b);
    auto op = b.create<pipe::KernelPassOp>(
        loc, pipe::KernelPassAttr::get(context, pass));
    b.setInsertionPointToStart(&op.getBody().emplaceBlock());
    currentPass = pass;
    body();
  }

  /// A layer's call in the current pass, with the tensor-parallel
  /// collectives its kernels run.
  void call(Location loc, size_t layer, Slot in, Slot out) {
    auto op = layers[layer].getDefiningOp<pipe::KernelLayerOp>();
    b.create<pipe::KernelCallOp>(
        loc, layers[layer], slot(in), slot(out),
        pipe::collectivesAttr(context,
                              pipe::collectivesOfCall(op, currentPass, false)));
  }

  pipe::SlotAttr slot(Slot s) { return pipe::SlotAttr::get(context, s); }

  LayerKind kind(size_t i) const { return plan.layers[i].kind; }

  /// The first layer reads the stage input, the last writes the stage
  /// output; the head and an MTP depth's output end in a loss.
  void forward(Location loc) {
    const Slot acts[2] = {Slot::act0, Slot::act1};
    Slot x = Slot::input;
    int cur = 0;
    bool wroteOutput = false;
    for (size_t i = 0; i < layers.size(); ++i) {
      if (kind(i) == LayerKind::Head || kind(i) == LayerKind::MtpOutput) {
        call(loc, i, x, Slot::none);
        continue;
      }
      const bool lastMixer = !plan.hasHead && i + 1 == layers.size();
      const Slot dst = lastMixer ? Slot::output : acts[cur];
      const bool readsX =
          kind(i) != LayerKind::Embedding && kind(i) != LayerKind::MtpInput;
      call(loc, i, readsX ? x : Slot::none, dst);
      wroteOutput |= lastMixer;
      x = dst;
      cur ^= 1;
    }
    if (!plan.hasHead && !wroteOutput)
      b.create<pipe::KernelCopyOp>(loc, slot(x), slot(Slot::output));
  }

  /// Layers in reverse: the head and an MTP depth's output start from
  /// their loss, the first layer writes the stage's input gradient.
  void backwardInput(Location loc) {
    const Slot acts[2] = {Slot::act0, Slot::act1};
    Slot dy = Slot::grad_output;
    int cur = 0;
    bool wroteGradInput = false;
    for (size_t i = layers.size(); i-- > 0;) {
      if (kind(i) == LayerKind::Embedding) {
        call(loc, i, dy, Slot::none);
        continue;
      }
      const bool firstMixer = !plan.hasEmbedding && i == 0;
      const Slot dst = firstMixer ? Slot::grad_input : acts[cur];
      const bool fromLoss =
          kind(i) == LayerKind::Head || kind(i) == LayerKind::MtpOutput;
      call(loc, i, fromLoss ? Slot::none : dy, dst);
      wroteGradInput |= firstMixer;
      dy = dst;
      cur ^= 1;
    }
    if (!plan.hasEmbedding && !wroteGradInput)
      b.create<pipe::KernelCopyOp>(loc, slot(dy), slot(Slot::grad_input));
  }

  /// Where the tensors an MTP depth shares with the model sit in the
  /// stage's parameters: the output layer (the head's) and the embedding
  /// table, this rank's shards of them (their vocabulary's tp-th).
  void placeSharedTensors(pipe::KernelProgramOp program) {
    bool mtp = false;
    int64_t output = -1, table = -1, vocab = 0;
    for (const KernelLayer &l : plan.layers) {
      mtp |= l.kind == LayerKind::MtpInput;
      int64_t at = l.paramOffset;
      for (const rt::ParamSpec &param : l.params) {
        if (l.kind == LayerKind::Head &&
            param.name != "decoder.final_norm.weight") {
          output = at;
          vocab = std::get<rt::HeadShape>(l.shape).vocab / plan.tensorParallel;
        }
        if (table < 0 &&
            l.parameterName(param) == "embedding.word_embeddings.weight")
          table = at;
        at += int64_t(sizeof(float)) *
              rt::rankNumel({param}, plan.tensorParallel);
      }
    }
    if (!mtp)
      return;
    const int64_t bytes = int64_t(sizeof(float)) * vocab * plan.hidden;
    program.setSharedOutputAttr(range(output, bytes));
    program.setSharedTableAttr(range(table, bytes));
  }

  const StagePlan &plan;
  OpBuilder b;
  MLIRContext *context;
  std::vector<Value> layers;
  pipe::KernelPass currentPass = pipe::KernelPass::forward;
};

} // namespace

LogicalResult lowerKernels(hybrid::ModelOp model) {
  for (auto stage : model.getBody().front().getOps<pipe::StageOp>()) {
    for (auto old : llvm::make_early_inc_range(
             stage.getBody().front().getOps<pipe::KernelProgramOp>()))
      old.erase();
    FailureOr<StagePlan> plan = cpu::planStage(stage);
    if (failed(plan))
      return failure();
    ProgramEmitter(stage, *plan).emit(stage.getLoc());
  }
  return success();
}

namespace {
struct PipeLowerKernelsPass : impl::PipeLowerKernelsBase<PipeLowerKernelsPass> {
  void runOnOperation() override {
    if (failed(lowerKernels(getOperation())))
      signalPassFailure();
  }
};
} // namespace

} // namespace hypipe
