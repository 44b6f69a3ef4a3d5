// Input of build-schedule.mlir (zbv, after outlining): a Mamba and an attention layer on two ranks, 2 microbatches.
hybrid.model @two attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 2, vpp = 2, dp = 1, schedule = "zbv", microbatches = 2, group_size = 2>, pattern = "M|*||"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h0 = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %h1 = hybrid.mamba %h0 : tensor<1x4x8xf32>
  %h2 = hybrid.attention %h1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %h2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}
