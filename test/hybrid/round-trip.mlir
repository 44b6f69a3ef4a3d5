// Tests that every op and attribute of the hybrid dialect prints and parses back.
// RUN: hypipe-opt %s | hypipe-opt | FileCheck %s

// Tests that a placed model with every kind of op and an MTP block round-trips.
// CHECK-LABEL: hybrid.model @m
// CHECK-SAME: dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2
// CHECK-SAME: activation = "swiglu", linear_num_key_heads = 2, linear_num_value_heads = 4, linear_key_head_dim = 8, linear_value_head_dim = 4, linear_conv_kernel_dim = 3>
// CHECK-SAME: parallel = #hybrid.parallel<pp = 2, vpp = 1, dp = 2, schedule = "1f1b", microbatches = 1, group_size = 1, ep = 2, etp = 1>
// CHECK-SAME: pattern = "ME|*-G/-"
// CHECK: ^bb0(%[[TOK:.+]]: tensor<1x4xi64>, %[[LAB:.+]]: tensor<1x4xi64>):
// CHECK: %[[H:.+]] = hybrid.embedding %[[TOK]] : tensor<1x4xi64> -> tensor<1x4x8xf32>
// CHECK: %[[M:.+]] = hybrid.mamba %[[H]]
// CHECK-SAME: {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>}
// CHECK: hybrid.moe %[[M]]
// CHECK-SAME: {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 2>}
// CHECK: hybrid.attention
// CHECK-SAME: segment = 1, pp_rank = 1
// CHECK: hybrid.mlp
// CHECK: %[[G:.+]] = hybrid.gdn
// CHECK: %[[N:.+]] = hybrid.final_norm %[[G]]
// CHECK: %[[LOSS:.+]] = hybrid.output %[[N]], %[[LAB]]
// CHECK: %{{.+}}, %[[L1:.+]] = hybrid.mtp %[[G]], %[[TOK]], %[[LAB]] depth 1
// CHECK: hybrid.yield
// CHECK: hybrid.return %[[LOSS]], %[[L1]] : tensor<f32>, tensor<f32>

hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu", linear_num_key_heads = 2, linear_num_value_heads = 4, linear_key_head_dim = 8, linear_value_head_dim = 4, linear_conv_kernel_dim = 3>, parallel = #hybrid.parallel<pp = 2, vpp = 1, dp = 2, schedule = "1f1b", microbatches = 1, group_size = 1, ep = 2, etp = 1>, pattern = "ME|*-G/-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
  %2 = hybrid.moe %1 {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 2>} : tensor<1x4x8xf32>
  %3 = hybrid.attention %2 {placement = #hybrid.placement<segment = 1, pp_rank = 1, vp_stage = 0, layer = 3>} : tensor<1x4x8xf32>
  %4 = hybrid.mlp %3 {placement = #hybrid.placement<segment = 1, pp_rank = 1, vp_stage = 0, layer = 4>} : tensor<1x4x8xf32>
  %5 = hybrid.gdn %4 {placement = #hybrid.placement<segment = 1, pp_rank = 1, vp_stage = 0, layer = 5>} : tensor<1x4x8xf32>
  %n = hybrid.final_norm %5 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  %h3, %l3 = hybrid.mtp %5, %tokens, %labels depth 1 : tensor<1x4x8xf32>, tensor<1x4xi64>, tensor<1x4xi64> -> tensor<1x4x8xf32>, tensor<f32> {
  ^bb0(%x: tensor<1x4x8xf32>):
    %y = hybrid.mlp %x : tensor<1x4x8xf32>
    hybrid.yield %y : tensor<1x4x8xf32>
  }
  hybrid.return %loss, %l3 : tensor<f32>, tensor<f32>
}

// Tests that MLA's sizes round-trip and that those at Megatron's defaults are left out.
// CHECK-LABEL: hybrid.model @mla
// CHECK-SAME: activation = "swiglu", q_lora_rank = 24, kv_lora_rank = 16, qk_head_dim = 8, qk_pos_emb_head_dim = 4, v_head_dim = 12, qk_layernorm = true>
// CHECK: hybrid.mla
// CHECK-LABEL: hybrid.model @defaults
// CHECK-SAME: activation = "swiglu", kv_lora_rank = 16>
hybrid.model @mla attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu", q_lora_rank = 24, kv_lora_rank = 16, qk_head_dim = 8, qk_pos_emb_head_dim = 4, v_head_dim = 12, qk_layernorm = true>, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M+"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.mla %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}
hybrid.model @defaults attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu", q_lora_rank = 0, kv_lora_rank = 16, qk_head_dim = 128>, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "+"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mla %h : tensor<1x4x8xf32>
  %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// Tests that DSA's indexer sizes round-trip after MLA's (0, Megatron's None, left out).
// CHECK-LABEL: hybrid.model @dsa
// CHECK-SAME: activation = "swiglu", qk_pos_emb_head_dim = 4, dsa_indexer_n_heads = 2, dsa_indexer_head_dim = 8, dsa_indexer_topk = 16>
// CHECK: hybrid.dsa
hybrid.model @dsa attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu", qk_pos_emb_head_dim = 4, dsa_indexer_n_heads = 2, dsa_indexer_head_dim = 8, dsa_indexer_topk = 16>, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "D"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.dsa %h : tensor<1x4x8xf32>
  %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}
