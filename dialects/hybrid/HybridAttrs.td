#ifndef HYPIPE_HYBRID_ATTRS
#define HYPIPE_HYBRID_ATTRS

include "dialects/hybrid/HybridDialect.td"

class Hybrid_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Hybrid_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Hybrid_DimsAttr : Hybrid_Attr<"Dims", "dims"> {
  let summary = "Model dimensions";
  let description = [{
    Every size the layers need. Sizes of layer kinds the model does not use may
    be zero. Invariants (checked by `hypipe::checkModelDims`, shared with the
    spec loader):

    (C0) every size is at most 2^24 and every weight matrix at most 2^40
    elements. (C1) `hidden`, `vocab` and `ffn_hidden` are positive.
    (C2) `num_heads` divides `hidden`; `num_query_groups` divides `num_heads`.
    (C3) `mamba_num_groups` divides `mamba_num_heads`; `mamba_state`,
         `mamba_head_dim` and `mamba_conv_width` are positive.
    (C4) `moe_top_k` is between 1 and `num_experts` when `num_experts > 0`.
    (C5) `activation` is one of `squared_relu`, `gelu`, `swiglu`.
  }];
  let parameters = (ins
    "int64_t":$hidden,
    "int64_t":$ffn_hidden,
    "int64_t":$num_heads,
    "int64_t":$num_query_groups,
    "int64_t":$mamba_state,
    "int64_t":$mamba_num_heads,
    "int64_t":$mamba_head_dim,
    "int64_t":$mamba_num_groups,
    "int64_t":$mamba_conv_width,
    "int64_t":$num_experts,
    "int64_t":$moe_top_k,
    "int64_t":$moe_ffn_hidden,
    "int64_t":$vocab,
    "bool":$tie_embeddings,
    StringRefParameter<"MLP activation">:$activation
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Hybrid_ParallelAttr : Hybrid_Attr<"Parallel", "parallel"> {
  let summary = "Parallel layout: pipeline, virtual pipeline and data parallel sizes, schedule";
  let description = [{
    (C1) `pp`, `vpp`, `dp`, `microbatches` and `group_size` are positive.
    (C2) `schedule` is one of `gpipe`, `1f1b`, `interleaved-1f1b`, `zb-h1`, `zbv`.
  }];
  let parameters = (ins
    "int64_t":$pp,
    "int64_t":$vpp,
    "int64_t":$dp,
    StringRefParameter<"pipeline schedule name">:$schedule,
    "int64_t":$microbatches,
    "int64_t":$group_size
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Hybrid_PlacementAttr : Hybrid_Attr<"Placement", "placement"> {
  let summary = "Where one layer runs: its pipeline segment, rank and virtual stage";
  let description = [{
    `layer` is the 1-based global layer number in pattern order (Megatron's
    `layer_number`). (C1) all fields are non-negative and `layer` is positive.
    Consistency with the model's `parallel` attribute is checked by
    `hybrid.model`.
  }];
  let parameters = (ins
    "int64_t":$segment,
    "int64_t":$pp_rank,
    "int64_t":$vp_stage,
    "int64_t":$layer
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // HYPIPE_HYBRID_ATTRS
