//===- OutlineStages.cpp - pipe-outline-stages ----------------------------===//
#include "core/schedule/Schedule.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SetVector.h"

namespace hypipe {

#define GEN_PASS_DEF_PIPEOUTLINESTAGES
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {

bool isHiddenState(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.getRank() == 3;
}

/// The stage an op of the model body belongs to, or -1 if it cannot be
/// outlined.
int64_t stageOf(Operation &op, int64_t lastStage) {
  if (isa<hybrid::EmbeddingOp>(op))
    return 0;
  if (hybrid::layerSymbol(&op)) {
    auto placement = op.getAttrOfType<hybrid::PlacementAttr>("placement");
    return placement ? placement.getSegment() : -1;
  }
  if (isa<hybrid::FinalNormOp, hybrid::OutputOp, hybrid::MtpOp>(op))
    return lastStage;
  return -1;
}

/// What crosses the boundary of a stage holding `ops`: its inputs, values
/// of the model body (its arguments or results of ops of other stages) used
/// inside, and its outputs, results used outside.
std::pair<llvm::SetVector<Value>, llvm::SetVector<Value>>
boundaryOf(ArrayRef<Operation *> ops, Block &body) {
  llvm::SmallPtrSet<Operation *, 16> inStage(ops.begin(), ops.end());
  llvm::SetVector<Value> inputs, outputs;
  for (Operation *op : ops)
    op->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands()) {
        Operation *def = operand.getDefiningOp();
        bool external = def ? def->getBlock() == &body && !inStage.contains(def)
                            : cast<BlockArgument>(operand).getOwner() == &body;
        if (external)
          inputs.insert(operand);
      }
    });
  for (Operation *op : ops)
    for (Value result : op->getResults())
      for (Operation *user : result.getUsers())
        if (!inStage.contains(body.findAncestorOpInBlock(*user)))
          outputs.insert(result);
  return {inputs, outputs};
}

} // namespace

LogicalResult outlineStages(hybrid::ModelOp model) {
  Block &body = model.getBody().front();
  if (!body.getOps<pipe::StageOp>().empty())
    return model.emitOpError() << "is already outlined into pipe.stage ops";
  hybrid::ParallelAttr parallel = model.getParallel();
  int64_t pp = parallel.getPp(), numStages = pp * parallel.getVpp();

  std::vector<SmallVector<Operation *>> opsOfStage(numStages);
  for (Operation &op : body.without_terminator()) {
    int64_t stage = stageOf(op, numStages - 1);
    if (stage < 0 || stage >= numStages)
      return op.emitOpError()
             << "has no stage: run hybrid-assign-stages or "
                "hybrid-auto-partition before pipe-outline-stages";
    opsOfStage[stage].push_back(&op);
  }

  Operation *terminator = body.getTerminator();
  OpBuilder b(terminator);
  Location loc = model.getLoc();
  Value current; // the hidden states flowing from stage to stage
  for (int64_t index = 0; index < numStages; ++index) {
    SmallVector<Operation *> &ops = opsOfStage[index];
    auto [inputs, outputs] = boundaryOf(ops, body);
    if (ops.empty()) {
      if (!current)
        return model.emitOpError()
               << "stage 0 is empty: it must hold the embedding";
      inputs.insert(current);
    }

    SmallVector<Type> outputTypes;
    if (ops.empty())
      outputTypes.push_back(current.getType());
    for (Value v : outputs)
      outputTypes.push_back(v.getType());
    // zbv runs on a V (rank r holds stages r and 2 pp - 1 - r).
    auto placement = schedule::placementOf(parallel.getScheduleKind());
    auto stage = b.create<pipe::StageOp>(
        loc, outputTypes, index, schedule::rankOfStage(placement, pp, index),
        schedule::chunkOfStage(placement, pp, index), inputs.getArrayRef());
    Block *block = b.createBlock(&stage.getBody());
    for (Value input : inputs)
      block->addArgument(input.getType(), loc);
    for (Operation *op : ops)
      op->moveBefore(block, block->end());
    for (auto [input, arg] : llvm::zip(inputs, block->getArguments()))
      Value(input).replaceUsesWithIf(arg, [&](OpOperand &use) {
        return stage->isProperAncestor(use.getOwner());
      });
    OpBuilder inside = OpBuilder::atBlockEnd(block);
    SmallVector<Value> yielded(outputs.begin(), outputs.end());
    if (ops.empty())
      yielded.push_back(block->getArgument(0));
    inside.create<pipe::YieldOp>(loc, yielded);
    for (auto [value, result] :
         llvm::zip(outputs, stage.getResults().take_back(outputs.size())))
      Value(value).replaceUsesWithIf(result, [&](OpOperand &use) {
        return !stage->isProperAncestor(use.getOwner());
      });
    b.setInsertionPoint(terminator);

    if (index + 1 == numStages)
      break;
    // What the next stage receives: the last hidden-state result. An empty
    // stage takes over the flow for the ops not outlined yet.
    Value next;
    for (Value result : stage.getResults())
      if (isHiddenState(result.getType()))
        next = result;
    if (!next)
      return model.emitOpError()
             << "stage " << index << " passes no hidden states on";
    if (ops.empty())
      current.replaceUsesWithIf(next, [&](OpOperand &use) {
        Operation *ancestor = body.findAncestorOpInBlock(*use.getOwner());
        return ancestor && !isa<pipe::StageOp, hybrid::ReturnOp>(ancestor);
      });
    current = next;
  }
  return success();
}

namespace {
struct PipeOutlineStagesPass
    : impl::PipeOutlineStagesBase<PipeOutlineStagesPass> {
  void runOnOperation() override {
    if (failed(outlineStages(getOperation())))
      signalPassFailure();
  }
};
} // namespace

} // namespace hypipe
