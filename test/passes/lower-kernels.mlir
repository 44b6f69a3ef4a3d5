// Tests that pipe-lower-kernels ends every stage in its kernel program: the
// layers with their kernels, shapes and typed byte ranges of the stage's
// parameter and saved buffers, then the calls of the forward, input-gradient
// and weight-gradient passes. The sizes are worked out in floats from the
// dims of Inputs/two-stages.mlir (hidden 8, vocab 16, 1x4 tokens); the
// program holds bytes of f32 (4 per float):
//   embedding  params 16*8 = 128; saved tokens + dy stash 4*(1+8) = 36
//   mamba      inner 8, conv channels 8+2*4 = 16, in_proj 2*8+2*4+2 = 26:
//              params 8 + 26*8 + 16*4 + 16 + 2+2+2 + 8 + 8*8 = 374;
//              saved 4*(8+8+1+26+16+2+8+8+1+8) + one scan state (4 tokens,
//              one chunk of 64) 2 heads*4*4 + 4*(26+8) stash = 512
//   attention  qkv (2+2)*4 = 16: params 8 + 16*8 + 8*8 = 200;
//              saved 4*(2*8+1+16+8) + log-sum-exp 4*2 + 4*(16+8) = 268
//   head       params 8 + 16*8 = 136; saved 4*(2*8+1+16) + 4*4 = 148 (x,
//              xn, rstd, logits; each row's max, scale, mask and label)
//   activation slots: 4 tokens * 8 = 32 floats = 128 bytes each
// and from Inputs/moe-mtp.mlir (the same sizes, 2 experts of ffn 16, one MTP
// depth holding an attention layer):
//   moe        norm 8 + router 2*8 + 2 experts * (16*8 + 8*16) = 536
//   mtp_input  enorm 8 + hnorm 8 + eh_proj 8*16 = 144 (the table is the
//              stage's own embedding's, so the depth owns none)
//   mtp_output final norm 8
// RUN: hypipe-opt %S/Inputs/two-stages.mlir --hybrid-assign-stages --pipe-outline-stages --pipe-lower-kernels | FileCheck %s
// RUN: hypipe-opt %S/Inputs/moe-mtp.mlir --pipe-outline-stages --pipe-lower-kernels | FileCheck %s --check-prefix=MTP
// RUN: hypipe-opt %S/Inputs/two-stages.mlir --hybrid-assign-stages --pipe-outline-stages --pipe-lower-kernels --pipe-lower-kernels | FileCheck %s --check-prefix=AGAIN
// RUN: hypipe-opt %S/Inputs/moe-mtp.mlir --pipe-outline-stages --pipe-lower-kernels | hypipe-opt | hypipe-opt --pipe-lower-kernels | FileCheck %s --check-prefix=MTP
// RUN: hypipe-opt %s --pipe-outline-stages --pipe-lower-kernels 2>&1 | FileCheck %s --check-prefix=GDN

