#ifndef HYPIPE_PIPE_OPS
#define HYPIPE_PIPE_OPS

include "dialects/pipe/PipeDialect.td"
include "dialects/pipe/PipeAttrs.td"
include "mlir/IR/OpAsmInterface.td"
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
    (stage_c5) It holds at most one `pipe.kernel_program`, just before its
         `pipe.yield`.
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

//===----------------------------------------------------------------------===//
// Kernel programs
//===----------------------------------------------------------------------===//

def Pipe_KernelProgramOp : Pipe_Op<"kernel_program",
    [HasParent<"StageOp">, SingleBlock, NoTerminator]> {
  let summary = "A stage lowered to kernel calls over a typed buffer plan";
  let description = [{
    What `pipe-lower-kernels` lowers its stage to, and what the artifact
    holds of it (docs/artifact.md, "kernel program"): the stage's layers as
    `pipe.kernel_layer`s, each with its kernel, static shape and typed byte
    ranges of the stage's parameter buffer (its gradients mirror it) and of
    one microbatch's saved buffer; then three `pipe.kernel_pass`es --
    forward, input gradient, weight gradient -- listing the kernel calls in
    the order they run. The workspace, shared by every microbatch, holds the
    two activation slots the layers ping-pong between and the scratch of the
    largest layer. `activations` is what the kernels keep activations and
    their gradients in (f32, or bf16 values rounded in f32 storage:
    docs/precision.md); `tokens` the microbatch capacity the shapes are
    planned for; `layers` the model's main layers (it scales output
    projections' initial values).

        pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 2
            buffers(params 2008, saved 2192, workspace 352)
            act0 <offset = 0, bytes = 128, dtype = f32> ... {
          %0 = pipe.kernel_layer embedding layer 0 "" params <...> saved <...>
                   shape {hidden = 8 : i64, vocab = 16 : i64}
          pipe.kernel_pass forward {
            pipe.kernel_call %0(none) -> act0
            ...

    (kernel_program_c1) Its body holds `pipe.kernel_layer`s, then exactly
         three `pipe.kernel_pass`es: forward, backward_input, backward_weight.
    (kernel_program_c2) Buffer sizes are non-negative multiples of the f32
         size; `activations` is f32 or bf16.
    (kernel_program_c3) Every layer's ranges lie inside the parameter and
         saved buffers, and no two layers' parameter ranges, nor two saved
         ranges, overlap; `act0`, `act1` and `scratch` lie inside the
         workspace and do not overlap, the activation slots each one
         [tokens, hidden] activation.
    (kernel_program_c4) `shared_output` and `shared_table` (multi-token
         prediction's view of the output layer and embedding table) lie
         inside the parameter buffer.

    With activation recompute (`pipe-recompute`), the program also has a
    recompute buffer of `recompute` bytes per microbatch, alive from the
    microbatch's input gradient to its weight gradient (and, reused, during
    a forward), where the saved ranges of its `recomputed` layers lie, and
    two more workspace slots, `rc0` and `rc1`, the recomputed forward
    ping-pongs between:

        ... scratch <...> recompute 2048 rc0 <...> rc1 <...> {

    (kernel_program_c5) `recompute` is given exactly when a layer is
         `recomputed` or selective, `rc0` and `rc1` together and only with
         it; `recompute` is a non-negative multiple of the f32 size; the
         recomputed layers' saved ranges and the selective layers'
         recomputed ranges lie inside it and do not overlap; `rc0` and `rc1`
         lie inside the workspace, each one activation, apart from the
         other parts.
    (kernel_program_c6) Every `pipe.kernel_save` range lies inside the saved
         buffer, apart from the layers' saved ranges and the other saves,
         and holds one activation of the rank's rows (with
         `sequence_parallel` its sequence shard's, a `tensor_parallel`-th;
         the activation slots hold every row); every `pipe.kernel_load`
         reads a range a save wrote.
    (kernel_program_c7) In backward_input, every recomputed layer is
         recomputed once before its input-gradient call; no other layer is
         recomputed.

    With tensor parallelism (`pipe-lower-kernels` of a model whose
    `parallel` has `tp` above 1) the program is one rank's of
    `tensor_parallel` ranks (`sequence_parallel`: Megatron-LM's
    --sequence-parallel): each layer keeps its whole shape, and its ranges
    hold its shard's tensors (core/model/TensorParallel.h); each call lists
    the collectives its kernels run over the group.

        ... scratch <...> tensor_parallel 2 {
          ...
          pipe.kernel_call %mlp3(act0) -> act1 collectives ["all_reduce:8"]

    (kernel_program_c8) `tensor_parallel` is at least 2; `sequence_parallel`
         only with it.
  }];
  let arguments = (ins TypeAttr:$activations, I64Attr:$batch, I64Attr:$seq,
                       I64Attr:$hidden, I64Attr:$num_layers,
                       I64Attr:$param_bytes, I64Attr:$saved_bytes,
                       I64Attr:$workspace_bytes, Pipe_RangeAttr:$act0,
                       Pipe_RangeAttr:$act1, Pipe_RangeAttr:$scratch,
                       OptionalAttr<Pipe_RangeAttr>:$shared_output,
                       OptionalAttr<Pipe_RangeAttr>:$shared_table,
                       OptionalAttr<I64Attr>:$recompute_bytes,
                       OptionalAttr<Pipe_RangeAttr>:$rc0,
                       OptionalAttr<Pipe_RangeAttr>:$rc1,
                       OptionalAttr<I64Attr>:$tensor_parallel,
                       UnitAttr:$sequence_parallel);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `activations` $activations `tokens` $batch `x` $seq `hidden` $hidden
    `layers` $num_layers
    `buffers` `(` `params` $param_bytes `,` `saved` $saved_bytes `,`
    `workspace` $workspace_bytes `)`
    `act0` $act0 `act1` $act1 `scratch` $scratch
    (`shared_output` $shared_output^)? (`shared_table` $shared_table^)?
    (`recompute` $recompute_bytes^)? (`rc0` $rc0^ `rc1` $rc1)?
    (`tensor_parallel` $tensor_parallel^)?
    (`sequence_parallel` $sequence_parallel^)?
    attr-dict-with-keyword $body
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
}

def Pipe_KernelLayerOp : Pipe_Op<"kernel_layer",
    [HasParent<"KernelProgramOp">, Pure,
     DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "One layer of a kernel program: its kernel, shape and ranges";
  let description = [{
    `layer` is the 1-based layer number in the pattern (0: embedding and
    head); `prefix` starts its parameters' Megatron names
    (`decoder.layers.3.`; the embedding table keeps its own name). `shape`
    holds the kernel's static shape, one entry per field
    (core/model/LayerShapes.h, forEachField).

    (kernel_layer_c1) `shape` has exactly the fields of `kind`'s shape, each
         of its type (integers and flags as i64 and bool, coefficients as
         f64, the activation by name).
    (kernel_layer_c2) `params` and `saved` are f32 ranges exactly as large as
         the shape's parameters and saved tensors for the program's tokens
         and the model's target (its shard's, split over the program's
         `tensor_parallel` ranks).
    (kernel_layer_c4) Split over the program's `tensor_parallel` ranks, the
         layer's heads, groups, widths and vocabulary divide by them, and
         its kind splits (not MoE, not an MTP depth's).

    A `recomputed` layer (`recomputed <...>` in place of `saved <...>`)
    keeps its saved tensors in the program's recompute buffer instead of
    the saved one: its forward runs again in the input-gradient pass
    (`pipe.kernel_recompute`) before its input gradient. A layer with
    `recompute [modules] <range>` (selective recompute) keeps the tensors
    of those modules (Megatron-LM's --recompute-modules names) in that
    range of the recompute buffer, the rest in `saved`, and computes them
    again from the rest before its input gradient.

    (kernel_layer_c3) `recompute` names modules selective recompute drops
         of the layer's kind -- attention: layernorm, core_attn; mlp:
         layernorm, mlp; moe: layernorm, moe_act, moe -- each once; its range is
         exactly their tensors' f32 bytes, and `saved` the others'; a layer
         is not both `recomputed` and selective.
  }];
  let arguments = (ins Pipe_KernelKind:$kind, I64Attr:$layer,
                       StrAttr:$prefix, Pipe_RangeAttr:$params,
                       Pipe_RangeAttr:$saved, DictionaryAttr:$shape,
                       UnitAttr:$recomputed,
                       OptionalAttr<StrArrayAttr>:$modules,
                       OptionalAttr<Pipe_RangeAttr>:$again);
  let results = (outs Pipe_LayerType:$result);
  let assemblyFormat = [{
    $kind `layer` $layer $prefix `params` $params
    (`recomputed` $recomputed^) : (`saved`)? $saved
    (`recompute` $modules^ $again)?
    `shape` $shape attr-dict
  }];
  let hasVerifier = 1;
}

def Pipe_KernelPassOp : Pipe_Op<"kernel_pass",
    [HasParent<"KernelProgramOp">, SingleBlock, NoTerminator]> {
  let summary = "The kernel calls of one pass, in the order they run";
  let description = [{
    (kernel_pass_c1) Its body holds only `pipe.kernel_call` and
         `pipe.kernel_copy` ops, and `pipe.kernel_save` (forward) or
         `pipe.kernel_load` and `pipe.kernel_recompute` (backward_input).
    (kernel_pass_c2) In forward and backward_input, every call or copy that
         reads a slot reads the one the call before it wrote (the first: the
         stage's input, or its output's gradient); backward_weight calls read
         and write no slot. Saves read the slot the pass last wrote; the
         recomputed forward is a chain of its own: loads and recomputes write
         `rc0` or `rc1` only, and a recompute reads the one the load or
         recompute before it wrote.
  }];
  let arguments = (ins Pipe_KernelPass:$pass);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$pass attr-dict-with-keyword $body";
  let hasRegionVerifier = 1;
}

def Pipe_KernelCallOp : Pipe_Op<"kernel_call", [HasParent<"KernelPassOp">]> {
  let summary = "Runs one layer's kernel of the enclosing pass";
  let description = [{
    Reads activation slot `in` and writes `out` (`none`: the layer reads its
    tokens, or ends in a loss).

    (kernel_call_c1) `layer` is a `pipe.kernel_layer` of the same program.
    (kernel_call_c2) `collectives` (`kind:floats a token`) are exactly the
         tensor-parallel collectives the layer's kernels run in the pass
         (core/model/TensorParallel.h's collectivesOf), none at tp 1.
  }];
  let arguments = (ins Pipe_LayerType:$layer, Pipe_Slot:$in,
                       Pipe_Slot:$out, OptionalAttr<StrArrayAttr>:$collectives);
  let assemblyFormat = [{
    $layer `(` $in `)` `->` $out (`collectives` $collectives^)? attr-dict
  }];
  let hasVerifier = 1;
}

def Pipe_KernelCopyOp : Pipe_Op<"kernel_copy", [HasParent<"KernelPassOp">]> {
  let summary = "Copies one activation slot to another";
  let description = [{
    Where a stage's last layer cannot write its output itself (an empty
    stage, a stage that ends in a layer writing a workspace slot).

    (kernel_copy_c1) `in` and `out` are slots, not `none`, and differ.
  }];
  let arguments = (ins Pipe_Slot:$in, Pipe_Slot:$out);
  let assemblyFormat = "$in `->` $out attr-dict";
  let hasVerifier = 1;
}

def Pipe_KernelSaveOp : Pipe_Op<"kernel_save", [HasParent<"KernelPassOp">]> {
  let summary = "Keeps an activation in the microbatch's saved buffer";
  let description = [{
    The checkpoint of a recomputed chunk (`pipe-recompute`): in the forward,
    the chunk's input, copied from slot `in` into `range` of the saved
    buffer, whence `pipe.kernel_load` reads it back.

        pipe.kernel_save act0 -> <offset = 512, bytes = 128, dtype = f32>

    (kernel_save_c1) `in` is a slot, not `none`.
  }];
  let arguments = (ins Pipe_Slot:$in, Pipe_RangeAttr:$range);
  let assemblyFormat = "$in `->` $range attr-dict";
  let hasVerifier = 1;
}

def Pipe_KernelLoadOp : Pipe_Op<"kernel_load", [HasParent<"KernelPassOp">]> {
  let summary = "Reads a checkpoint back into a recompute slot";
  let description = [{
    Starts a chunk's recomputed forward in the input-gradient pass: the
    activation `pipe.kernel_save` kept at `range` copied into `out`.

    (kernel_load_c1) `out` is `rc0` or `rc1`.
  }];
  let arguments = (ins Pipe_RangeAttr:$range, Pipe_Slot:$out);
  let assemblyFormat = "$range `->` $out attr-dict";
  let hasVerifier = 1;
}

def Pipe_KernelRecomputeOp : Pipe_Op<"kernel_recompute",
    [HasParent<"KernelPassOp">]> {
  let summary = "Runs a recomputed layer's forward again";
  let description = [{
    In the input-gradient pass, before the layer's own input gradient: its
    forward from `in` to `out`, which writes its saved tensors (into the
    recompute buffer) as the first forward did, and adds nothing to the
    stage's losses.

    A selective layer's recompute reads and writes no slot: it computes
    the dropped modules' tensors from the layer's kept ones.

    (kernel_recompute_c1) `layer` is a `recomputed` or selective
         `pipe.kernel_layer` of the same program; `in` and `out` are `rc0`,
         `rc1` or `none` (a selective layer: `none`).
    (kernel_recompute_c2) `collectives` are those of the layer's forward
         for a `recomputed` layer, none for a selective one.
  }];
  let arguments = (ins Pipe_LayerType:$layer, Pipe_Slot:$in,
                       Pipe_Slot:$out, OptionalAttr<StrArrayAttr>:$collectives);
  let assemblyFormat = [{
    $layer `(` $in `)` `->` $out (`collectives` $collectives^)? attr-dict
  }];
  let hasVerifier = 1;
}

#endif // HYPIPE_PIPE_OPS
