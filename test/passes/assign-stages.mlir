// Tests that hybrid-assign-stages places every layer from the pattern's '|'
// segments or from a Megatron layout string.
// RUN: hypipe-opt %s --hybrid-assign-stages | FileCheck %s
// RUN: hypipe-opt %S/Inputs/four-layers.mlir --hybrid-assign-stages="layout=Et|tt|t|L" | FileCheck %s --check-prefix=LAYOUT
// RUN: not hypipe-opt %S/Inputs/four-layers.mlir --hybrid-assign-stages="layout=Ettt|tL" 2>&1 | FileCheck %s --check-prefix=LAYOUTVPP
// RUN: not hypipe-opt %S/Inputs/four-layers.mlir --hybrid-assign-stages="layout=Et|tt|x|L" 2>&1 | FileCheck %s --check-prefix=LAYOUTBAD
// RUN: hypipe-opt %S/Inputs/assign-stages-errors.mlir -split-input-file -verify-diagnostics --hybrid-assign-stages

// Tests that a layout string places a pattern without '|' and writes the '|' into it.
// LAYOUT-LABEL: hybrid.model @layout
// LAYOUT-SAME: pattern = "M|MM|M|"
// LAYOUT: hybrid.mamba
// LAYOUT-SAME: placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>
// LAYOUT: hybrid.mamba
// LAYOUT-SAME: placement = #hybrid.placement<segment = 1, pp_rank = 1, vp_stage = 0, layer = 2>
// LAYOUT: hybrid.mamba
// LAYOUT-SAME: placement = #hybrid.placement<segment = 1, pp_rank = 1, vp_stage = 0, layer = 3>
// LAYOUT: hybrid.mamba
// LAYOUT-SAME: placement = #hybrid.placement<segment = 2, pp_rank = 0, vp_stage = 1, layer = 4>

// Tests that a layout with another number of virtual stages per rank than vpp is refused.
// LAYOUTVPP: error: 'hybrid.model' op layout 'Ettt|tL' has 1 virtual stages per rank but the model has vpp = 2

// Tests that a layout with an unknown letter is refused.
// LAYOUTBAD: error: 'hybrid.model' op layout 'Et|tt|x|L': 'x' is not a layout letter

// Tests that the pass reports the errors Inputs/assign-stages-errors.mlir expects (last RUN line).

// Tests that '|' segment s goes to pp_rank s % pp, vp_stage s / pp, and that the last segment may be empty.
// CHECK-LABEL: hybrid.model @pipes
// CHECK: hybrid.mamba
// CHECK-SAME: placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>
// CHECK: hybrid.attention
// CHECK-SAME: placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 2>
// CHECK: hybrid.mlp
// CHECK-SAME: placement = #hybrid.placement<segment = 1, pp_rank = 1, vp_stage = 0, layer = 3>
// CHECK: hybrid.mamba
// CHECK-SAME: placement = #hybrid.placement<segment = 2, pp_rank = 0, vp_stage = 1, layer = 4>
// CHECK: hybrid.moe
// CHECK-SAME: placement = #hybrid.placement<segment = 2, pp_rank = 0, vp_stage = 1, layer = 5>
hybrid.model @pipes attributes {dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">, parallel = #hybrid.parallel<pp = 2, vpp = 2, dp = 1, schedule = "interleaved-1f1b", microbatches = 4, group_size = 2>, pattern = "M*|-|ME|"} {
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
