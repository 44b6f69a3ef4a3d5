// Tests that the verifiers check every invariant of the hybrid dialect
// (HybridOps.td, HybridAttrs.td): one case per label, in the order of the
// descriptions, each expecting the message that ends in its label.
// RUN: hypipe-opt %s -split-input-file -verify-diagnostics -allow-unregistered-dialect

// Tests that dims_c0 bounds every size: a vocabulary of 2^24 + 1 is refused.
// expected-error @+1 {{vocab_size is 16777217, more than the 16777216 (2^24) hypipe accepts (dims_c0)}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 8, vocab = 16777217, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that dims_c1 refuses a hidden size of 0.
// expected-error @+1 {{hidden_size must be positive, got 0 (dims_c1)}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 0, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that dims_c2 refuses a head count that does not divide the hidden size.
// expected-error @+1 {{num_attention_heads (3) does not divide hidden_size (8) (dims_c2)}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 3, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that dims_c3 refuses query groups that do not divide the heads.
// expected-error @+1 {{num_query_groups (3) must be positive and divide num_attention_heads (2) (dims_c3)}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 3, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that dims_c4 refuses Mamba groups that do not divide the Mamba heads.
// expected-error @+1 {{mamba_num_groups (3) must be positive and divide mamba_num_heads (2) (dims_c4)}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 3, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that dims_c5 refuses a top-k above the number of experts.
// expected-error @+1 {{moe_router_topk (3) must be between 1 and num_experts (2) (dims_c5)}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 3, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that dims_c6 refuses an unknown activation.
// expected-error @+1 {{unknown activation 'relu' (dims_c6)}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "relu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that parallel_c1 refuses pp = 0.
// expected-error @+1 {{pp, vpp, dp, microbatches, group_size, tp and ep must be positive and etp not negative (parallel_c1)}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 0, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that the parser refuses an unknown schedule name (`schedule` is an
// enum of the schedule library's names, so no verifier sees one).
// expected-error @+2 {{invalid pipeline schedule specification: 2f2b}}
// expected-error @+1 {{failed to parse Hybrid_ParallelAttr parameter 'schedule'}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "2f2b", microbatches = 1, group_size = 1>, pattern = "M*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that placement_c1 refuses layer number 0: layer numbers start at 1.
// expected-error @+4 {{placement fields must be non-negative and layer must be positive (placement_c1)}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 0>} : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that model_c1 refuses a body that takes the tokens but not the labels.
// expected-error @+1 {{body must take two rank-2 integer tensors of one shape (tokens, labels) (model_c1)}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*"} {
^bb0(%t: tensor<1x4xi64>):
  %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  hybrid.return %n : tensor<1x4x8xf32>
}

// -----

// Tests that model_c2 refuses a second hybrid.embedding.
// expected-error @+1 {{the first op of the main stack must be its only hybrid.embedding (model_c2)}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %h2 = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that model_c3 refuses a pattern with an unknown layer symbol.
// expected-error-re @+1 {{pattern 'MX' is invalid: 'X' is not a layer symbol (main part){{.*}} (model_c3)}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "MX"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that model_c4 refuses layers that do not spell the pattern.
// expected-error @+1 {{layers spell 'M*' but the pattern's main part is 'MM' (model_c4)}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "MM"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that model_c5 refuses a model without its hybrid.final_norm.
// expected-error @+1 {{needs exactly one hybrid.final_norm and one hybrid.output (model_c5)}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %loss = hybrid.output %2, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that model_c6 refuses two pattern segments for pp * vpp = 1.
// expected-error @+1 {{pattern has 2 segments but pp * vpp = 1 * 1 (model_c6)}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M|*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that model_c7 refuses a placement on one layer but not the other.
// expected-error @+1 {{either every layer or none carries a placement (1 of 2 do) (model_c7)}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that model_c8 refuses a placement off the loop, segment = vp_stage * pp + pp_rank.
// expected-error @+5 {{does not fit pp = 2, vpp = 1 (segment must be vp_stage * pp + pp_rank) (model_c8)}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 2, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M|*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 {placement = #hybrid.placement<segment = 0, pp_rank = 1, vp_stage = 0, layer = 2>} : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that model_c9 refuses placement segments that go back in layer order.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 2, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h {placement = #hybrid.placement<segment = 1, pp_rank = 1, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
// expected-error @+1 {{placement segment 0 comes after segment 1: layers must be placed in pattern order (model_c9)}}
  %2 = hybrid.attention %1 {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 2>} : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that model_c10 refuses layer numbers that skip one.
