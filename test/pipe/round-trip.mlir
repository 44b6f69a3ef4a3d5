// Tests that the pipe dialect prints and parses back.
// RUN: hypipe-opt %s | hypipe-opt | FileCheck %s

// Tests that two stages with their transfers and gradient reductions round-trip.
// CHECK-LABEL: hybrid.model @m
// CHECK: ^bb0(%[[TOK:.+]]: tensor<1x4xi64>, %[[LAB:.+]]: tensor<1x4xi64>):
// CHECK: pipe.stage 0 rank 0 chunk 0 inputs(%[[TOK]] : tensor<1x4xi64>) {
// CHECK: pipe.send %[[A:.+]] to 1 stage 1 : tensor<1x4x8xf32>
// CHECK-NEXT: pipe.recv_grad %[[A]] from 1 stage 1 : tensor<1x4x8xf32>
// CHECK-NEXT: pipe.grad_allreduce dp 2
// CHECK-NEXT: pipe.yield
// CHECK: %[[LOSS:.+]] = pipe.stage 1 rank 1 chunk 0 inputs(%[[LAB]] : tensor<1x4xi64>) -> tensor<f32> {
// CHECK: %[[X:.+]] = pipe.recv from 0 stage 0 : tensor<1x4x8xf32>
// CHECK: pipe.send_grad %[[X]] to 0 stage 0 : tensor<1x4x8xf32>
// CHECK: hybrid.return %[[LOSS]] : tensor<f32>

hybrid.model @m attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "swiglu">, parallel = #hybrid.parallel<pp = 2, vpp = 1, dp = 2, schedule = "1f1b", microbatches = 4, group_size = 2>, pattern = "M|-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  pipe.stage 0 rank 0 chunk 0 inputs(%tokens : tensor<1x4xi64>) {
  ^bb0(%t: tensor<1x4xi64>):
    %h = hybrid.embedding %t : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %1 = hybrid.mamba %h : tensor<1x4x8xf32>
    pipe.send %1 to 1 stage 1 : tensor<1x4x8xf32>
    pipe.recv_grad %1 from 1 stage 1 : tensor<1x4x8xf32>
    pipe.grad_allreduce dp 2
    pipe.yield
  }
  %loss = pipe.stage 1 rank 1 chunk 0 inputs(%labels : tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%l: tensor<1x4xi64>):
    %x = pipe.recv from 0 stage 0 : tensor<1x4x8xf32>
    %2 = hybrid.mlp %x : tensor<1x4x8xf32>
    %n = hybrid.final_norm %2 : tensor<1x4x8xf32>
    %o = hybrid.output %n, %l : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.send_grad %x to 0 stage 0 : tensor<1x4x8xf32>
    pipe.grad_allreduce dp 2
    pipe.yield %o : tensor<f32>
  }
  hybrid.return %loss : tensor<f32>
}
