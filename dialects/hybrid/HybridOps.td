#ifndef HYPIPE_HYBRID_OPS
#define HYPIPE_HYBRID_OPS

include "dialects/hybrid/HybridDialect.td"
include "dialects/hybrid/HybridAttrs.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

//===----------------------------------------------------------------------===//
// hybrid.model
//===----------------------------------------------------------------------===//

def Hybrid_ModelOp : Hybrid_Op<"model", [Symbol, IsolatedFromAbove, SingleBlock]> {
  let summary = "A whole hybrid language model: embedding, layer stack, head and loss";
  let description = [{
    The body takes the token ids and the labels of one microbatch
    (`tensor<BxSxi64>` each) and returns the loss. Layers appear in the string
    order of `pattern` (Megatron's `hybrid_layer_pattern`, including `|`
    segment separators and `/` MTP parts).

    The main stack is the model's ops in program order, looking into
    `pipe.stage` regions but not into `hybrid.mtp` bodies.

    Invariants:
    (model_c1) The body has one block with exactly two arguments, tokens and
               labels, both rank-2 integer tensors of one shape.
    (model_c2) The first hybrid op of the main stack is its only
               `hybrid.embedding`.
    (model_c3) `pattern` is a valid hybrid layer pattern
               (`hypipe::parseHybridPattern`).
    (model_c4) The layer ops of the main stack, in order, spell the main part
               of `pattern` with its `|` removed.
    (model_c5) Exactly one `hybrid.final_norm` and then one `hybrid.output`
               follow the last main layer.
    (model_c6) `pattern` has either no `|` or exactly `pp * vpp` segments.
    (model_c7) Either no main layer carries a `placement` or all do, each a
               `#hybrid.placement`.
    (model_c8) Each placement has `pp_rank < pp`, `vp_stage < vpp`, and
               `(pp_rank, vp_stage)` is where the schedule's placement puts
               `segment`: the loop, `segment = vp_stage * pp + pp_rank`, or
               for `zbv` and `dualpipev` the V, segment s on pp_rank s and
               vp_stage 0 when s < pp, on pp_rank 2 pp - 1 - s and vp_stage 1
               when s >= pp.
    (model_c9) Placement segments never decrease in layer order.
    (model_c10) The placements number the layers 1..N in order.
    (model_c11) With `|` in `pattern`, each layer is placed in the segment the
                pattern gives it.
    (model_c12) The `hybrid.mtp` blocks have depths 1, 2, ... in order.
    (model_c13) Each `hybrid.mtp` block's layers spell the MTP part of
                `pattern`.
    (model_c14) There are as many `hybrid.mtp` blocks as `pattern` has MTP
                parts.
    (model_c15) With `ep` above 1 in `parallel`, `ep` divides the dims'
                `num_experts`.
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    Hybrid_DimsAttr:$dims,
    Hybrid_ParallelAttr:$parallel,
    StrAttr:$pattern
  );
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name attr-dict-with-keyword $body";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The layer ops of the main stack (not inside MTP blocks), in order.
    ::llvm::SmallVector<::mlir::Operation *> getMainLayers();
  }];
}