// expected-error @+5 {{layer number 3 should be 2 (model_c10)}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 3>} : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that model_c11 refuses a layer placed outside its pattern segment.
// expected-error @+5 {{layer 2 is in segment 1 of the pattern but placed in segment 0 (model_c11)}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 2, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M|*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 2>} : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that model_c12 refuses an MTP block whose depth is out of order.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*/-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
// expected-error @+1 {{depth 2 out of order, expected 1 (model_c12)}}
  %h3, %l3 = hybrid.mtp %2, %tokens, %labels depth 2 : tensor<1x4x8xf32>, tensor<1x4xi64>, tensor<1x4xi64> -> tensor<1x4x8xf32>, tensor<f32> {
  ^bb0(%x: tensor<1x4x8xf32>):
    %y = hybrid.mlp %x : tensor<1x4x8xf32>
    hybrid.yield %y : tensor<1x4x8xf32>
  }
  hybrid.return %loss, %l3 : tensor<f32>, tensor<f32>
}

// -----

// Tests that model_c13 refuses an MTP block that does not spell the pattern's MTP part.
// expected-error @+8 {{layers spell '-' but the pattern's MTP part is 'M' (model_c13)}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*/M"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  %h3, %l3 = hybrid.mtp %2, %tokens, %labels depth 1 : tensor<1x4x8xf32>, tensor<1x4xi64>, tensor<1x4xi64> -> tensor<1x4x8xf32>, tensor<f32> {
  ^bb0(%x: tensor<1x4x8xf32>):
    %y = hybrid.mlp %x : tensor<1x4x8xf32>
    hybrid.yield %y : tensor<1x4x8xf32>
  }
  hybrid.return %loss, %l3 : tensor<f32>, tensor<f32>
}

// -----

// Tests that model_c14 refuses fewer MTP blocks than the pattern has MTP parts.
// expected-error @+1 {{pattern has 2 MTP depths but the body has 1 hybrid.mtp blocks (model_c14)}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*/-/-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  %h3, %l3 = hybrid.mtp %2, %tokens, %labels depth 1 : tensor<1x4x8xf32>, tensor<1x4xi64>, tensor<1x4xi64> -> tensor<1x4x8xf32>, tensor<f32> {
  ^bb0(%x: tensor<1x4x8xf32>):
    %y = hybrid.mlp %x : tensor<1x4x8xf32>
    hybrid.yield %y : tensor<1x4x8xf32>
  }
  hybrid.return %loss, %l3 : tensor<f32>, tensor<f32>
}

// -----

// Tests that return_c1 refuses a loss that is not a 0-d f32 tensor.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
// expected-error @+1 {{losses must be 0-d f32 tensors (return_c1)}}
  hybrid.return %2 : tensor<1x4x8xf32>
}

// -----

// Tests that return_c2 refuses a return without the MTP depth's loss.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*/-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  %h3, %l3 = hybrid.mtp %2, %tokens, %labels depth 1 : tensor<1x4x8xf32>, tensor<1x4xi64>, tensor<1x4xi64> -> tensor<1x4x8xf32>, tensor<f32> {
  ^bb0(%x: tensor<1x4x8xf32>):
    %y = hybrid.mlp %x : tensor<1x4x8xf32>
    hybrid.yield %y : tensor<1x4x8xf32>
  }
// expected-error @+1 {{must return 2 losses (the main loss and one per MTP depth), got 1 (return_c2)}}
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that return_c3 refuses the losses out of order.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*/-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  %h3, %l3 = hybrid.mtp %2, %tokens, %labels depth 1 : tensor<1x4x8xf32>, tensor<1x4xi64>, tensor<1x4xi64> -> tensor<1x4x8xf32>, tensor<f32> {
  ^bb0(%x: tensor<1x4x8xf32>):
    %y = hybrid.mlp %x : tensor<1x4x8xf32>
    hybrid.yield %y : tensor<1x4x8xf32>
  }