// Tests that the Mamba stage (embedding first: it reads the tokens, not an
// activation) and the attention stage (head last: it ends in the loss) get
// the ranges and calls worked out above; the Mamba layer writes the stage's
// output itself and the attention layer its input's gradient.
// CHECK-LABEL: pipe.stage 0 rank 0 chunk 0
// CHECK: pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 2 buffers(params 2008, saved 2192, workspace
// CHECK-SAME: act0 <offset = 0, bytes = 128, dtype = f32> act1 <offset = 128, bytes = 128, dtype = f32> scratch <offset = 256,
// CHECK-NEXT: %[[EMB:.+]] = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32> saved <offset = 0, bytes = 144, dtype = f32> shape {hidden = 8 : i64, vocab = 16 : i64}
// CHECK-NEXT: %[[MAMBA:.+]] = pipe.kernel_layer mamba layer 1 "decoder.layers.0." params <offset = 512, bytes = 1496, dtype = f32> saved <offset = 144, bytes = 2048, dtype = f32>
// CHECK-SAME: shape {conv_width = 4 : i64, groups = 1 : i64, head_dim = 4 : i64, heads = 2 : i64, hidden = 8 : i64, state = 4 : i64}
// CHECK-NEXT: pipe.kernel_pass forward {
// CHECK-NEXT:   pipe.kernel_call %[[EMB]](none) -> act0
// CHECK-NEXT:   pipe.kernel_call %[[MAMBA]](act0) -> output
// CHECK-NEXT: }
// CHECK-NEXT: pipe.kernel_pass backward_input {
// CHECK-NEXT:   pipe.kernel_call %[[MAMBA]](grad_output) -> act0
// CHECK-NEXT:   pipe.kernel_call %[[EMB]](act0) -> none
// CHECK-NEXT: }
// CHECK-NEXT: pipe.kernel_pass backward_weight {
// CHECK-NEXT:   pipe.kernel_call %[[MAMBA]](none) -> none
// CHECK-NEXT:   pipe.kernel_call %[[EMB]](none) -> none
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: pipe.yield
// CHECK-LABEL: pipe.stage 1 rank 1 chunk 0
// CHECK: pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 2 buffers(params 1344, saved 1664, workspace
// CHECK-NEXT: %[[ATTN:.+]] = pipe.kernel_layer attention layer 2 "decoder.layers.1." params <offset = 0, bytes = 800, dtype = f32> saved <offset = 0, bytes = 1072, dtype = f32>
// CHECK-SAME: shape {groups = 1 : i64, head_dim = 4 : i64, heads = 2 : i64, hidden = 8 : i64, rope = false, rope_base = 1.000000e+04 : f64}
// CHECK-NEXT: %[[HEAD:.+]] = pipe.kernel_layer head layer 0 "" params <offset = 800, bytes = 544, dtype = f32> saved <offset = 1072, bytes = 592, dtype = f32> shape {hidden = 8 : i64, loss_chunk = 0 : i64, tied = true, vocab = 16 : i64}
// CHECK-NEXT: pipe.kernel_pass forward {
// CHECK-NEXT:   pipe.kernel_call %[[ATTN]](input) -> act0
// CHECK-NEXT:   pipe.kernel_call %[[HEAD]](act0) -> none
// CHECK-NEXT: }
// CHECK-NEXT: pipe.kernel_pass backward_input {
// CHECK-NEXT:   pipe.kernel_call %[[HEAD]](none) -> act0
// CHECK-NEXT:   pipe.kernel_call %[[ATTN]](act0) -> grad_input
// CHECK-NEXT: }

// Tests that a stage lowered twice holds one program, the new one.
// AGAIN-LABEL: pipe.stage 0 rank 0 chunk 0
// AGAIN-COUNT-1: pipe.kernel_program
// AGAIN-NOT: pipe.kernel_program
// AGAIN: pipe.stage 1 rank 1 chunk 0
// AGAIN-COUNT-1: pipe.kernel_program
// AGAIN-NOT: pipe.kernel_program

