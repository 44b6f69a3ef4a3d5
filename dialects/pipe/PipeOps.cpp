//===- PipeOps.cpp - verifiers of the pipe dialect ------------------------===//
//
// Each check is tagged with the invariant it enforces, labelled as in
// PipeOps.td and PipeAttrs.td (`stage_c3`), and its message ends with it.
//
//===----------------------------------------------------------------------===//
#include "dialects/pipe/PipeOps.h"
#include "core/schedule/Schedule.h"
#include "dialects/hybrid/HybridOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace hypipe;
using namespace hypipe::pipe;

namespace {

hybrid::ParallelAttr parallelOf(Operation *op) {
  auto model = op->getParentOfType<hybrid::ModelOp>();
  return model ? model.getParallel() : hybrid::ParallelAttr();
}

/// The stage an op is in, or an error on the op.
FailureOr<StageOp> enclosingStage(Operation *op, StringRef label) {
  auto stage = op->getParentOfType<StageOp>();
  if (!stage || !stage->getParentOfType<hybrid::ModelOp>())
    return op->emitOpError()
           << "must be inside a pipe.stage of a hybrid.model (" << label << ")";
  return stage;
}

/// The stage with `index` among the siblings of `stage`, if any.
StageOp siblingStage(StageOp stage, int64_t index) {
  for (Operation &op : *stage->getBlock())
    if (auto other = dyn_cast<StageOp>(op); other && other.getIndex() == index)
      return other;
  return {};
}

/// `peer` is another rank of the model and runs stage `peerStage`.
LogicalResult verifyPeer(Operation *op, StringRef label, StageOp stage,
                         int64_t peer, int64_t peerStage,
                         int64_t expectedStage) {
  int64_t pp = parallelOf(op).getPp();
  if (peer < 0 || peer >= pp || peer == static_cast<int64_t>(stage.getPpRank()))
    return op->emitOpError()
           << "peer " << peer << " must be a rank in [0, " << pp
           << ") other than the stage's own (" << stage.getPpRank() << ")"
           << " (" << label << ")";
  if (peerStage != expectedStage)
    return op->emitOpError() << "peer_stage must be " << expectedStage
                             << ", got " << peerStage << " (" << label << ")";
  int64_t peerRank = schedule::rankOfStage(
      schedule::placementOf(parallelOf(op).getScheduleKind()), pp, peerStage);
  if (peerRank != peer)
    return op->emitOpError()
           << "stage " << peerStage << " runs on rank " << peerRank
           << ", not on " << peer << " (" << label << ")";
  return success();
}

} // namespace

LogicalResult StageOp::verify() {
  // stage_c1
  auto model = dyn_cast_or_null<hybrid::ModelOp>((*this)->getParentOp());
  if (!model)
    return emitOpError() << "must be directly inside a hybrid.model"
                         << " (stage_c1)";
  auto parallel = model.getParallel();
  int64_t pp = parallel.getPp(), vpp = parallel.getVpp();
  int64_t index = getIndex(), rank = getPpRank(), chunk = getVpStage();
  auto placement = schedule::placementOf(parallel.getScheduleKind());
  if (rank >= pp || chunk >= vpp || index >= pp * vpp ||
      rank != schedule::rankOfStage(placement, pp, index) ||
      chunk != schedule::chunkOfStage(placement, pp, index))
    return emitOpError() << "stage " << index << " on rank " << rank
                         << ", chunk " << chunk << " does not fit pp = " << pp
                         << ", vpp = " << vpp
                         << (placement == schedule::Placement::V
                                 ? " (zbv: stage s < pp on rank s, chunk 0; "
                                   "stage s >= pp on rank 2 pp - 1 - s, "
                                   "chunk 1)"
                                 : " (index must be vp_stage * pp + pp_rank)")
                         << " (stage_c1)";
  // stage_c2
  Block &body = getBody().front();
  if (body.getArgumentTypes() != getInputs().getTypes())
    return emitOpError() << "block arguments must have the types of the inputs"
                         << " (stage_c2)";
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield || yield.getValues().getTypes() != getOutputs().getTypes())
    return emitOpError() << "must end in pipe.yield of the result types"
                         << " (stage_c2)";
  // stage_c3
  StageOp previous, next;
  for (Operation *op = (*this)->getPrevNode(); op && !previous;
       op = op->getPrevNode())
    previous = dyn_cast<StageOp>(op);
  for (Operation *op = (*this)->getNextNode(); op && !next;
       op = op->getNextNode())
    next = dyn_cast<StageOp>(op);
  int64_t expected =
      previous ? static_cast<int64_t>(previous.getIndex()) + 1 : 0;
  if (index != expected)
    return emitOpError() << "stage " << index
                         << " out of order: expected stage " << expected
                         << " (stage_c3)";
  if (!next && index != pp * vpp - 1)
    return emitOpError() << "the last stage must be stage " << pp * vpp - 1
                         << ", got " << index << " (stage_c3)";
  // stage_c4
  for (Value input : getInputs()) {
    if (auto arg = dyn_cast<BlockArgument>(input);
        arg && arg.getOwner()->getParentOp() == model.getOperation())
      continue;
    auto producer = input.getDefiningOp<StageOp>();
    if (!producer || producer.getIndex() >= getIndex())
      return emitOpError()
             << "inputs must be model arguments or results of earlier stages"
             << " (stage_c4)";
  }
  // stage_c5
  int programs = 0;
  for (Operation &op : getBody().front()) {
    if (!isa<KernelProgramOp>(op))
      continue;
    if (++programs > 1 || !isa<YieldOp>(op.getNextNode()))
      return op.emitOpError() << "must be its stage's only kernel program, "
                                 "just before the pipe.yield (stage_c5)";
  }
  return success();
}