// expected-error @+1 {{must return the loss of hybrid.output, then each MTP depth's loss in order (return_c3)}}
  hybrid.return %l3, %loss : tensor<f32>, tensor<f32>
}

// -----

// Tests that embedding_c0 refuses a hybrid.embedding outside a hybrid.model.
"test.region"() ({
  %t = "test.source"() : () -> tensor<1x4xi64>
  // expected-error @+1 {{must be inside a hybrid.model (embedding_c0)}}
  %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
  "test.end"() : () -> ()
}) : () -> ()

// -----

// Tests that embedding_c1 refuses hidden states of another shape than the tokens.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
// expected-error @+1 {{result shape must be the tokens' shape plus the hidden size (embedding_c1)}}
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x5x8xf32>
  %c = "test.cast"(%h) : (tensor<1x5x8xf32>) -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %c : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that final_norm_c0 refuses a hybrid.final_norm outside a hybrid.model.
"test.region"() ({
  %x = "test.source"() : () -> tensor<1x4x8xf32>
  // expected-error @+1 {{must be inside a hybrid.model (final_norm_c0)}}
  %y = hybrid.final_norm %x : tensor<1x4x8xf32>
  "test.end"() : () -> ()
}) : () -> ()

// -----

// Tests that final_norm_c1 refuses an input wider than the model's hidden size.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %bad = "test.source"() : () -> tensor<1x4x9xf32>
// expected-error @+1 {{input must be a BxSx8 f32 tensor (hidden size of the model), got 'tensor<1x4x9xf32>' (final_norm_c1)}}
  %n = hybrid.final_norm %bad : tensor<1x4x9xf32>
  %loss = hybrid.output %2, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that output_c0 refuses a hybrid.output outside a hybrid.model.
"test.region"() ({
  %x = "test.source"() : () -> tensor<1x4x8xf32>
  %l = "test.source"() : () -> tensor<1x4xi64>
  // expected-error @+1 {{must be inside a hybrid.model (output_c0)}}
  %loss = hybrid.output %x, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  "test.end"() : () -> ()
}) : () -> ()

// -----

// Tests that output_c1 refuses labels of another shape than the hidden states.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %lab = "test.source"() : () -> tensor<1x5xi64>
// expected-error @+1 {{labels must be a BxS integer tensor matching the hidden states (output_c1)}}
  %loss = hybrid.output %n, %lab : tensor<1x4x8xf32>, tensor<1x5xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that mtp_c0 refuses a hybrid.mtp outside a hybrid.model.
"test.region"() ({
  %x = "test.source"() : () -> tensor<1x4x8xf32>
  %t = "test.source"() : () -> tensor<1x4xi64>
  // expected-error @+1 {{must be inside a hybrid.model (mtp_c0)}}
  %h, %loss = hybrid.mtp %x, %t, %t depth 1 : tensor<1x4x8xf32>, tensor<1x4xi64>, tensor<1x4xi64> -> tensor<1x4x8xf32>, tensor<f32> {
  ^bb0(%y: tensor<1x4x8xf32>):
    hybrid.yield %y : tensor<1x4x8xf32>
  }
  "test.end"() : () -> ()
}) : () -> ()

// -----

// Tests that mtp_c1 refuses a body that yields another type than it takes.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*/-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
// expected-error @+1 {{body must take and yield the hidden-state type 'tensor<1x4x8xf32>' (mtp_c1)}}
  %h3, %l3 = hybrid.mtp %2, %tokens, %labels depth 1 : tensor<1x4x8xf32>, tensor<1x4xi64>, tensor<1x4xi64> -> tensor<1x4x8xf32>, tensor<f32> {
  ^bb0(%x: tensor<1x4x8xf32>):
    %y = hybrid.mlp %x : tensor<1x4x8xf32>
    %z = "test.cast"(%y) : (tensor<1x4x8xf32>) -> tensor<1x4x9xf32>
    hybrid.yield %z : tensor<1x4x9xf32>
  }
  hybrid.return %loss, %l3 : tensor<f32>, tensor<f32>
}

// -----