// Tests that an MoE layer and an MTP depth lower in one stage (and that the
// printed program parses and lowers again to itself): the depth's input,
// inner layers and output after the head, under Megatron's MTP names; its
// shared views of the output layer (the head's range after its 8-float
// norm: 2656 + 32) and of the embedding table (the embedding's, 16*8*4
// bytes); the forward calls of the depth start from the tokens again, its
// output ends in a loss, and the input gradients start from the depth's
// loss, then the head's.
// MTP: pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 1
// MTP-SAME: shared_output <offset = 2688, bytes = 512, dtype = f32> shared_table <offset = 0, bytes = 512, dtype = f32>
// MTP-NEXT: %[[EMB:.+]] = pipe.kernel_layer embedding layer 0 "" params <offset = 0, bytes = 512, dtype = f32>
// MTP-NEXT: %[[MOE:.+]] = pipe.kernel_layer moe layer 1 "decoder.layers.0." params <offset = 512, bytes = 2144, dtype = f32>
// MTP-SAME: shape {activation = "squared_relu", all_to_all = false, aux_loss_coeff = 1.000000e-02 : f64, capacity_blocks = 1 : i64, capacity_factor = 0.000000e+00 : f64, drop_by_position = false, expert_ranks = 1 : i64, expert_tp = 1 : i64, experts = 2 : i64, ffn = 16 : i64, group_replicas = 1 : i64, hidden = 8 : i64, topk = 1 : i64}
// MTP-NEXT: %[[HEAD:.+]] = pipe.kernel_layer head layer 0 "" params <offset = 2656, bytes = 544, dtype = f32>
// MTP-NEXT: %[[IN:.+]] = pipe.kernel_layer mtp_input layer 0 "mtp.layers.0." params <offset = 3200, bytes = 576, dtype = f32>
// MTP-SAME: shape {depth = 1 : i64, hidden = 8 : i64, owns_table = false, vocab = 16 : i64}
// MTP-NEXT: %[[INNER:.+]] = pipe.kernel_layer attention layer 0 "mtp.layers.0.mtp_model_layer.layers.0." params <offset = 3776, bytes = 800, dtype = f32>
// MTP-NEXT: %[[OUT:.+]] = pipe.kernel_layer mtp_output layer 0 "mtp.layers.0." params <offset = 4576, bytes = 32, dtype = f32>
// MTP-SAME: shape {depth = 1 : i64, hidden = 8 : i64, loss_chunk = 0 : i64, loss_weight = 1.000000e-01 : f64, vocab = 16 : i64}
// MTP-NEXT: pipe.kernel_pass forward {
// MTP-NEXT:   pipe.kernel_call %[[EMB]](none) -> act0
// MTP-NEXT:   pipe.kernel_call %[[MOE]](act0) -> act1
// MTP-NEXT:   pipe.kernel_call %[[HEAD]](act1) -> none
// MTP-NEXT:   pipe.kernel_call %[[IN]](none) -> act0
// MTP-NEXT:   pipe.kernel_call %[[INNER]](act0) -> act1
// MTP-NEXT:   pipe.kernel_call %[[OUT]](act1) -> none
// MTP-NEXT: }
// MTP-NEXT: pipe.kernel_pass backward_input {
// MTP-NEXT:   pipe.kernel_call %[[OUT]](none) -> act0
// MTP-NEXT:   pipe.kernel_call %[[INNER]](act0) -> act1
// MTP-NEXT:   pipe.kernel_call %[[IN]](act1) -> act0
// MTP-NEXT:   pipe.kernel_call %[[HEAD]](none) -> act1
// MTP-NEXT:   pipe.kernel_call %[[MOE]](act1) -> act0
// MTP-NEXT:   pipe.kernel_call %[[EMB]](act0) -> none
// MTP-NEXT: }
// MTP-NEXT: pipe.kernel_pass backward_weight {
// MTP-NEXT:   pipe.kernel_call %[[OUT]](none) -> none
// MTP-NEXT:   pipe.kernel_call %[[INNER]](none) -> none
// MTP-NEXT:   pipe.kernel_call %[[IN]](none) -> none
// MTP-NEXT:   pipe.kernel_call %[[HEAD]](none) -> none
// MTP-NEXT:   pipe.kernel_call %[[MOE]](none) -> none
// MTP-NEXT:   pipe.kernel_call %[[EMB]](none) -> none
// MTP-NEXT: }

// Tests that a Gated DeltaNet layer lowers to a gdn kernel with Megatron's
// parameter prefix and the sizes of its shape: hidden 8, 1 key head of 2, 2
// value heads of 2, conv 2: key width 2, value width 4, conv channels 8,
// in_proj 8 + 4 + 2*2 = 16 rows. Params 8 + 16*8 + 8*2 + 2 + 2 + 2 + 8*4 =
// 190 floats (760 bytes); saved for 4 tokens 4*(2*8 + 1 + 16 + 8 + 2*2 +
// 2*1 + 2*2 + 4 + 2 + 4) = 244, one chunk's states 2*2*2 = 8, the
// in_proj and out_proj gradients 4*(16 + 8) = 96: 348 floats (1392 bytes).
// GDN: pipe.kernel_layer gdn layer 1 "decoder.layers.0." params <offset = 512, bytes = 760, dtype = f32> saved <offset = 144, bytes = 1392, dtype = f32>
// GDN-SAME: shape {conv_width = 2 : i64, hidden = 8 : i64, key_head_dim = 2 : i64, key_heads = 1 : i64, value_head_dim = 2 : i64, value_heads = 2 : i64}
hybrid.model @gdn attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 0, moe_top_k = 0, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu", linear_num_key_heads = 1, linear_num_value_heads = 2, linear_key_head_dim = 2, linear_value_head_dim = 2, linear_conv_kernel_dim = 2>, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "G"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h0 = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  %h1 = hybrid.gdn %h0 {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
  %n = hybrid.final_norm %h1 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}
