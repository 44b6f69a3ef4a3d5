// A one-stage model with an MoE layer and one MTP depth (an attention layer),
// as hypipe compile --emit mlir writes it: an input of lower-kernels.mlir.
hybrid.model @moe_mtp attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 16, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "squared_relu">, hybrid.moe_aux_loss_coeff = 1.000000e-02 : f64, hybrid.mtp_loss_scaling_factor = 1.000000e-01 : f64, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "E/*"} {
^bb0(%arg0: tensor<1x4xi64>, %arg1: tensor<1x4xi64>):
  %0 = hybrid.embedding %arg0 : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %1 = hybrid.moe %0 {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
  %2 = hybrid.final_norm %1 : tensor<1x4x8xf32>
  %3 = hybrid.output %2, %arg1 : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  %next_hidden, %loss = hybrid.mtp %1, %arg0, %arg1 depth 1 : tensor<1x4x8xf32>, tensor<1x4xi64>, tensor<1x4xi64> -> tensor<1x4x8xf32>, tensor<f32> {
  ^bb0(%arg2: tensor<1x4x8xf32>):
    %4 = hybrid.attention %arg2 : tensor<1x4x8xf32>
    hybrid.yield %4 : tensor<1x4x8xf32>
  }
  hybrid.return %3, %loss : tensor<f32>, tensor<f32>
}