// Tests that mamba_c0 refuses a hybrid.mamba outside a hybrid.model.
"test.region"() ({
  %x = "test.source"() : () -> tensor<1x4x8xf32>
  // expected-error @+1 {{must be inside a hybrid.model (mamba_c0)}}
  %y = hybrid.mamba %x : tensor<1x4x8xf32>
  "test.end"() : () -> ()
}) : () -> ()

// -----

// Tests that mamba_c1 refuses an input wider than the model's hidden size.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %bad = "test.source"() : () -> tensor<1x4x9xf32>
// expected-error @+1 {{input must be a BxSx8 f32 tensor (hidden size of the model), got 'tensor<1x4x9xf32>' (mamba_c1)}}
  %1 = hybrid.mamba %bad : tensor<1x4x9xf32>
  %2 = hybrid.attention %h : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that mamba_c2 refuses a hybrid.mamba in a model without Mamba heads.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 0, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
// expected-error @+1 {{Mamba layers ('M') need mamba_num_heads > 0 (mamba_c2)}}
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that mamba_c3 refuses a placement on a hybrid.mamba inside an MTP block.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M/M"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  %h2, %l2 = hybrid.mtp %1, %tokens, %labels depth 1 : tensor<1x4x8xf32>, tensor<1x4xi64>, tensor<1x4xi64> -> tensor<1x4x8xf32>, tensor<f32> {
  ^bb0(%x: tensor<1x4x8xf32>):
    // expected-error @+1 {{layers inside hybrid.mtp take the placement of their block (mamba_c3)}}
    %y = hybrid.mamba %x {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    hybrid.yield %y : tensor<1x4x8xf32>
  }
  hybrid.return %loss, %l2 : tensor<f32>, tensor<f32>
}

// -----

// Tests that attention_c0 refuses a hybrid.attention outside a hybrid.model.
"test.region"() ({
  %x = "test.source"() : () -> tensor<1x4x8xf32>
  // expected-error @+1 {{must be inside a hybrid.model (attention_c0)}}
  %y = hybrid.attention %x : tensor<1x4x8xf32>
  "test.end"() : () -> ()
}) : () -> ()

// -----

// Tests that attention_c1 refuses an input wider than the model's hidden size.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %bad = "test.source"() : () -> tensor<1x4x9xf32>
// expected-error @+1 {{input must be a BxSx8 f32 tensor (hidden size of the model), got 'tensor<1x4x9xf32>' (attention_c1)}}
  %1 = hybrid.attention %bad : tensor<1x4x9xf32>
  %n = hybrid.final_norm %h : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that attention_c2 refuses a hybrid.attention in a model without attention heads.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 0, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
// expected-error @+1 {{'*' layers need num_attention_heads > 0 (attention_c2)}}
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that attention_c3 refuses a placement on a hybrid.attention inside an MTP block.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M/*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  %h2, %l2 = hybrid.mtp %1, %tokens, %labels depth 1 : tensor<1x4x8xf32>, tensor<1x4xi64>, tensor<1x4xi64> -> tensor<1x4x8xf32>, tensor<f32> {
  ^bb0(%x: tensor<1x4x8xf32>):
    // expected-error @+1 {{layers inside hybrid.mtp take the placement of their block (attention_c3)}}
    %y = hybrid.attention %x {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    hybrid.yield %y : tensor<1x4x8xf32>
  }
  hybrid.return %loss, %l2 : tensor<f32>, tensor<f32>
}

// -----

// Tests that mlp_c0 refuses a hybrid.mlp outside a hybrid.model.
"test.region"() ({
  %x = "test.source"() : () -> tensor<1x4x8xf32>
  // expected-error @+1 {{must be inside a hybrid.model (mlp_c0)}}
  %y = hybrid.mlp %x : tensor<1x4x8xf32>
  "test.end"() : () -> ()
}) : () -> ()

// -----

// Tests that mlp_c1 refuses an input wider than the model's hidden size.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %bad = "test.source"() : () -> tensor<1x4x9xf32>
// expected-error @+1 {{input must be a BxSx8 f32 tensor (hidden size of the model), got 'tensor<1x4x9xf32>' (mlp_c1)}}
  %1 = hybrid.mlp %bad : tensor<1x4x9xf32>
  %n = hybrid.final_norm %h : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// mlp_c2 has no case of its own: dims_c1 (ffn_hidden > 0) already guarantees it.

// -----

// Tests that mlp_c3 refuses a placement on a hybrid.mlp inside an MTP block.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*/-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  %h3, %l3 = hybrid.mtp %2, %tokens, %labels depth 1 : tensor<1x4x8xf32>, tensor<1x4xi64>, tensor<1x4xi64> -> tensor<1x4x8xf32>, tensor<f32> {
  ^bb0(%x: tensor<1x4x8xf32>):
    // expected-error @+1 {{layers inside hybrid.mtp take the placement of their block (mlp_c3)}}
    %y = hybrid.mlp %x {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    hybrid.yield %y : tensor<1x4x8xf32>
  }
  hybrid.return %loss, %l3 : tensor<f32>, tensor<f32>
}

