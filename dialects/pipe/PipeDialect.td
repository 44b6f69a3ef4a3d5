#ifndef HYPIPE_PIPE_DIALECT
#define HYPIPE_PIPE_DIALECT

include "mlir/IR/OpBase.td"

def Pipe_Dialect : Dialect {
  let name = "pipe";
  let cppNamespace = "::hypipe::pipe";
  let summary = "Pipeline stages, point-to-point transfers and collectives";
  let description = [{
    After `pipe-outline-stages`, a `hybrid.model` holds one `pipe.stage` per
    (pp_rank, vp_stage) with that stage's layers. After `pipe-insert-p2p`,
    every boundary between stages on different ranks is an explicit
    `pipe.send` / `pipe.recv` pair for activations going forward and a
    `pipe.send_grad` / `pipe.recv_grad` pair for their gradients coming back,
    and stages carry their data-parallel and tied-embedding gradient
    reductions. After `pipe-lower-kernels`, every stage ends in its
    `pipe.kernel_program`: the kernel calls of its passes over a typed
    buffer plan.
  }];
  let dependentDialects = ["::hypipe::hybrid::HybridDialect"];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  // `pipe.target` and `pipe.precision` are discardable attributes of a
  // hybrid.model: the dialect checks their types and places.
  let hasOperationAttrVerify = 1;
}

class Pipe_Op<string mnemonic, list<Trait> traits = []>
    : Op<Pipe_Dialect, mnemonic, traits>;

#endif // HYPIPE_PIPE_DIALECT
