#ifndef HYPIPE_PASSES
#define HYPIPE_PASSES

include "mlir/Pass/PassBase.td"

def HybridAssignStages : Pass<"hybrid-assign-stages", "::hypipe::hybrid::ModelOp"> {
  let summary = "Place every layer on its (pp_rank, vp_stage) from '|' or a layout string";
  let description = [{
    Requires: `hybrid.model`s whose `pattern` has `pp * vpp` `|`-separated
    segments, or a single segment with `pp * vpp = 1`, or the `layout` option
    (a Megatron pipeline layout string for a pattern without `|`).
    Guarantees: every main layer carries `#hybrid.placement` on the
    schedule's placement: Megatron's fVPP loop (segment `s` on
    `pp_rank = s % pp`, `vp_stage = s / pp`), or zbv's V;
    with `layout`, the model's `pattern` is rewritten with `|` where the
    layout puts its stage boundaries. A pattern without `|` and
    `pp * vpp > 1` is an error that points at `hybrid-auto-partition`.
  }];
  let options = [
    Option<"layout", "layout", "std::string", /*default=*/"\"\"",
           "Megatron pipeline layout string (E t m L) placing a pattern without '|'">
  ];
}

def HybridAutoPartition : Pass<"hybrid-auto-partition", "::hypipe::hybrid::ModelOp"> {
  let summary = "Split a pattern without '|' into pp * vpp balanced segments";
  let description = [{
    Requires: `hybrid.model`s with dims, parallel layout and the microbatch
    shape in their block arguments. For a pattern without `|` and
    `pp * vpp > 1`, splits the sequence (embedding, layers, head with MTP)
    into exactly `pp * vpp` contiguous segments minimising the most expensive
    one under the cost model (docs/cost-model.md), exactly, ties broken as in
    docs/passes.md; with `max-memory-gib`, only splits whose every rank fits.
    Guarantees: `pattern` is rewritten with `|` and every layer placed, as
    `hybrid-assign-stages` would from that pattern. A pattern that already has
    `|` keeps its placement.
  }];
  let options = [
    Option<"objective", "objective", "::hypipe::PartitionObjective",
           /*default=*/"::hypipe::PartitionObjective::Time",
           "what to balance",
           [{::llvm::cl::values(
             clEnumValN(::hypipe::PartitionObjective::Time, "time",
                        "FLOPs of forward and backward"),
             clEnumValN(::hypipe::PartitionObjective::Params, "params",
                        "parameters"))}]>,
    Option<"maxMemoryGiB", "max-memory-gib", "double", /*default=*/"0",
           "memory cap per rank in GiB (0: none)">,
    Option<"dtype", "dtype", "::hypipe::TrainingPrecision",
           /*default=*/"::hypipe::TrainingPrecision::Fp32",
           "training precision for the memory model",
           [{::llvm::cl::values(
             clEnumValN(::hypipe::TrainingPrecision::Fp32, "fp32",
                        "fp32 weights"),
             clEnumValN(::hypipe::TrainingPrecision::Bf16, "bf16",
                        "bf16 weights with an fp32 master copy"))}]>
  ];
}

def PipeOutlineStages : Pass<"pipe-outline-stages", "::hypipe::hybrid::ModelOp"> {
  let summary = "Group the layers of each (pp_rank, vp_stage) into one pipe.stage";
  let description = [{
    Requires: every main layer placed (`hybrid-assign-stages` or
    `hybrid-auto-partition`). Guarantees: the model body holds exactly
    `pp * vpp` `pipe.stage` ops in index order, then `hybrid.return`; stage 0
    holds the embedding, the last stage the final norm, output layer and MTP
    blocks; empty segments become stages that pass their input through.
    Values flow between stages as stage inputs and results.
  }];
  let dependentDialects = ["::hypipe::pipe::PipeDialect"];
}

def PipeInsertP2P : Pass<"pipe-insert-p2p", "::hypipe::hybrid::ModelOp"> {
  let summary = "Turn cross-rank stage boundaries into send/recv, add gradient reductions";
  let description = [{
    Requires: outlined stages. Guarantees: no stage takes an input produced on
    another rank: the producer ends with `pipe.send` of the activations and
    `pipe.recv_grad` of their gradient, the consumer begins with `pipe.recv`
    and ends with `pipe.send_grad`, each naming its peer rank and stage.
    Boundaries within one rank stay local hand-offs. With `dp > 1` every
    non-empty stage gets `pipe.grad_allreduce`; with tied embeddings on
    different first and last ranks, both ends get
    `pipe.tied_embedding_allreduce`.
  }];
  let dependentDialects = ["::hypipe::pipe::PipeDialect"];
}

