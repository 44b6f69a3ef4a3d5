// One case per numbered invariant of the hybrid dialect (HybridOps.td, HybridAttrs.td).
// RUN: hypipe-opt %s -split-input-file -verify-diagnostics -allow-unregistered-dialect

// #hybrid.dims (C0): sizes are bounded (a vocabulary of 2^24 + 1).
// expected-error @+1 {{vocab_size is 16777217, more than the 16777216 hypipe accepts}}
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

// #hybrid.dims (C1): hidden must be positive.
// expected-error @+1 {{hidden_size must be positive}}
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

// #hybrid.dims (C2): heads divide hidden.
// expected-error @+1 {{num_attention_heads (3) does not divide hidden_size (8)}}
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

// #hybrid.dims (C2): query groups divide heads.
// expected-error @+1 {{num_query_groups (3) must be positive and divide num_attention_heads (2)}}
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

// #hybrid.dims (C3): Mamba groups divide Mamba heads.
// expected-error @+1 {{mamba_num_groups (3) must be positive and divide mamba_num_heads (2)}}
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

// #hybrid.dims (C4): top-k within the experts.
// expected-error @+1 {{moe_router_topk (3) must be between 1 and num_experts (2)}}
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

// #hybrid.dims (C5): known activation.
// expected-error @+1 {{unknown activation 'relu'}}
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

// #hybrid.parallel (C1): sizes are positive.
// expected-error @+1 {{pp, vpp, dp, microbatches and group_size must be positive}}
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

// #hybrid.parallel (C2): known schedule.
// expected-error @+1 {{unknown schedule '2f2b'}}
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

// #hybrid.placement (C1): layer numbers start at 1.
// expected-error @+4 {{placement fields must be non-negative and layer must be positive}}
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

// hybrid.model (C1): the body takes tokens and labels.
// expected-error @+1 {{body must take two rank-2 integer tensors of one shape (tokens, labels)}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*"} {
^bb0(%t: tensor<1x4xi64>):
  %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  hybrid.return %n : tensor<1x4x8xf32>
}

// -----

// hybrid.model (C2): the embedding comes first, once.
// expected-error @+1 {{the first op of the main stack must be its only hybrid.embedding}}
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

// hybrid.model (C3): the layers spell the pattern.
// expected-error @+1 {{layers spell 'M*' but the pattern's main part is 'MM'}}
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

// hybrid.model (C4): final norm and output follow the layers.
// expected-error @+1 {{needs exactly one hybrid.final_norm and one hybrid.output}}
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %loss = hybrid.output %2, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// hybrid.model (C5): segments = pp * vpp.
// expected-error @+1 {{pattern has 2 segments but pp * vpp = 1 * 1}}
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

// hybrid.model (C6): all layers placed or none.
// expected-error @+1 {{either every layer or none carries a placement (1 of 2 do)}}
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

// hybrid.model (C6): segment = vp_stage * pp + pp_rank.
// expected-error @+5 {{does not fit pp = 2, vpp = 1 (segment must be vp_stage * pp + pp_rank)}}
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

// hybrid.model (C6): layers sit in their pattern segment.
// expected-error @+5 {{layer 2 is in segment 1 of the pattern but placed in segment 0}}
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

// hybrid.model (C6): layers are numbered 1..N.
// expected-error @+5 {{layer number 3 should be 2}}
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

// hybrid.model (C7): MTP blocks spell the MTP part.
// expected-error @+8 {{layers spell '-' but the pattern's MTP part is 'M'}}
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

// hybrid.model (C7): as many MTP blocks as MTP parts.
// expected-error @+1 {{pattern has 2 MTP depths but the body has 1 hybrid.mtp blocks}}
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

// hybrid.return (C1): the main loss, then the MTP losses.
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
// expected-error @+1 {{must return 2 losses (the main loss and one per MTP depth), got 1}}
  hybrid.return %loss : tensor<f32>
}

// -----

// hybrid.return (C1): the losses in order.
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
// expected-error @+1 {{must return the loss of hybrid.output, then each MTP depth's loss in order}}
  hybrid.return %l3, %loss : tensor<f32>, tensor<f32>
}

// -----

// Model-part ops (C0): only inside a hybrid.model.
"test.region"() ({
  %x = "test.source"() : () -> tensor<1x4x8xf32>
  // expected-error @+1 {{must be inside a hybrid.model}}
  %y = hybrid.mamba %x : tensor<1x4x8xf32>
  "test.end"() : () -> ()
}) : () -> ()

// -----

// hybrid.embedding (C1): BxS tokens to BxSxH hidden states.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
// expected-error @+1 {{result shape must be the tokens' shape plus the hidden size}}
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x5x8xf32>
  %c = "test.cast"(%h) : (tensor<1x5x8xf32>) -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %c : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// hybrid.final_norm (C1): hidden states of the model's width.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %bad = "test.source"() : () -> tensor<1x4x9xf32>
// expected-error @+1 {{input must be a BxSx8 f32 tensor (hidden size of the model)}}
  %n = hybrid.final_norm %bad : tensor<1x4x9xf32>
  %loss = hybrid.output %2, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// hybrid.output (C1): labels match the hidden states.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %lab = "test.source"() : () -> tensor<1x5xi64>
// expected-error @+1 {{labels must be a BxS integer tensor matching the hidden states}}
  %loss = hybrid.output %n, %lab : tensor<1x4x8xf32>, tensor<1x5xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// hybrid layers (C1): input of the model's width.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %bad = "test.source"() : () -> tensor<1x4x9xf32>
// expected-error @+1 {{input must be a BxSx8 f32 tensor (hidden size of the model)}}
  %1 = hybrid.mamba %bad : tensor<1x4x9xf32>
  %2 = hybrid.attention %h : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// hybrid layers (C2): the dims define the layer kind.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 0, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
// expected-error @+1 {{'*' layers need num_attention_heads > 0}}
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// hybrid layers (C2): MoE layers need experts.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 0, moe_top_k = 0, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "ME"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
// expected-error @+1 {{MoE layers ('E') need num_experts > 0}}
  %2 = hybrid.moe %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// hybrid layers (C3): no placement inside an MTP block.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*/-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  %h3, %l3 = hybrid.mtp %2, %tokens, %labels depth 1 : tensor<1x4x8xf32>, tensor<1x4xi64>, tensor<1x4xi64> -> tensor<1x4x8xf32>, tensor<f32> {
  ^bb0(%x: tensor<1x4x8xf32>):
    // expected-error @+1 {{layers inside hybrid.mtp take the placement of their block}}
    %y = hybrid.mlp %x {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    hybrid.yield %y : tensor<1x4x8xf32>
  }
  hybrid.return %loss, %l3 : tensor<f32>, tensor<f32>
}

// -----

// hybrid.mtp (C1): the body maps hidden states to hidden states.
hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "M*/-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.mamba %h : tensor<1x4x8xf32>
  %2 = hybrid.attention %1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
// expected-error @+1 {{body must take and yield the hidden-state type}}
  %h3, %l3 = hybrid.mtp %2, %tokens, %labels depth 1 : tensor<1x4x8xf32>, tensor<1x4xi64>, tensor<1x4xi64> -> tensor<1x4x8xf32>, tensor<f32> {
  ^bb0(%x: tensor<1x4x8xf32>):
    %y = hybrid.mlp %x : tensor<1x4x8xf32>
    %z = "test.cast"(%y) : (tensor<1x4x8xf32>) -> tensor<1x4x9xf32>
    hybrid.yield %z : tensor<1x4x9xf32>
  }
  hybrid.return %loss, %l3 : tensor<f32>, tensor<f32>
}
