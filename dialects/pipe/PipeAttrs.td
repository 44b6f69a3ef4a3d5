#ifndef HYPIPE_PIPE_ATTRS
#define HYPIPE_PIPE_ATTRS

include "dialects/pipe/PipeDialect.td"
include "mlir/IR/AttrTypeBase.td"

class Pipe_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Pipe_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Pipe_RangeAttr : Pipe_Attr<"Range", "range"> {
  let summary = "A typed range of one of a stage's buffers";
  let description = [{
    `bytes` bytes of elements of type `dtype` from byte `offset` of a buffer
    (the stage's parameters, or one microbatch's saved tensors):

        #pipe.range<offset = 65536, bytes = 111536, dtype = f32>

    (range_c1) `offset` and `bytes` are non-negative.
    (range_c2) `dtype` is `f32` or `bf16`.
    (range_c3) `offset` and `bytes` are multiples of the dtype's size (the
               range is aligned to its elements).
  }];
  let parameters = (ins "int64_t":$offset, "int64_t":$bytes,
                        "::mlir::Type":$dtype);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    int64_t end() const { return getOffset() + getBytes(); }
  }];
}

def Pipe_KernelAttr : Pipe_Attr<"Kernel", "kernel"> {
  let summary = "The kernel a layer lowers to and its ranges (pipe.kernel)";
  let description = [{
    What `pipe-plan-buffers` decides for one layer, recorded on its op as the
    discardable attribute `pipe.kernel` (an MTP depth's output end as
    `pipe.kernel_mtp_output`): the kernel and where its parameters and its
    saved tensors of one microbatch sit in its stage's buffers.

        #pipe.kernel<kind = "mamba",
                     params = #pipe.range<offset = 0, bytes = 1024, dtype = f32>,
                     saved = #pipe.range<offset = 0, bytes = 512, dtype = f32>>

    (kernel_c1) `kind` is a kernel hypipe has: `embedding`, `mamba`,
                `attention`, `mlp`, `moe`, `head`, `mtp_input`, `mtp_output`
                (core/model/LayerShapes.h).
    (kernel_c2) Both ranges have a dtype the kernel takes: `f32` (every
                kernel, for now).
  }];
  let parameters = (ins StringRefParameter<"kernel">:$kind,
                        "RangeAttr":$params, "RangeAttr":$saved);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Pipe_BufferPlanAttr : Pipe_Attr<"BufferPlan", "buffer_plan"> {
  let summary = "A stage's buffer sizes (pipe.buffer_plan)";
  let description = [{
    Recorded on a `pipe.stage` by `pipe-plan-buffers`, in bytes: its
    parameters (and as many gradients), the saved tensors of one microbatch,
    and the workspace its microbatches share (two activations and the largest
    scratch of a layer).

        #pipe.buffer_plan<params = 4096, saved = 8192, workspace = 2048>

    (buffer_plan_c1) Every size is non-negative and a multiple of 4 bytes.
  }];
  let parameters = (ins "int64_t":$params, "int64_t":$saved,
                        "int64_t":$workspace);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // HYPIPE_PIPE_ATTRS