def PipeBuildSchedule : Pass<"pipe-build-schedule", "::hypipe::hybrid::ModelOp"> {
  let summary = "Make one pipe.program per rank: the schedule's compute order";
  let description = [{
    Requires: outlined stages, placed as the schedule places them (the loop,
    stage s on rank s % pp; zbv's V, stages r and 2 pp - 1 - r on rank r).
    Guarantees: one `pipe.program` per rank, in rank order, holding the
    compute-only order (F/B, or F/I/W) of the model's schedule for its pp,
    vpp, microbatches and group size — Megatron's exact order for 1f1b and
    interleaved-1f1b (docs/schedules.md). A configuration the schedule
    refuses is an error naming the constraint. With `import-csv`, the
    programs are read from a CSV written by torch.distributed.pipelining
    instead (`UNSHARD`/`RESHARD`/`REDUCE_GRAD` kept, `OVERLAP_F_B` pairs as
    F then B): the file's inferred placement must be the schedule's, and
    its communication, where it writes any, is kept as written.
  }];
  let options = [
    Option<"importCsv", "import-csv", "std::string", /*default=*/"\"\"",
           "read the programs from this PyTorch pipelining CSV">
  ];
  let dependentDialects = ["::hypipe::pipe::PipeDialect"];
}

def PipeInsertComms : Pass<"pipe-insert-comms", "::hypipe::hybrid::ModelOp"> {
  let summary = "Add the sends and receives to every pipe.program";
  let description = [{
    Requires: `pipe.program`s with compute actions. Guarantees: every
    cross-rank dependency has its `SEND_F`/`RECV_F` (activations) or
    `SEND_B`/`RECV_B` (gradients) with the peer's, placed right after the
    producing and right before the consuming action, so sends never wait for
    receives; a send directly followed by a receive from the same peer is
    marked batched (`batched` attribute: the indices of such sends). Stage
    actions (`REDUCE_GRAD`, `UNSHARD`, `RESHARD`) stay where they stand.
    Programs that already send or receive (an imported CSV with its
    communication) are left as written.
  }];
  let dependentDialects = ["::hypipe::pipe::PipeDialect"];
}

def PipeVerifySchedule : Pass<"pipe-verify-schedule", "::hypipe::hybrid::ModelOp"> {
  let summary = "Prove the pipe.programs free of deadlock by simulating all ranks";
  let description = [{
    Requires: one `pipe.program` per rank. Guarantees (or fails with the rank
    x step grid around the first stuck action): every send meets its
    receive, each microbatch runs F before B (I before W) on every stage
    exactly once, no rank waits forever. With `costs`, annotates each program
    with its predicted bubble fraction and the model with the makespan.
  }];
  let options = [
    Option<"costs", "costs", "std::string", /*default=*/"\"F=1,B=2,I=1,W=1\"",
           "per-action costs for the prediction">
  ];
  let dependentDialects = ["::hypipe::pipe::PipeDialect"];
}

def PipeLowerKernels : Pass<"pipe-lower-kernels", "::hypipe::hybrid::ModelOp"> {
  let summary = "Lower every pipe.stage to its kernel program over a typed buffer plan";
  let description = [{
    Requires: outlined stages (`pipe-outline-stages`). For each stage, picks
    the kernel of every layer with its static shape and lays out three
    buffers in bytes: parameters (in Megatron order, one range per layer),
    the saved tensors one in-flight microbatch keeps between F and its I/W,
    and a workspace shared by all microbatches (two activation slots and the
    largest layer's scratch). Guarantees: every stage ends in one
    `pipe.kernel_program` whose `pipe.kernel_layer`s carry their kernels,
    shapes and f32 ranges, and whose forward, backward_input and
    backward_weight passes list the kernel calls in the order they run (a
    stage lowered again gets a new program); `activations` is the model's
    `pipe.precision` (f32 when absent). Fails at the first layer the targets
    cannot lower (G, D, +, MTP outside the last stage).
  }];
  let dependentDialects = ["::hypipe::pipe::PipeDialect"];
}

def PipeRecompute : Pass<"pipe-recompute", "::hypipe::hybrid::ModelOp"> {
  let summary = "Activation recompute as Megatron-LM's --recompute-* flags ask";
  let description = [{
    Requires: kernel programs (`pipe-lower-kernels`). Full recompute
    (core/model/Recompute.h, docs/recompute.md) cuts each stage's main
    layers into the chunks `method` and `num-layers` give, and makes every
    multi-token-prediction depth (its input projection and layers) one
    chunk: the chunk's layers become `recomputed` (their saved ranges move
    to a recompute buffer, live from the microbatch's input gradient to its
    weight gradient); the forward keeps the chunk's input with a
    `pipe.kernel_save` into the saved buffer; the input-gradient pass, just
    before the chunk's first input-gradient call, loads it back into `rc0`
    and runs the chunk's forward again (`pipe.kernel_recompute`, between the
    workspace's new `rc0` and `rc1`). Every other call is unchanged, so the
    losses and gradients are bit for bit those without recompute.
    Selective recompute moves the tensors of the named modules of every
    attention, MLP and MoE layer (core_attn, mlp, moe, moe_act, layernorm)
    into the recompute buffer (`recompute [modules] <range>` on the layer)
    and recomputes them from the layer's kept tensors just before its input
    gradient (`pipe.kernel_recompute %layer(none) -> none`; the moe module
    runs the MoE layer's forward again into rc0, through rc1).
    Guarantees: the programs verify (kernel_program_c5 to c7); without
    `granularity` (or `none`) nothing changes. Fails on a granularity,
    method or module it does not know, full recompute without num-layers
    >= 1.
  }];
  let options = [
    Option<"granularity", "granularity", "std::string", /*default=*/"\"none\"",
           "none, full or selective (--recompute-granularity)">,
    Option<"method", "method", "std::string", /*default=*/"\"uniform\"",
           "uniform or block (--recompute-method)">,
    Option<"numLayers", "num-layers", "int64_t", /*default=*/"0",
           "the chunk size (uniform) or count (block) (--recompute-num-layers)">,
    ListOption<"modules", "modules", "std::string",
               "what selective recompute drops (--recompute-modules)">
  ];
  let dependentDialects = ["::hypipe::pipe::PipeDialect"];
}

#endif // HYPIPE_PASSES

