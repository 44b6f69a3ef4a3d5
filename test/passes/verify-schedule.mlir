// Tests that pipe-verify-schedule runs every rank's program together: a program
// that can hang is an error showing where, one that cannot gets its bubble.
// RUN: hypipe-opt %s --split-input-file --pipe-verify-schedule --verify-diagnostics | FileCheck %s

// Tests that a correct 1f1b program verifies and gets the makespan and each rank's bubble (unit costs F=1, B=2).
// CHECK-LABEL: hybrid.model @two
// CHECK-SAME: makespan = 9.000000e+00
// CHECK: pipe.program rank 0 "1f1b"
// CHECK-SAME: bubble_fraction = 0.33333333333333337 : f64
// CHECK: pipe.program rank 1 "1f1b"
// CHECK-SAME: bubble_fraction = 0.33333333333333337 : f64
#dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">
hybrid.model @two attributes {dims = #dims, parallel = #hybrid.parallel<pp = 2, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 2, group_size = 2>, pattern = "M|*"} {
^bb0(%arg0: tensor<1x4xi64>, %arg1: tensor<1x4xi64>):
  pipe.stage 0 rank 0 chunk 0 inputs(%arg0 : tensor<1x4xi64>) {
  ^bb0(%arg2: tensor<1x4xi64>):
    %1 = hybrid.embedding %arg2 : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %2 = hybrid.mamba %1 {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    pipe.send %2 to 1 stage 1 : tensor<1x4x8xf32>
    pipe.recv_grad %2 from 1 stage 1 : tensor<1x4x8xf32>
    pipe.tied_embedding_allreduce with 1
    pipe.yield
  }
  %0 = pipe.stage 1 rank 1 chunk 0 inputs(%arg1 : tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%arg2: tensor<1x4xi64>):
    %1 = pipe.recv from 0 stage 0 : tensor<1x4x8xf32>
    %2 = hybrid.attention %1 {placement = #hybrid.placement<segment = 1, pp_rank = 1, vp_stage = 0, layer = 2>} : tensor<1x4x8xf32>
    %3 = hybrid.final_norm %2 : tensor<1x4x8xf32>
    %4 = hybrid.output %3, %arg2 : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.send_grad %1 to 0 stage 0 : tensor<1x4x8xf32>
    pipe.tied_embedding_allreduce with 0
    pipe.yield %4 : tensor<f32>
  }
  pipe.program rank 0 "1f1b" ["0F0", "0SEND_F0", "0F1", "0SEND_F1", "0RECV_B0", "0B0", "0RECV_B1", "0B1"] {batched = array<i64: 3>}
  pipe.program rank 1 "1f1b" ["1RECV_F0", "1F0", "1B0", "1SEND_B0", "1RECV_F1", "1F1", "1B1", "1SEND_B1"] {batched = array<i64: 3>}
  hybrid.return %0 : tensor<f32>
}

// -----

// Tests that rank 0 waiting for a gradient before it sends the activations that gradient needs is refused with the grid.
#dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">
// expected-error @+1 {{rank 1 waits at step 1 (1F0) for SEND_F of microbatch 0 from stage 0 on rank 0}}
hybrid.model @two attributes {dims = #dims, parallel = #hybrid.parallel<pp = 2, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 2, group_size = 2>, pattern = "M|*"} {
^bb0(%arg0: tensor<1x4xi64>, %arg1: tensor<1x4xi64>):
  pipe.stage 0 rank 0 chunk 0 inputs(%arg0 : tensor<1x4xi64>) {
  ^bb0(%arg2: tensor<1x4xi64>):
    %1 = hybrid.embedding %arg2 : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %2 = hybrid.mamba %1 {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    pipe.send %2 to 1 stage 1 : tensor<1x4x8xf32>
    pipe.recv_grad %2 from 1 stage 1 : tensor<1x4x8xf32>
    pipe.tied_embedding_allreduce with 1
    pipe.yield
  }
  %0 = pipe.stage 1 rank 1 chunk 0 inputs(%arg1 : tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%arg2: tensor<1x4xi64>):
    %1 = pipe.recv from 0 stage 0 : tensor<1x4x8xf32>
    %2 = hybrid.attention %1 {placement = #hybrid.placement<segment = 1, pp_rank = 1, vp_stage = 0, layer = 2>} : tensor<1x4x8xf32>
    %3 = hybrid.final_norm %2 : tensor<1x4x8xf32>
    %4 = hybrid.output %3, %arg2 : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.send_grad %1 to 0 stage 0 : tensor<1x4x8xf32>
    pipe.tied_embedding_allreduce with 0
    pipe.yield %4 : tensor<f32>
  }
  pipe.program rank 0 "1f1b" ["0F0", "0RECV_B0", "0B0", "0SEND_F0", "0F1", "0SEND_F1", "0RECV_B1", "0B1"]
  pipe.program rank 1 "1f1b" ["1RECV_F0", "1F0", "1B0", "1SEND_B0", "1RECV_F1", "1F1", "1B1", "1SEND_B1"]
  hybrid.return %0 : tensor<f32>
}
