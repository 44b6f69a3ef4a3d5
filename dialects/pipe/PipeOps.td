#ifndef HYPIPE_PIPE_OPS
#define HYPIPE_PIPE_OPS

include "dialects/pipe/PipeDialect.td"
include "dialects/pipe/PipeAttrs.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Pipe_StageOp : Pipe_Op<"stage", [SingleBlock]> {
  let summary = "The layers one (pp_rank, vp_stage) runs";
  let description = [{
    Takes the values it needs from earlier stages or from the model's
    arguments (tokens, labels) and yields what later stages or the model's
    `hybrid.return` need.

    (stage_c1) It is directly in a `hybrid.model`; `pp_rank < pp`, `vp_stage < vpp`
         and `(pp_rank, vp_stage)` is where the schedule's placement puts
         stage `index` (core/schedule/Vocabulary.h: the loop,
         `index = vp_stage * pp + pp_rank`, or zbv's V).
    (stage_c2) The body's block arguments have the types of the inputs and its
         `pipe.yield` the types of the results.
    (stage_c3) The stages of a model appear in index order, 0 to `pp * vpp - 1`.
    (stage_c4) Every input is an argument of the model or a result of an earlier
         stage.
    (stage_c5) With a `pipe.buffer_plan`, every layer's `pipe.kernel` ranges lie
         inside the plan's buffers, and no two layers' parameter ranges, nor
         two saved ranges, overlap.
  }];
  let arguments = (ins I64Attr:$index, I64Attr:$pp_rank, I64Attr:$vp_stage,
                       Variadic<AnyType>:$inputs);
  let results = (outs Variadic<AnyType>:$outputs);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $index `rank` $pp_rank `chunk` $vp_stage (`inputs` `(` $inputs^ `:` type($inputs) `)`)?
    attr-dict-with-keyword (`->` type($outputs)^)? $body
  }];
  let hasVerifier = 1;
}

def Pipe_YieldOp : Pipe_Op<"yield", [Terminator, HasParent<"StageOp">, Pure]> {
  let summary = "Ends a stage with the values later stages need";
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

class Pipe_TransferOp<string mnemonic, list<Trait> traits = []>
    : Pipe_Op<mnemonic, traits> {
  let hasVerifier = 1;
}

def Pipe_SendOp : Pipe_TransferOp<"send"> {
  let summary = "Sends activations to the next stage, on another rank";
  let description = [{
    (send_c1) It is in a `pipe.stage`; `peer` is a rank of the model other than the
         stage's own; `peer_stage` is the next stage (index + 1) and runs on
         `peer`.
  }];
  let arguments = (ins AnyRankedTensor:$value, I64Attr:$peer, I64Attr:$peer_stage);
  let assemblyFormat = "$value `to` $peer `stage` $peer_stage attr-dict `:` type($value)";
}

def Pipe_RecvOp : Pipe_TransferOp<"recv"> {
  let summary = "Receives activations from the previous stage, on another rank";
  let description = [{
    (recv_c1) It is in a `pipe.stage`; `peer` is a rank of the model other than the
         stage's own; `peer_stage` is the previous stage (index - 1) and runs
         on `peer`.
  }];
  let arguments = (ins I64Attr:$peer, I64Attr:$peer_stage);
  let results = (outs AnyRankedTensor:$value);
  let assemblyFormat = "`from` $peer `stage` $peer_stage attr-dict `:` type($value)";
}

def Pipe_SendGradOp : Pipe_TransferOp<"send_grad"> {
  let summary = "Sends the gradient of received activations back to their sender";
  let description = [{
    The tensor sent is d(loss)/d(`value`), with `value`'s type.

    (send_grad_c1) `value` is the result of a `pipe.recv` in the same stage, and `peer`
         and `peer_stage` are that receive's.
  }];
  let arguments = (ins AnyRankedTensor:$value, I64Attr:$peer, I64Attr:$peer_stage);
  let assemblyFormat = "$value `to` $peer `stage` $peer_stage attr-dict `:` type($value)";
}

def Pipe_RecvGradOp : Pipe_TransferOp<"recv_grad"> {
  let summary = "Receives the gradient of activations this stage sent";
  let description = [{
    (recv_grad_c1) `value` is sent by a `pipe.send` in the same stage, and `peer` and
         `peer_stage` are that send's.
  }];
  let arguments = (ins AnyRankedTensor:$value, I64Attr:$peer, I64Attr:$peer_stage);
  let assemblyFormat = "$value `from` $peer `stage` $peer_stage attr-dict `:` type($value)";
}

def Pipe_GradAllReduceOp : Pipe_TransferOp<"grad_allreduce"> {
  let summary = "Averages this stage's parameter gradients over the data-parallel group";
  let description = [{
    (grad_allreduce_c1) It is in a `pipe.stage` and `dp` equals the model's `dp`, which is
         greater than 1.
  }];
  let arguments = (ins I64Attr:$dp);
  let assemblyFormat = "`dp` $dp attr-dict";
}

def Pipe_TiedEmbeddingAllReduceOp : Pipe_TransferOp<"tied_embedding_allreduce"> {
  let summary = "Sums the gradient of the embedding weight shared with the output layer";
  let description = [{
    With `tie_embeddings`, the first stage (embedding) and the last (output
    layer) hold copies of one weight; their gradients are summed.

    (tied_embedding_allreduce_c1) The model ties its embeddings; the op is in the first or the last
         stage, and `peer` is the rank of the other one, not the stage's own.
  }];
  let arguments = (ins I64Attr:$peer);
  let assemblyFormat = "`with` $peer attr-dict";
}

def Pipe_ProgramOp : Pipe_Op<"program"> {
  let summary = "One rank's schedule: its ordered actions";
  let description = [{
    The ordered actions of rank `pp_rank` in PyTorch pipelining's text
    (`2F0`, `1SEND_F3`, `0RECV_B1`, `3I1`, `3W1`; stages are the model's
    `pipe.stage` indices), produced by `pipe-build-schedule` and
    `pipe-insert-comms` and checked by `pipe-verify-schedule`
    (docs/schedules.md).

    (program_c1) It is directly in a `hybrid.model` that has `pipe.stage` ops;
         `pp_rank` is a rank of the model, programs appear in rank order, one
         per rank.
    (program_c2) Every action parses and names a stage that runs on `pp_rank` and a
         microbatch below the model's `microbatches`.
  }];
  let arguments = (ins I64Attr:$pp_rank, StrAttr:$schedule, StrArrayAttr:$actions);
  let assemblyFormat = "`rank` $pp_rank $schedule $actions attr-dict";
  let hasVerifier = 1;
}

#endif // HYPIPE_PIPE_OPS