def Hybrid_ReturnOp : Hybrid_Op<"return", [Terminator, HasParent<"ModelOp">, Pure]> {
  let summary = "Returns the main loss and one loss per MTP depth";
  let description = [{
    (return_c1) Every operand is a 0-d `f32` tensor.
    (return_c2) There is one operand per loss: the main loss and one per MTP
                part of the model's `pattern`.
    (return_c3) Before stages are outlined (while `hybrid.output` is in the
                model's body), the operands are the results of
                `hybrid.output` and of each `hybrid.mtp`, in order.
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$losses);
  let assemblyFormat = "$losses attr-dict `:` type($losses)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Embedding, head
//===----------------------------------------------------------------------===//

def Hybrid_EmbeddingOp : Hybrid_Op<"embedding", [Pure]> {
  let summary = "Word embedding lookup (pipeline rank 0, chunk 0)";
  let description = [{
    (embedding_c0) Like every model-part op, it is inside a `hybrid.model`,
                   directly or in a `pipe.stage`.
    (embedding_c1) The input is a rank-2 integer tensor `BxS`; the result is
                   a `BxSxH` `f32` tensor with `H` the model's `hidden`.
  }];
  let arguments = (ins AnyRankedTensor:$tokens);
  let results = (outs AnyRankedTensor:$hidden);
  let assemblyFormat = "$tokens attr-dict `:` type($tokens) `->` type($hidden)";
  let hasVerifier = 1;
}

def Hybrid_FinalNormOp : Hybrid_Op<"final_norm",
    [Pure, SameOperandsAndResultType]> {
  let summary = "Final RMSNorm before the output layer";
  let description = [{
    (final_norm_c0) It is inside a `hybrid.model`.
    (final_norm_c1) The input is a `BxSxH` `f32` tensor with `H` the model's
                    `hidden`.
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Hybrid_OutputOp : Hybrid_Op<"output", [Pure]> {
  let summary = "Output layer (tied or untied to the embedding) and cross-entropy loss";
  let description = [{
    (output_c0) It is inside a `hybrid.model`.
    (output_c1) `hidden` is `BxSxH` `f32` with `H` the model's `hidden`,
                `labels` is a `BxS` integer tensor, and the result is a 0-d
                `f32` tensor.
  }];
  let arguments = (ins AnyRankedTensor:$hidden, AnyRankedTensor:$labels);
  let results = (outs AnyRankedTensor:$loss);
  let assemblyFormat = [{
    $hidden `,` $labels attr-dict `:` type($hidden) `,` type($labels) `->` type($loss)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Layers: one op per pattern symbol
//===----------------------------------------------------------------------===//

// The layer ops share their invariants and their verifier; each op labels
// them with its own mnemonic: `mamba_c0` ... `mamba_c3`, `attention_c0` ...,
// `mla_c3`.
class Hybrid_LayerOp<string mnemonic, string symbol, string what, string needs>
    : Hybrid_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = "`" # symbol # "` layer: " # what;
  let description = [{
    A pre-norm residual layer, `x + Mixer(RMSNorm(x))`.

    (}] # mnemonic # [{_c0) It is inside a `hybrid.model` (directly, in a
    `pipe.stage`, or in a `hybrid.mtp` body).
    (}] # mnemonic # [{_c1) The input is a `BxSxH` `f32` tensor with `H` the
    model's `hidden`.
    (}] # mnemonic # [{_c2) The model's dimensions define this layer kind:
    }] # needs # [{.
    (}] # mnemonic # [{_c3) A `placement`, if present, is only on layers of the
    main stack.
  }];
  let arguments = (ins AnyRankedTensor:$input,
                       OptionalAttr<Hybrid_PlacementAttr>:$placement);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
  string patternSymbol = symbol;
  let extraClassDeclaration = [{
    static constexpr char kSymbol = '}] # symbol # [{';
  }];
}

def Hybrid_MambaOp : Hybrid_LayerOp<"mamba", "M", "Mamba-2 mixer",
    "`mamba_num_heads`, `mamba_head_dim`, `mamba_state` and `mamba_num_groups` are positive">;
def Hybrid_AttentionOp : Hybrid_LayerOp<"attention", "*",
    "causal self-attention with grouped query attention",
    "`num_heads` and `num_query_groups` are positive">;
def Hybrid_MlpOp : Hybrid_LayerOp<"mlp", "-", "dense MLP",
    "`ffn_hidden` is positive (`dims_c1` guarantees it, so this never fails "
    # "on its own)">;
def Hybrid_MoeOp : Hybrid_LayerOp<"moe", "E", "mixture of experts (router, top-k, dropless experts)",
    "`num_experts` is positive and `moe_top_k` is in 1..`num_experts`">;
def Hybrid_GdnOp : Hybrid_LayerOp<"gdn", "G",
    "Gated DeltaNet mixer, Megatron-LM's GatedDeltaNet (costed and placed; not lowered yet)",
    "`linear_num_key_heads`, `linear_num_value_heads`, `linear_key_head_dim`, "
    # "`linear_value_head_dim` and `linear_conv_kernel_dim` are positive, "
    # "`linear_num_key_heads` divides `linear_num_value_heads`, and "
    # "`activation` is `swiglu` (the SiLU of its conv and gate)">;
def Hybrid_DsaOp : Hybrid_LayerOp<"dsa", "D",
    "DeepSeek sparse attention as Megatron-LM builds it: an MLA layer whose "
    # "core attends to the top-k keys of its indexer (costed, placed and "
    # "named; not lowered yet)",
    "`num_heads` is positive, every MLA weight has at most 2^36 elements, "
    # "`dsa_indexer_n_heads`, `dsa_indexer_head_dim` and `dsa_indexer_topk` "
    # "are positive and the indexer head is at least `qk_pos_emb_head_dim` "
    # "wide">;
def Hybrid_MlaOp : Hybrid_LayerOp<"mla", "+",
    "multi-latent attention as Megatron-LM builds it (costed, placed and "
    # "named; not lowered yet)",
    "`num_heads` is positive and every MLA weight has at most 2^36 elements "
    # "(the sizes themselves are `dims_c7`)">;

//===----------------------------------------------------------------------===//
// Multi-token prediction
//===----------------------------------------------------------------------===//

def Hybrid_MtpOp : Hybrid_Op<"mtp", [SingleBlock]> {
  let summary = "One multi-token-prediction depth: its layers and its loss";
  let description = [{
    Takes the hidden states of the previous depth (or the main stack), the
    tokens and the labels; its body maps hidden states through the MTP layer
    pattern. Returns the new hidden states and this depth's loss.

    `depth` counts from 1; the order of depths and the layers of each block
    are `model_c12` to `model_c14`.

    (mtp_c0) It is inside a `hybrid.model`.
    (mtp_c1) The body has one block whose single argument has the type of
             `hidden` and which ends in `hybrid.yield` of that same type; the
             first result has that type too and the second is a 0-d `f32`
             tensor.
  }];
  let arguments = (ins AnyRankedTensor:$hidden, AnyRankedTensor:$tokens,
                       AnyRankedTensor:$labels, I64Attr:$depth,
                       OptionalAttr<Hybrid_PlacementAttr>:$placement);
  let results = (outs AnyRankedTensor:$next_hidden, AnyRankedTensor:$loss);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $hidden `,` $tokens `,` $labels `depth` $depth attr-dict `:`
    type($hidden) `,` type($tokens) `,` type($labels) `->` type($next_hidden) `,` type($loss)
    $body
  }];
  let hasVerifier = 1;
}

def Hybrid_YieldOp : Hybrid_Op<"yield", [Terminator, HasParent<"MtpOp">, Pure]> {
  let summary = "Ends an MTP body with its hidden states";
  let arguments = (ins AnyRankedTensor:$hidden);
  let assemblyFormat = "$hidden attr-dict `:` type($hidden)";
}

#endif // HYPIPE_HYBRID_OPS
