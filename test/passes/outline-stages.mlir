// Tests that pipe-outline-stages moves the placed layers into one pipe.stage per
// (pp_rank, vp_stage).
// RUN: hypipe-opt %s -split-input-file --hybrid-assign-stages --pipe-outline-stages | FileCheck %s
// RUN: not hypipe-opt %S/Inputs/eight-mamba.mlir --pipe-outline-stages 2>&1 | FileCheck %s --check-prefix=UNPLACED
// RUN: not hypipe-opt %s -split-input-file --hybrid-assign-stages --pipe-outline-stages --pipe-outline-stages 2>&1 | FileCheck %s --check-prefix=TWICE

// Tests that a layer without a placement is refused with the passes that place it.
// UNPLACED: error: 'hybrid.mamba' op has no stage: run hybrid-assign-stages or hybrid-auto-partition before pipe-outline-stages

// Tests that a second run is refused.
// TWICE: error: 'hybrid.model' op is already outlined into pipe.stage ops

// Tests that with pp = 2, vpp = 2 stage 0 holds the embedding, the last the head, and an empty segment passes the hidden states through.
// CHECK-LABEL: hybrid.model @interleaved
// CHECK: ^bb0(%[[TOK:.+]]: tensor<1x4xi64>, %[[LAB:.+]]: tensor<1x4xi64>):
// CHECK-NEXT: %[[S0:.+]] = pipe.stage 0 rank 0 chunk 0 inputs(%[[TOK]] : tensor<1x4xi64>) -> tensor<1x4x8xf32> {
// CHECK: hybrid.embedding
// CHECK: hybrid.mamba
// CHECK: hybrid.attention
// CHECK: pipe.yield
// CHECK: %[[S1:.+]] = pipe.stage 1 rank 1 chunk 0 inputs(%[[S0]] : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
// CHECK: hybrid.mlp
// CHECK: %[[S2:.+]] = pipe.stage 2 rank 0 chunk 1 inputs(%[[S1]] : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
// CHECK-NEXT: ^bb0(%[[PASS:.+]]: tensor<1x4x8xf32>):
// CHECK-NEXT: pipe.yield %[[PASS]] : tensor<1x4x8xf32>
// CHECK: %[[S3:.+]] = pipe.stage 3 rank 1 chunk 1 inputs(%[[S2]], %[[LAB]] : tensor<1x4x8xf32>, tensor<1x4xi64>) -> tensor<f32> {
// CHECK: hybrid.mamba
// CHECK: hybrid.moe
// CHECK: hybrid.final_norm
// CHECK: hybrid.output
// CHECK: hybrid.return %[[S3]] : tensor<f32>
hybrid.model @interleaved attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 2, vpp = 2, dp = 1, schedule = "interleaved-1f1b", microbatches = 4, group_size = 2>, pattern = "M*|-||ME"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h0 = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %h1 = hybrid.mamba %h0 : tensor<1x4x8xf32>
  %h2 = hybrid.attention %h1 : tensor<1x4x8xf32>
  %h3 = hybrid.mlp %h2 : tensor<1x4x8xf32>
  %h4 = hybrid.mamba %h3 : tensor<1x4x8xf32>
  %h5 = hybrid.moe %h4 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %h5 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that the MTP blocks run in the last stage, which then takes the tokens too.
// CHECK-LABEL: hybrid.model @mtp
// CHECK: ^bb0(%[[TOK:.+]]: tensor<1x4xi64>, %[[LAB:.+]]: tensor<1x4xi64>):
// CHECK: %[[S0:.+]] = pipe.stage 0 rank 0 chunk 0
// CHECK: %[[LAST:.+]]:2 = pipe.stage 1 rank 1 chunk 0 inputs(%[[S0]], %[[LAB]], %[[TOK]] : {{.*}}) -> tensor<f32>, tensor<f32> {
// CHECK: hybrid.mtp
// CHECK: hybrid.return %[[LAST]]#0, %[[LAST]]#1
hybrid.model @mtp attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 2, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 4, group_size = 2>, pattern = "M|*/-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h0 = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %h1 = hybrid.mamba %h0 : tensor<1x4x8xf32>
  %h2 = hybrid.attention %h1 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %h2 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  %m1, %l1 = hybrid.mtp %h2, %tokens, %labels depth 1 : tensor<1x4x8xf32>, tensor<1x4xi64>, tensor<1x4xi64> -> tensor<1x4x8xf32>, tensor<f32> {
  ^bb0(%x1: tensor<1x4x8xf32>):
    %y1_0 = hybrid.mlp %x1 : tensor<1x4x8xf32>
    hybrid.yield %y1_0 : tensor<1x4x8xf32>
  }
  hybrid.return %loss, %l1 : tensor<f32>, tensor<f32>
}
