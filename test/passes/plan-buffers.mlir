// Tests that pipe-plan-buffers gives every layer its kernel and its typed
// ranges in the stage's parameter and saved buffers. The numbers are worked
// out in floats from the dims of Inputs/two-stages.mlir (hidden 8, vocab 16,
// 1x4 tokens); the attributes hold bytes of f32 (4 per float):
//   embedding  params 16*8 = 128; saved tokens + dy stash 4*(1+8) = 36
//   mamba      inner 8, conv channels 8+2*4 = 16, in_proj 2*8+2*4+2 = 26:
//              params 8 + 26*8 + 16*4 + 16 + 2+2+2 + 8 + 8*8 = 374;
//              saved 4*(8+8+1+26+16+2+8+8+1+8) + one scan state (4 tokens,
//              one chunk of 64) 2 heads*4*4 + 4*(26+8) stash = 512
//   attention  qkv (2+2)*4 = 16: params 8 + 16*8 + 8*8 = 200;
//              saved 4*(2*8+1+16+8) + log-sum-exp 4*2 + 4*(16+8) = 268
//   head       params 8 + 16*8 = 136; saved 4*(2*8+1+16) + 2*4 = 140
// RUN: hypipe-opt %S/Inputs/two-stages.mlir --hybrid-assign-stages --pipe-outline-stages --pipe-plan-buffers | FileCheck %s
// RUN: not hypipe-opt %s --pipe-outline-stages --pipe-plan-buffers 2>&1 | FileCheck %s --check-prefix=GDN

// Tests that the stages of Inputs/two-stages.mlir get the kernels, ranges and buffer sizes worked out above.
// CHECK-LABEL: hybrid.model @two
// CHECK-LABEL: pipe.stage 0 rank 0 chunk 0
// CHECK-SAME: pipe.buffer_plan = #pipe.buffer_plan<params = 2008, saved = 2192,
// CHECK: hybrid.embedding
// CHECK-SAME: pipe.kernel = #pipe.kernel<kind = "embedding", params = <offset = 0, bytes = 512, dtype = f32>, saved = <offset = 0, bytes = 144, dtype = f32>>
// CHECK: hybrid.mamba
// CHECK-SAME: pipe.kernel = #pipe.kernel<kind = "mamba", params = <offset = 512, bytes = 1496, dtype = f32>, saved = <offset = 144, bytes = 2048, dtype = f32>>
// CHECK-LABEL: pipe.stage 1 rank 1 chunk 0
// CHECK-SAME: pipe.buffer_plan = #pipe.buffer_plan<params = 1344, saved = 1632,
// CHECK: hybrid.attention
// CHECK-SAME: pipe.kernel = #pipe.kernel<kind = "attention", params = <offset = 0, bytes = 800, dtype = f32>, saved = <offset = 0, bytes = 1072, dtype = f32>>
// CHECK-NOT: hybrid.final_norm {{.*}}pipe.kernel
// CHECK: hybrid.output
// CHECK-SAME: pipe.kernel = #pipe.kernel<kind = "head", params = <offset = 800, bytes = 544, dtype = f32>, saved = <offset = 1072, bytes = 560, dtype = f32>>

// Tests that a layer kind the CPU target has no kernel for is an error at its op.
hybrid.model @gdn attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 0, moe_top_k = 0, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 1, vpp = 1, dp = 1, schedule = "1f1b", microbatches = 1, group_size = 1>, pattern = "G"} {
^bb0(%tokens: tensor<1x4xi64>, %labels: tensor<1x4xi64>):
  %h0 = hybrid.embedding %tokens : tensor<1x4xi64> -> tensor<1x4x8xf32>
  // GDN: error: the CPU target cannot lower 'hybrid.gdn' yet
  %h1 = hybrid.gdn %h0 {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
  %n = hybrid.final_norm %h1 : tensor<1x4x8xf32>
  %loss = hybrid.output %n, %labels : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
  hybrid.return %loss : tensor<f32>
}
