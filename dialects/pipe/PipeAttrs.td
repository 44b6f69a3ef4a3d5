#ifndef HYPIPE_PIPE_ATTRS
#define HYPIPE_PIPE_ATTRS

include "dialects/pipe/PipeDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

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

//===----------------------------------------------------------------------===//
// Kernel programs: the enums and the type of `pipe.kernel_program`'s ops
//===----------------------------------------------------------------------===//

// The cases have rt::LayerKind's values (core/model/LayerShapes.h), in its
// order: dialects/pipe/KernelProgram.cpp static_asserts it.
def Pipe_KernelKind : I32EnumAttr<"KernelKind", "a layer's kernel", [
    I32EnumAttrCase<"embedding", 0>, I32EnumAttrCase<"mamba", 1>,
    I32EnumAttrCase<"attention", 2>, I32EnumAttrCase<"mlp", 3>,
    I32EnumAttrCase<"moe", 4>, I32EnumAttrCase<"head", 5>,
    I32EnumAttrCase<"mtp_input", 6>, I32EnumAttrCase<"mtp_output", 7>,
    I32EnumAttrCase<"gdn", 8>,
    I32EnumAttrCase<"mla", 9>,
    I32EnumAttrCase<"dsa", 10>]> {
  let cppNamespace = "::hypipe::pipe";
}

// rt::Slot's values (runtime/formats/StageProgram.h), in its order.
def Pipe_Slot : I32EnumAttr<"Slot", "an activation slot of a stage", [
    I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"input", 1>,
    I32EnumAttrCase<"output", 2>, I32EnumAttrCase<"grad_output", 3>,
    I32EnumAttrCase<"grad_input", 4>, I32EnumAttrCase<"act0", 5>,
    I32EnumAttrCase<"act1", 6>, I32EnumAttrCase<"rc0", 7>,
    I32EnumAttrCase<"rc1", 8>]> {
  let cppNamespace = "::hypipe::pipe";
}

def Pipe_KernelPass : I32EnumAttr<"KernelPass", "a pass of a kernel program", [
    I32EnumAttrCase<"forward", 0>, I32EnumAttrCase<"backward_input", 1>,
    I32EnumAttrCase<"backward_weight", 2>]> {
  let cppNamespace = "::hypipe::pipe";
}

// rt::Target's values (core/model/LayerShapes.h): what a model's stages
// are lowered for, the discardable `pipe.target` of a hybrid.model.
def Pipe_Target : I32EnumAttr<"Target", "a target the stages run on", [
    I32EnumAttrCase<"cpu", 0>, I32EnumAttrCase<"cuda", 1>]> {
  let cppNamespace = "::hypipe::pipe";
  let genSpecializedAttr = 0;
}
def Pipe_TargetAttr : EnumAttr<Pipe_Dialect, Pipe_Target, "target">;

def Pipe_LayerType : TypeDef<Pipe_Dialect, "Layer"> {
  let mnemonic = "layer";
  let summary = "A layer of a kernel program, as its calls name it";
}

#endif // HYPIPE_PIPE_ATTRS
