#ifndef HYPIPE_HYBRID_ATTRS
#define HYPIPE_HYBRID_ATTRS

include "dialects/hybrid/HybridDialect.td"
include "dialects/hybrid/HybridEnums.td"

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

    (dims_c0) Every size is within its bound (`core/model/SizeBounds.h`,
              e.g. `hidden` at most 2^16, `vocab` at most 2^24), the Mamba
              inner width at most 2^18, and every weight matrix at most 2^36
              elements.
    (dims_c1) `hidden`, `vocab` and `ffn_hidden` are positive.
    (dims_c2) `num_heads` and `num_query_groups` are non-negative, and a
              positive `num_heads` divides `hidden`.
    (dims_c3) With `num_heads > 0`, `num_query_groups` is positive and divides
              `num_heads`.
    (dims_c4) `mamba_num_heads` is non-negative; with `mamba_num_heads > 0`,
              `mamba_head_dim`, `mamba_state` and `mamba_conv_width` are
              positive and `mamba_num_groups` is positive and divides
              `mamba_num_heads`.
    (dims_c5) `num_experts` and `moe_ffn_hidden` are non-negative; with
              `num_experts > 0`, `moe_top_k` is between 1 and `num_experts`.
    (dims_c6) `activation` is one of `squared_relu`, `gelu`, `swiglu`.
    (dims_c7) Multi-latent attention's sizes (Megatron-LM's MLA arguments,
              left out at their command-line defaults): `q_lora_rank` is
              non-negative (0 is Megatron's None, no query
              down-projection); `kv_lora_rank`, `qk_head_dim`,
              `qk_pos_emb_head_dim` and `v_head_dim` are positive, and
              `qk_pos_emb_head_dim` is even.

    The Gated DeltaNet sizes (`linear_*`, Megatron-LM's names) are left out
    when they are Megatron's defaults; `dims_c0` bounds them, and a `G`
    layer's own check (`gdn_c2`) needs them positive.

    DeepSeek sparse attention's indexer sizes (`dsa_indexer_n_heads`,
    `dsa_indexer_head_dim`, `dsa_indexer_topk`) are left out at 0, Megatron's
    None; `dims_c0` bounds them, and a `D` layer's own check (`dsa_c2`)
    needs them positive and the indexer head at least `qk_pos_emb_head_dim`
    wide.
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
    StringRefParameter<"MLP activation">:$activation,
    DefaultValuedParameter<"int64_t", "0">:$q_lora_rank,
    DefaultValuedParameter<"int64_t", "32">:$kv_lora_rank,
    DefaultValuedParameter<"int64_t", "128">:$qk_head_dim,
    DefaultValuedParameter<"int64_t", "64">:$qk_pos_emb_head_dim,
    DefaultValuedParameter<"int64_t", "128">:$v_head_dim,
    DefaultValuedParameter<"bool", "false">:$qk_layernorm,
    DefaultValuedParameter<"int64_t", "16">:$linear_num_key_heads,
    DefaultValuedParameter<"int64_t", "32">:$linear_num_value_heads,
    DefaultValuedParameter<"int64_t", "128">:$linear_key_head_dim,
    DefaultValuedParameter<"int64_t", "128">:$linear_value_head_dim,
    DefaultValuedParameter<"int64_t", "4">:$linear_conv_kernel_dim,
    DefaultValuedParameter<"int64_t", "0">:$dsa_indexer_n_heads,
    DefaultValuedParameter<"int64_t", "0">:$dsa_indexer_head_dim,
    DefaultValuedParameter<"int64_t", "0">:$dsa_indexer_topk
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Hybrid_ParallelAttr : Hybrid_Attr<"Parallel", "parallel"> {
  let summary = "Parallel layout: pipeline, virtual pipeline and data parallel sizes, schedule";
  let description = [{
    `schedule` is one of the enum's cases (`gpipe`, `1f1b`,
    `interleaved-1f1b`, `zb-h1`, `zbv`, `dualpipev`, the names of
    `core/schedule/Vocabulary.cpp`): the parser refuses anything else, so no
    verifier has to.

    `tp` is the tensor-parallel size (Megatron-LM's
    --tensor-model-parallel-size) and `sequence_parallel` its
    --sequence-parallel; both are left out when off. `ep` and `etp` lay out
    the MoE layers' experts (Megatron-LM's --expert-model-parallel-size and
    --expert-tensor-parallel-size: the expert grid, docs/expert-parallel.md);
    `etp` is left out when it is `tp`, Megatron-LM's default, and 0 stands
    for that.

    (parallel_c1) `pp`, `vpp`, `dp`, `microbatches`, `group_size`, `tp` and
                  `ep` are positive, `etp` is not negative.
    (parallel_c2) `sequence_parallel` needs `tp` above 1.
    (parallel_c3) `etp` x `ep` divides `tp` x `dp` (the expert grid has
                  whole expert-data-parallel groups).
  }];
  let parameters = (ins
    "int64_t":$pp,
    "int64_t":$vpp,
    "int64_t":$dp,
    EnumParameter<Hybrid_Schedule>:$schedule,
    "int64_t":$microbatches,
    "int64_t":$group_size,
    DefaultValuedParameter<"int64_t", "1">:$tp,
    DefaultValuedParameter<"bool", "false">:$sequence_parallel,
    DefaultValuedParameter<"int64_t", "1">:$ep,
    DefaultValuedParameter<"int64_t", "0">:$etp
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// `schedule` as the schedule library's enum.
    ::hypipe::schedule::ScheduleKind getScheduleKind() const {
      return toScheduleKind(getSchedule());
    }
    /// The expert tensor-parallel size: `etp`, or `tp` when left out.
    int64_t getExpertTensorParallel() const {
      return getEtp() ? getEtp() : getTp();
    }
  }];
}

def Hybrid_PlacementAttr : Hybrid_Attr<"Placement", "placement"> {
  let summary = "Where one layer runs: its pipeline segment, rank and virtual stage";
  let description = [{
    `layer` is the 1-based global layer number in pattern order (Megatron's
    `layer_number`). Consistency with the model's `parallel` attribute is
    checked by `hybrid.model` (`model_c7` to `model_c11`).

    (placement_c1) `segment`, `pp_rank` and `vp_stage` are non-negative and
                   `layer` is positive.
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
