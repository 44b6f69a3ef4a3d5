// Tests that hybrid-auto-partition places the layers by an exact min-max split of the cost model.
// RUN: hypipe-opt %s -split-input-file --hybrid-auto-partition="objective=params" | FileCheck %s
// RUN: hypipe-opt %S/Inputs/eight-mamba.mlir --hybrid-auto-partition | FileCheck %s --check-prefix=TIME
// RUN: not hypipe-opt %S/Inputs/eight-mamba.mlir --hybrid-auto-partition="max-memory-gib=0.0000001" 2>&1 | FileCheck %s --check-prefix=MEMORY
// RUN: not hypipe-opt %S/Inputs/eight-mamba.mlir --hybrid-auto-partition="objective=speed" 2>&1 | FileCheck %s --check-prefix=OBJECTIVE
// RUN: not hypipe-opt %S/Inputs/eight-mamba.mlir --hybrid-auto-partition="dtype=fp8" 2>&1 | FileCheck %s --check-prefix=DTYPE

// Tests that, by time, identical layers split evenly around the cheap embedding and head.
// TIME-LABEL: hybrid.model @eight
// TIME-SAME: pattern = "MMMM|MMMM"

// Tests that a memory limit no split meets is refused with what rank 0 needs.
// MEMORY: error: 'hybrid.model' op pp_rank 0 cannot fit the embedding under max_memory_gib 1e-07: it needs {{[0-9.]+ [KMG]iB}} ({{[0-9.]+ [KMG]iB}} short); raise max_memory_gib, or use more pipeline ranks

// Tests that an unknown objective is refused when the typed option is parsed
// (`hypipe-opt --help` lists time and params).
// OBJECTIVE: for the --objective option: Cannot find option named 'speed'!

// Tests that an unknown dtype is refused when the typed option is parsed
// (`hypipe-opt --help` lists fp32 and bf16).
// DTYPE: for the --dtype option: Cannot find option named 'fp8'!

// Tests that the embedding counts: with a large vocabulary, rank 0 takes one layer.
// CHECK-LABEL: hybrid.model @embedding_counts
// CHECK-SAME: pattern = "M|MMMMMMM"
// CHECK: hybrid.mamba
// CHECK-SAME: placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>
// CHECK: hybrid.mamba
// CHECK-SAME: placement = #hybrid.placement<segment = 1, pp_rank = 1, vp_stage = 0, layer = 2>
hybrid.model @embedding_counts attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 256, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 2, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 4, group_size = 2>, pattern = "MMMMMMMM"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h0 = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %h1 = hybrid.mamba %h0 : tensor<1x4x8xf32>
  %h2 = hybrid.mamba %h1 : tensor<1x4x8xf32>
  %h3 = hybrid.mamba %h2 : tensor<1x4x8xf32>
  %h4 = hybrid.mamba %h3 : tensor<1x4x8xf32>
  %h5 = hybrid.mamba %h4 : tensor<1x4x8xf32>
  %h6 = hybrid.mamba %h5 : tensor<1x4x8xf32>
  %h7 = hybrid.mamba %h6 : tensor<1x4x8xf32>
  %h8 = hybrid.mamba %h7 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %h8 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that a pattern with its own '|' keeps its placement.
// CHECK-LABEL: hybrid.model @pinned
// CHECK-SAME: pattern = "MMMMMMM|M"
// CHECK: hybrid.mamba {{.*}}<segment = 1, pp_rank = 1, vp_stage = 0, layer = 8>
hybrid.model @pinned attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 256, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 2, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 4, group_size = 2>, pattern = "MMMMMMM|M"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h0 = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %h1 = hybrid.mamba %h0 : tensor<1x4x8xf32>
  %h2 = hybrid.mamba %h1 : tensor<1x4x8xf32>
  %h3 = hybrid.mamba %h2 : tensor<1x4x8xf32>
  %h4 = hybrid.mamba %h3 : tensor<1x4x8xf32>
  %h5 = hybrid.mamba %h4 : tensor<1x4x8xf32>
  %h6 = hybrid.mamba %h5 : tensor<1x4x8xf32>
  %h7 = hybrid.mamba %h6 : tensor<1x4x8xf32>
  %h8 = hybrid.mamba %h7 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %h8 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that pp * vpp = 4 gives 4 segments and that the MTP parts stay after '/'.
// CHECK-LABEL: hybrid.model @virtual
// CHECK-SAME: pattern = "{{[M*-]+}}|{{[M*-]+}}|{{[M*-]+}}|{{[M*-]+}}/-"
hybrid.model @virtual attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 2, vpp = 2, dp = 1, schedule = "interleaved-1f1b", microbatches = 4, group_size = 2>, pattern = "M*M-M*M-/-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h0 = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %h1 = hybrid.mamba %h0 : tensor<1x4x8xf32>
  %h2 = hybrid.attention %h1 : tensor<1x4x8xf32>
  %h3 = hybrid.mamba %h2 : tensor<1x4x8xf32>
  %h4 = hybrid.mlp %h3 : tensor<1x4x8xf32>
  %h5 = hybrid.mamba %h4 : tensor<1x4x8xf32>
  %h6 = hybrid.attention %h5 : tensor<1x4x8xf32>
  %h7 = hybrid.mamba %h6 : tensor<1x4x8xf32>
  %h8 = hybrid.mlp %h7 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %h8 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  %m1, %l1 = hybrid.mtp %h8, %tokens, %labels depth 1 : tensor<1x4x8xf32>, tensor<1x4xi64>, tensor<1x4xi64> -> tensor<1x4x8xf32>, tensor<f32> {
  ^bb0(%x1: tensor<1x4x8xf32>):
    %y1_0 = hybrid.mlp %x1 : tensor<1x4x8xf32>
    hybrid.yield %y1_0 : tensor<1x4x8xf32>
  }
  hybrid.return %loss, %l1 : tensor<f32>, tensor<f32>
}

// -----

// Tests that with more segments than items (embedding, layer, head; pp = 4) item i takes segment i, the head the last.
// CHECK-LABEL: hybrid.model @fewer_items
// CHECK-SAME: pattern = "|M||"
// CHECK: hybrid.mamba
// CHECK-SAME: placement = #hybrid.placement<segment = 1, pp_rank = 1, vp_stage = 0, layer = 1>
hybrid.model @fewer_items attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 256, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 4, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 4, group_size = 4>, pattern = "M"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h0 = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %h1 = hybrid.mamba %h0 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %h1 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}
