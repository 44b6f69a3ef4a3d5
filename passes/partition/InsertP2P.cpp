//===- InsertP2P.cpp - pipe-insert-p2p ------------------------------------===//
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace hypipe {

#define GEN_PASS_DEF_PIPEINSERTP2P
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {

/// Recreates `stage` without the results nobody uses.
void dropUnusedResults(pipe::StageOp stage) {
  SmallVector<unsigned> kept;
  for (OpResult result : stage.getResults())
    if (!result.use_empty())
      kept.push_back(result.getResultNumber());
  if (kept.size() == stage.getNumResults())
    return;
  auto yield = cast<pipe::YieldOp>(stage.getBody().front().getTerminator());
  SmallVector<Type> types;
  SmallVector<Value> yielded;
  for (unsigned i : kept) {
    types.push_back(stage.getResult(i).getType());
    yielded.push_back(yield.getValues()[i]);
  }
  OpBuilder b(stage);
  auto replacement = b.create<pipe::StageOp>(
      stage.getLoc(), types, stage.getIndex(), stage.getPpRank(),
      stage.getVpStage(), stage.getInputs());
  replacement.getBody().takeBody(stage.getBody());
  OpBuilder inside(yield);
  inside.create<pipe::YieldOp>(yield.getLoc(), yielded);
  yield.erase();
  for (auto [newIndex, oldIndex] : llvm::enumerate(kept))
    stage.getResult(oldIndex).replaceAllUsesWith(
        replacement.getResult(newIndex));
  stage.erase();
}

bool hasHybridOps(pipe::StageOp stage) {
  bool found = false;
  stage.getBody().walk([&](Operation *op) {
    found |= isa<hybrid::HybridDialect>(op->getDialect());
  });
  return found;
}

} // namespace

LogicalResult insertP2P(hybrid::ModelOp model) {
  Block &body = model.getBody().front();
  SmallVector<pipe::StageOp> stages(body.getOps<pipe::StageOp>());
  if (stages.empty())
    return model.emitOpError()
           << "has no pipe.stage ops: run pipe-outline-stages first";
  for (pipe::StageOp stage : stages)
    if (!stage.getBody().getOps<pipe::RecvOp>().empty() ||
        !stage.getBody().getOps<pipe::SendOp>().empty())
      return model.emitOpError()
             << "already has send/recv: run pipe-insert-p2p once";
  Location loc = model.getLoc();

  for (pipe::StageOp consumer : stages) {
    Block &block = consumer.getBody().front();
    auto consumerYield = cast<pipe::YieldOp>(block.getTerminator());
    for (int i = static_cast<int>(consumer.getNumOperands()) - 1; i >= 0; --i) {
      Value input = consumer.getInputs()[i];
      auto producer = input.getDefiningOp<pipe::StageOp>();
      if (!producer || producer.getPpRank() == consumer.getPpRank())
        continue; // a model argument, or a local hand-off on one rank
      int64_t from = producer.getPpRank(), to = consumer.getPpRank();
      // Producer: send the activations, receive their gradient.
      auto producerYield =
          cast<pipe::YieldOp>(producer.getBody().front().getTerminator());
      Value sent =
          producerYield.getValues()[cast<OpResult>(input).getResultNumber()];
      OpBuilder atProducerEnd(producerYield);
      atProducerEnd.create<pipe::SendOp>(loc, sent, to, consumer.getIndex());
      atProducerEnd.create<pipe::RecvGradOp>(loc, sent, to,
                                             consumer.getIndex());
      // Consumer: receive the activations, send their gradient back.
      OpBuilder atConsumerStart = OpBuilder::atBlockBegin(&block);
      auto recv = atConsumerStart.create<pipe::RecvOp>(
          loc, input.getType(), from, producer.getIndex());
      block.getArgument(i).replaceAllUsesWith(recv.getValue());
      OpBuilder atConsumerEnd(consumerYield);
      atConsumerEnd.create<pipe::SendGradOp>(loc, recv.getValue(), from,
                                             producer.getIndex());
      block.eraseArgument(i);
      consumer->eraseOperand(i);
    }
  }

  // Gradient reductions.
  hybrid::ParallelAttr parallel = model.getParallel();
  for (pipe::StageOp stage : stages) {
    OpBuilder atEnd(stage.getBody().front().getTerminator());
    if (parallel.getDp() > 1 && hasHybridOps(stage))
      atEnd.create<pipe::GradAllReduceOp>(loc, parallel.getDp());
  }
  pipe::StageOp first = stages.front(), last = stages.back();
  if (model.getDims().getTieEmbeddings() &&
      first.getPpRank() != last.getPpRank()) {
    OpBuilder(first.getBody().front().getTerminator())
        .create<pipe::TiedEmbeddingAllReduceOp>(loc, last.getPpRank());
    OpBuilder(last.getBody().front().getTerminator())
        .create<pipe::TiedEmbeddingAllReduceOp>(loc, first.getPpRank());
  }

  for (pipe::StageOp stage :
       SmallVector<pipe::StageOp>(body.getOps<pipe::StageOp>()))
    dropUnusedResults(stage);
  return success();
}

namespace {
struct PipeInsertP2PPass : impl::PipeInsertP2PBase<PipeInsertP2PPass> {
  void runOnOperation() override {
    if (failed(insertP2P(getOperation())))
      signalPassFailure();
  }
};
} // namespace

} // namespace hypipe
