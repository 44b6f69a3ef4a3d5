// Tests that pipe-insert-p2p puts send/recv at cross-rank stage boundaries and
// the gradient reductions into the stages.
// RUN: hypipe-opt %s -split-input-file --hybrid-assign-stages --pipe-outline-stages --pipe-insert-p2p | FileCheck %s
// RUN: hypipe-opt %s -split-input-file --hybrid-assign-stages --pipe-outline-stages --pipe-insert-p2p | hypipe-opt -split-input-file | FileCheck %s
// RUN: not hypipe-opt %S/Inputs/eight-mamba.mlir --pipe-insert-p2p 2>&1 | FileCheck %s --check-prefix=NOSTAGES
// RUN: not hypipe-opt %S/Inputs/eight-mamba.mlir --hybrid-auto-partition --pipe-outline-stages --pipe-insert-p2p --pipe-insert-p2p 2>&1 | FileCheck %s --check-prefix=TWICE

// Tests that a model with no stages is refused with the pass to run first.
// NOSTAGES: error: 'hybrid.model' op has no pipe.stage ops: run pipe-outline-stages first

// Tests that a second run is refused.
// TWICE: error: 'hybrid.model' op already has send/recv: run pipe-insert-p2p once

// Tests that with pp = 2, dp = 2 and untied embeddings activations go forward, gradients back, and each stage reduces over dp only.
// CHECK-LABEL: hybrid.model @two_ranks
// CHECK: ^bb0(%[[TOK:.+]]: tensor<1x4xi64>, %[[LAB:.+]]: tensor<1x4xi64>):
// CHECK: pipe.stage 0 rank 0 chunk 0 inputs(%[[TOK]] : tensor<1x4xi64>) {
// CHECK: %[[OUT:.+]] = hybrid.attention
// CHECK-NEXT: pipe.send %[[OUT]] to 1 stage 1 : tensor<1x4x8xf32>
// CHECK-NEXT: pipe.recv_grad %[[OUT]] from 1 stage 1 : tensor<1x4x8xf32>
// CHECK-NEXT: pipe.grad_allreduce dp 2
// CHECK-NOT: tied_embedding
// CHECK: pipe.stage 1 rank 1 chunk 0 inputs(%[[LAB]] : tensor<1x4xi64>) -> tensor<f32> {
// CHECK: %[[IN:.+]] = pipe.recv from 0 stage 0 : tensor<1x4x8xf32>
// CHECK-NEXT: hybrid.mlp %[[IN]]
// CHECK: pipe.send_grad %[[IN]] to 0 stage 0 : tensor<1x4x8xf32>
// CHECK-NEXT: pipe.grad_allreduce dp 2
// CHECK-NOT: tied_embedding
hybrid.model @two_ranks attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = false, activation = "swiglu">, parallel = #hybrid.parallel<pp = 2, vpp = 1, dp = 2, schedule = "1f1b", microbatches = 4, group_size = 2>, pattern = "M*|-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h0 = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %h1 = hybrid.mamba %h0 : tensor<1x4x8xf32>
  %h2 = hybrid.attention %h1 : tensor<1x4x8xf32>
  %h3 = hybrid.mlp %h2 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %h3 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that with pp = 1, vpp = 2 both chunks on one rank hand off locally, with no send/recv.
// CHECK-LABEL: hybrid.model @one_rank
// CHECK: ^bb0(%{{.+}}: tensor<1x4xi64>, %[[LAB:.+]]: tensor<1x4xi64>):
// CHECK: %[[C0:.+]] = pipe.stage 0 rank 0 chunk 0
// CHECK-NOT: pipe.send
// CHECK: pipe.stage 1 rank 0 chunk 1 inputs(%[[C0]], %[[LAB]] : tensor<1x4x8xf32>, tensor<1x4xi64>)
// CHECK-NOT: pipe.recv
hybrid.model @one_rank attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 2, dp = 1, schedule = "interleaved-1f1b", microbatches = 4, group_size = 1>, pattern = "M*|-"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h0 = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %h1 = hybrid.mamba %h0 : tensor<1x4x8xf32>
  %h2 = hybrid.attention %h1 : tensor<1x4x8xf32>
  %h3 = hybrid.mlp %h2 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %h3 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}

// -----

// Tests that with tied embeddings on ranks 0 and 1 both ends reduce the shared weight's gradient.
// CHECK-LABEL: hybrid.model @tied
// CHECK: pipe.stage 0 rank 0
// CHECK: pipe.tied_embedding_allreduce with 1
// CHECK: pipe.stage 3 rank 1 chunk 1
// CHECK: pipe.tied_embedding_allreduce with 0
hybrid.model @tied attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 2, vpp = 2, dp = 1, schedule = "interleaved-1f1b", microbatches = 4, group_size = 2>, pattern = "M|*|-|E"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h0 = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %h1 = hybrid.mamba %h0 : tensor<1x4x8xf32>
  %h2 = hybrid.attention %h1 : tensor<1x4x8xf32>
  %h3 = hybrid.mlp %h2 : tensor<1x4x8xf32>
  %h4 = hybrid.moe %h3 : tensor<1x4x8xf32>
  %n = hybrid.final_norm %h4 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}