// -----

// Tests that moe_c0 refuses a hybrid.moe outside a hybrid.model.
"test.region"() ({
  %x = "test.source"() : () -> tensor<1x4x8xf32>
  // expected-error @+1 {{must be inside a hybrid.model (moe_c0)}}
  %y = hybrid.moe %x : tensor<1x4x8xf32>
  "test.end"() : () -> ()
}) : () -> ()

// -----

// Tests that moe_c1 refuses an input wider than the model's hidden size.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "E"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %bad = "test.source"() : () -> tensor<1x4x9xf32>
// expected-error @+1 {{input must be a BxSx8 f32 tensor (hidden size of the model), got 'tensor<1x4x9xf32>' (moe_c1)}}
  %1 = hybrid.moe %bad : tensor<1x4x9xf32>
  %n = hybrid.final_norm %h : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that moe_c2 refuses a hybrid.moe in a model without experts.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 0, moe_top_k = 0, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "ME"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
// expected-error @+1 {{MoE layers ('E') need num_experts > 0 (moe_c2)}}
  %2 = hybrid.moe %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that moe_c3 refuses a placement on a hybrid.moe inside an MTP block.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M/E"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  %h2, %l2 = hybrid.mtp %1, %tokens, %labels depth 1 : tensor<1x4x8xf32>, tensor<1x4xi64>, tensor<1x4xi64> -> tensor<1x4x8xf32>, tensor<f32> {
  ^bb0(%x: tensor<1x4x8xf32>):
    // expected-error @+1 {{layers inside hybrid.mtp take the placement of their block (moe_c3)}}
    %y = hybrid.moe %x {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    hybrid.yield %y : tensor<1x4x8xf32>
  }
  hybrid.return %loss, %l2 : tensor<f32>, tensor<f32>
}

// -----

// Tests that gdn_c0 refuses a hybrid.gdn outside a hybrid.model.
"test.region"() ({
  %x = "test.source"() : () -> tensor<1x4x8xf32>
  // expected-error @+1 {{must be inside a hybrid.model (gdn_c0)}}
  %y = hybrid.gdn %x : tensor<1x4x8xf32>
  "test.end"() : () -> ()
}) : () -> ()

// -----

// Tests that gdn_c1 refuses an input wider than the model's hidden size.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "G"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %bad = "test.source"() : () -> tensor<1x4x9xf32>
// expected-error @+1 {{input must be a BxSx8 f32 tensor (hidden size of the model), got 'tensor<1x4x9xf32>' (gdn_c1)}}
  %1 = hybrid.gdn %bad : tensor<1x4x9xf32>
  %n = hybrid.final_norm %h : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that gdn_c2 refuses a hybrid.gdn whose value heads are no whole groups of its key heads.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 0, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu", linear_num_key_heads = 2, linear_num_value_heads = 3, linear_key_head_dim = 4, linear_value_head_dim = 4>, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "G"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
// expected-error @+1 {{linear_num_value_heads (3) must be a multiple of linear_num_key_heads (2): each key head serves linear_num_value_heads / linear_num_key_heads value heads (gdn_c2)}}
  %1 = hybrid.gdn %h : tensor<1x4x8xf32>
  %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that gdn_c2 refuses a hybrid.gdn in a model without SiLU (activation swiglu).
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "gelu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "G"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
// expected-error @+1 {{gated delta net layers ('G') need activation: swiglu (Megatron-LM's --swiglu, whose SiLU their conv and output gate use), got 'gelu' (gdn_c2)}}
  %1 = hybrid.gdn %h : tensor<1x4x8xf32>
  %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that gdn_c2 refuses a hybrid.gdn without a convolution.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu", linear_conv_kernel_dim = 0>, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "G"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