LogicalResult SendOp::verify() {
  // send_c1
  auto stage = enclosingStage(*this, "send_c1");
  if (failed(stage))
    return failure();
  return verifyPeer(*this, "send_c1", *stage, getPeer(), getPeerStage(),
                    stage->getIndex() + 1);
}

LogicalResult RecvOp::verify() {
  // recv_c1
  auto stage = enclosingStage(*this, "recv_c1");
  if (failed(stage))
    return failure();
  return verifyPeer(*this, "recv_c1", *stage, getPeer(), getPeerStage(),
                    static_cast<int64_t>(stage->getIndex()) - 1);
}

LogicalResult SendGradOp::verify() {
  // send_grad_c1
  auto stage = enclosingStage(*this, "send_grad_c1");
  if (failed(stage))
    return failure();
  auto recv = getValue().getDefiningOp<RecvOp>();
  if (!recv || recv->getParentOfType<StageOp>() != *stage ||
      recv.getPeer() != getPeer() || recv.getPeerStage() != getPeerStage())
    return emitOpError() << "must send the gradient of a pipe.recv of this "
                            "stage, back to its "
                            "peer and stage"
                         << " (send_grad_c1)";
  return success();
}

LogicalResult RecvGradOp::verify() {
  // recv_grad_c1
  auto stage = enclosingStage(*this, "recv_grad_c1");
  if (failed(stage))
    return failure();
  for (Operation *user : getValue().getUsers())
    if (auto send = dyn_cast<SendOp>(user);
        send && send->getParentOfType<StageOp>() == *stage &&
        send.getPeer() == getPeer() && send.getPeerStage() == getPeerStage())
      return success();
  return emitOpError()
         << "must receive the gradient of a value this stage sends to the same "
            "peer and stage"
         << " (recv_grad_c1)";
}

LogicalResult GradAllReduceOp::verify() {
  // grad_allreduce_c1
  auto stage = enclosingStage(*this, "grad_allreduce_c1");
  if (failed(stage))
    return failure();
  int64_t dp = parallelOf(*this).getDp();
  if (dp < 2 || static_cast<int64_t>(getDp()) != dp)
    return emitOpError() << "dp must equal the model's dp (" << dp
                         << ") and be at least 2"
                         << " (grad_allreduce_c1)";
  return success();
}

LogicalResult TiedEmbeddingAllReduceOp::verify() {
  // tied_embedding_allreduce_c1
  auto stage = enclosingStage(*this, "tied_embedding_allreduce_c1");
  if (failed(stage))
    return failure();
  auto model = (*this)->getParentOfType<hybrid::ModelOp>();
  if (!model.getDims().getTieEmbeddings())
    return emitOpError() << "the model does not tie its embeddings"
                         << " (tied_embedding_allreduce_c1)";
  auto parallel = model.getParallel();
  int64_t last = parallel.getPp() * parallel.getVpp() - 1;
  int64_t index = stage->getIndex();
  if (index != 0 && index != last)
    return emitOpError() << "must be in the first or the last stage"
                         << " (tied_embedding_allreduce_c1)";
  int64_t other = index == 0
                      ? schedule::rankOfStage(
                            schedule::placementOf(parallel.getScheduleKind()),
                            parallel.getPp(), last)
                      : 0;
  if (static_cast<int64_t>(getPeer()) != other ||
      other == static_cast<int64_t>(stage->getPpRank()))
    return emitOpError() << "peer must be the rank of the other end (" << other
                         << "), on a different rank"
                         << " (tied_embedding_allreduce_c1)";
  return success();
}

LogicalResult ProgramOp::verify() {
  // program_c1
  auto model = dyn_cast_or_null<hybrid::ModelOp>((*this)->getParentOp());
  if (!model || model.getBody().front().getOps<StageOp>().empty())
    return emitOpError()
           << "must be directly inside a hybrid.model with pipe.stage ops"
           << " (program_c1)";
  auto parallel = model.getParallel();
  int64_t pp = parallel.getPp(), rank = getPpRank();
  int64_t previous = -1;
  for (Operation *op = (*this)->getPrevNode(); op && previous < 0;
       op = op->getPrevNode())
    if (auto program = dyn_cast<ProgramOp>(op))
      previous = program.getPpRank();
  if (rank >= pp || rank != previous + 1)
    return emitOpError() << "program of rank " << rank
                         << " out of order: expected rank " << previous + 1
                         << " (pp = " << pp << ")"
                         << " (program_c1)";
  // program_c2
  schedule::Schedule shape;
  shape.pp = pp;
  shape.vpp = parallel.getVpp();
  shape.microbatches = parallel.getMicrobatches();
  shape.placement = schedule::placementOf(parallel.getScheduleKind());
  for (auto [index, text] :
       llvm::enumerate(getActions().getAsValueRange<StringAttr>())) {
    auto action = schedule::parsePytorchAction(text, shape.actionContext());
    if (!action)
      return emitOpError() << "action " << index << ": "
                           << toString(action.takeError()) << " (program_c2)";
    if (shape.rankOf(action->stage) != rank)
      return emitOpError() << "action " << index << " ('" << text
                           << "') runs stage " << action->stage
                           << ", which is on rank "
                           << shape.rankOf(action->stage) << " (program_c2)";
  }
  return success();
}

#define GET_OP_CLASSES
#include "dialects/pipe/PipeOps.cpp.inc"