// expected-error @+1 {{gated delta net layers ('G') need a positive linear_conv_kernel_dim, got 0 (gdn_c2)}}
  %1 = hybrid.gdn %h : tensor<1x4x8xf32>
  %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that gdn_c3 refuses a placement on a hybrid.gdn inside an MTP block.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M/G"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  %h2, %l2 = hybrid.mtp %1, %tokens, %labels depth 1 : tensor<1x4x8xf32>, tensor<1x4xi64>, tensor<1x4xi64> -> tensor<1x4x8xf32>, tensor<f32> {
  ^bb0(%x: tensor<1x4x8xf32>):
    // expected-error @+1 {{layers inside hybrid.mtp take the placement of their block (gdn_c3)}}
    %y = hybrid.gdn %x {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    hybrid.yield %y : tensor<1x4x8xf32>
  }
  hybrid.return %loss, %l2 : tensor<f32>, tensor<f32>
}

// -----

// Tests that dsa_c0 refuses a hybrid.dsa outside a hybrid.model.
"test.region"() ({
  %x = "test.source"() : () -> tensor<1x4x8xf32>
  // expected-error @+1 {{must be inside a hybrid.model (dsa_c0)}}
  %y = hybrid.dsa %x : tensor<1x4x8xf32>
  "test.end"() : () -> ()
}) : () -> ()

// -----

// Tests that dsa_c1 refuses an input wider than the model's hidden size.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "D"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %bad = "test.source"() : () -> tensor<1x4x9xf32>
// expected-error @+1 {{input must be a BxSx8 f32 tensor (hidden size of the model), got 'tensor<1x4x9xf32>' (dsa_c1)}}
  %1 = hybrid.dsa %bad : tensor<1x4x9xf32>
  %n = hybrid.final_norm %h : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that dsa_c2 refuses a hybrid.dsa in a model without attention heads.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 0, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "D"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
// expected-error @+1 {{'D' layers need num_attention_heads > 0 (dsa_c2)}}
  %1 = hybrid.dsa %h : tensor<1x4x8xf32>
  %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that dsa_c2 refuses a hybrid.dsa without its indexer's sizes
// (Megatron's None, the attribute's default 0).
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu", dsa_indexer_head_dim = 64, dsa_indexer_topk = 4>, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "D"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
// expected-error @+1 {{sparse attention layers ('D') need a positive dsa_indexer_n_heads, got 0 (dsa_c2)}}
  %1 = hybrid.dsa %h : tensor<1x4x8xf32>
  %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that dsa_c2 refuses an indexer head narrower than MLA's rotary part.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu", dsa_indexer_n_heads = 2, dsa_indexer_head_dim = 32, dsa_indexer_topk = 4>, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "D"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
// expected-error @+1 {{dsa_indexer_head_dim (32) must be at least qk_pos_emb_head_dim (64): the indexer's queries and keys carry the rotary part in their last qk_pos_emb_head_dim channels (dsa_c2)}}
  %1 = hybrid.dsa %h : tensor<1x4x8xf32>
  %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that dsa_c3 refuses a placement on a hybrid.dsa inside an MTP block.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu", dsa_indexer_n_heads = 2, dsa_indexer_head_dim = 64, dsa_indexer_topk = 4>, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M/D"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  %h2, %l2 = hybrid.mtp %1, %tokens, %labels depth 1 : tensor<1x4x8xf32>, tensor<1x4xi64>, tensor<1x4xi64> -> tensor<1x4x8xf32>, tensor<f32> {
  ^bb0(%x: tensor<1x4x8xf32>):
    // expected-error @+1 {{layers inside hybrid.mtp take the placement of their block (dsa_c3)}}
    %y = hybrid.dsa %x {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    hybrid.yield %y : tensor<1x4x8xf32>
  }
  hybrid.return %loss, %l2 : tensor<f32>, tensor<f32>
}

// -----

// Tests that dims_c7 refuses a negative q_lora_rank.
// expected-error @+1 {{q_lora_rank cannot be negative, got -1 (dims_c7)}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu", q_lora_rank = -1>, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "+"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mla %h : tensor<1x4x8xf32>
  %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that dims_c7 refuses a zero kv_lora_rank.
// expected-error @+1 {{kv_lora_rank must be positive, got 0 (dims_c7)}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu", kv_lora_rank = 0>, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "+"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mla %h : tensor<1x4x8xf32>
  %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that dims_c7 refuses a zero v_head_dim.
// expected-error @+1 {{v_head_dim must be positive, got 0 (dims_c7)}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu", v_head_dim = 0>, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "+"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mla %h : tensor<1x4x8xf32>
  %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that dims_c7 refuses an odd qk_pos_emb_head_dim.
// expected-error @+1 {{qk_pos_emb_head_dim must be even (RoPE rotates pairs of channels), got 3 (dims_c7)}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu", qk_pos_emb_head_dim = 3>, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "+"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mla %h : tensor<1x4x8xf32>
  %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that mla_c0 refuses a hybrid.mla outside a hybrid.model.
"test.region"() ({
  %x = "test.source"() : () -> tensor<1x4x8xf32>
  // expected-error @+1 {{must be inside a hybrid.model (mla_c0)}}
  %y = hybrid.mla %x : tensor<1x4x8xf32>
  "test.end"() : () -> ()
}) : () -> ()

// -----

// Tests that mla_c1 refuses an input wider than the model's hidden size.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "+"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %bad = "test.source"() : () -> tensor<1x4x9xf32>
// expected-error @+1 {{input must be a BxSx8 f32 tensor (hidden size of the model), got 'tensor<1x4x9xf32>' (mla_c1)}}
  %1 = hybrid.mla %bad : tensor<1x4x9xf32>
  %n = hybrid.final_norm %h : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that mla_c2 refuses a hybrid.mla in a model without attention heads.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 0, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "+"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
// expected-error @+1 {{'+' layers need num_attention_heads > 0 (mla_c2)}}
  %1 = hybrid.mla %h : tensor<1x4x8xf32>
  %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that mla_c3 refuses a placement on a hybrid.mla inside an MTP block.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M/+"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %n = hybrid.final_norm %1 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  %h2, %l2 = hybrid.mtp %1, %tokens, %labels depth 1 : tensor<1x4x8xf32>, tensor<1x4xi64>, tensor<1x4xi64> -> tensor<1x4x8xf32>, tensor<f32> {
  ^bb0(%x: tensor<1x4x8xf32>):
    // expected-error @+1 {{layers inside hybrid.mtp take the placement of their block (mla_c3)}}
    %y = hybrid.mla %x {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    hybrid.yield %y : tensor<1x4x8xf32>
  }
  hybrid.return %loss, %l2 : tensor<f32>, tensor<f32>
}

// -----

// Tests that parallel_c1 refuses tp = 0.
// expected-error @+1 {{pp, vpp, dp, microbatches, group_size, tp and ep must be positive and etp not negative (parallel_c1)}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1, tp = 0>, pattern = "M*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that parallel_c2 refuses sequence parallelism without tensor parallelism.
// expected-error @+1 {{sequence_parallel needs tp above 1 (parallel_c2)}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1, sequence_parallel = true>, pattern = "M*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that parallel_c1 refuses ep = 0.
// expected-error @+1 {{pp, vpp, dp, microbatches, group_size, tp and ep must be positive and etp not negative (parallel_c1)}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1, ep = 0>, pattern = "ME"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.moe %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that parallel_c3 refuses an expert grid (etp 1 x ep 2) wider than tp x dp (1).
// expected-error @+1 {{etp x ep (2) must divide tp x dp (1) (parallel_c3)}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1, ep = 2>, pattern = "ME"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.moe %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that model_c15 refuses an ep that does not divide the experts (2 experts, ep 4).
// expected-error @+1 {{ep 4 must divide num_experts (2) (model_c15)}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 4, schedule = "1f1b", microbatches = 1, group_size = 1, ep = 4>, pattern = "ME"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.moe %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}
