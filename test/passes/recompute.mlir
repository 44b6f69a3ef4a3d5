// Tests that pipe-recompute turns full activation recompute into a change of
// every kernel program. Sizes in bytes, from lower-kernels.mlir's worked
// values for Inputs/two-stages.mlir (one activation [4 tokens, 8] = 128):
// stage 0 keeps embedding 144 and its mamba layer's 2048 move to the
// recompute buffer; the saved buffer is the embedding's 144 and one
// checkpoint (the mamba layer's input), 144 + 128 = 272; the workspace, 1080
// without recompute, gains rc0 and rc1: 1080 + 2*128 = 1336. Stage 1 keeps
// the head's 592 and one checkpoint (592 + 128 = 720), recomputes the
// attention layer's 1072, and its workspace grows from 544 to 800.
// RUN: hypipe-opt %S/Inputs/two-stages.mlir --hybrid-assign-stages --pipe-outline-stages --pipe-lower-kernels --pipe-recompute="granularity=full method=uniform num-layers=1" | FileCheck %s
// RUN: hypipe-opt %S/Inputs/moe-mtp.mlir --pipe-outline-stages --pipe-lower-kernels --pipe-recompute="granularity=full method=block num-layers=1" | FileCheck %s --check-prefix=MTP
// RUN: hypipe-opt %S/Inputs/moe-mtp.mlir --pipe-outline-stages --pipe-lower-kernels --pipe-recompute="granularity=full method=block num-layers=1" | hypipe-opt | FileCheck %s --check-prefix=MTP
// RUN: hypipe-opt %S/Inputs/two-stages.mlir --hybrid-assign-stages --pipe-outline-stages --pipe-lower-kernels --pipe-recompute="granularity=none" | FileCheck %s --check-prefix=NONE
// RUN: hypipe-opt %S/Inputs/moe-mtp.mlir --pipe-outline-stages --pipe-lower-kernels --pipe-recompute="granularity=selective modules=core_attn,layernorm,moe_act" | FileCheck %s --check-prefix=SEL
// RUN: hypipe-opt %S/Inputs/moe-mtp.mlir --pipe-outline-stages --pipe-lower-kernels --pipe-recompute="granularity=selective modules=core_attn,layernorm,moe_act" | hypipe-opt | FileCheck %s --check-prefix=SEL
// RUN: hypipe-opt %S/Inputs/moe-mtp.mlir --pipe-outline-stages --pipe-lower-kernels --pipe-recompute="granularity=selective" | FileCheck %s --check-prefix=CORE
// RUN: hypipe-opt %S/Inputs/moe-mtp.mlir --pipe-outline-stages --pipe-lower-kernels --pipe-recompute="granularity=selective modules=moe" | FileCheck %s --check-prefix=MOEMOD
// RUN: not hypipe-opt %S/Inputs/two-stages.mlir --hybrid-assign-stages --pipe-outline-stages --pipe-lower-kernels --pipe-recompute="granularity=full method=uniform num-layers=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not hypipe-opt %S/Inputs/two-stages.mlir --hybrid-assign-stages --pipe-outline-stages --pipe-lower-kernels --pipe-recompute="granularity=full method=sideways num-layers=1" 2>&1 | FileCheck %s --check-prefix=METHOD
// RUN: not hypipe-opt %S/Inputs/two-stages.mlir --hybrid-assign-stages --pipe-outline-stages --pipe-lower-kernels --pipe-recompute="granularity=full method=uniform num-layers=1" --pipe-recompute="granularity=full method=uniform num-layers=1" 2>&1 | FileCheck %s --check-prefix=TWICE

// Tests that stage 0 keeps the mamba layer's input before it runs and, in
// the input gradient, loads it back and runs the layer again into the
// recompute slots before the layer's own input gradient; the weight pass is
// unchanged.
// CHECK-LABEL: pipe.stage 0 rank 0 chunk 0
// CHECK: pipe.kernel_program {{.*}} buffers(params 2008, saved 272, workspace 1336)
// CHECK-SAME: scratch <offset = 256, bytes = 824, dtype = f32> recompute 2048 rc0 <offset = 1080, bytes = 128, dtype = f32> rc1 <offset = 1208, bytes = 128, dtype = f32> {
// CHECK-NEXT: %[[EMB:.+]] = pipe.kernel_layer embedding {{.*}} saved <offset = 0, bytes = 144, dtype = f32>
// CHECK-NEXT: %[[MAMBA:.+]] = pipe.kernel_layer mamba layer 1 {{.*}} recomputed <offset = 0, bytes = 2048, dtype = f32>
// CHECK-NEXT: pipe.kernel_pass forward {
// CHECK-NEXT:   pipe.kernel_call %[[EMB]](none) -> act0
// CHECK-NEXT:   pipe.kernel_save act0 -> <offset = 144, bytes = 128, dtype = f32>
// CHECK-NEXT:   pipe.kernel_call %[[MAMBA]](act0) -> output
// CHECK-NEXT: }
// CHECK-NEXT: pipe.kernel_pass backward_input {
// CHECK-NEXT:   pipe.kernel_load <offset = 144, bytes = 128, dtype = f32> -> rc0
// CHECK-NEXT:   pipe.kernel_recompute %[[MAMBA]](rc0) -> rc1
// CHECK-NEXT:   pipe.kernel_call %[[MAMBA]](grad_output) -> act0
// CHECK-NEXT:   pipe.kernel_call %[[EMB]](act0) -> none
// CHECK-NEXT: }
// CHECK-NEXT: pipe.kernel_pass backward_weight {
// CHECK-NEXT:   pipe.kernel_call %[[MAMBA]](none) -> none
// CHECK-NEXT:   pipe.kernel_call %[[EMB]](none) -> none
// CHECK-NEXT: }

// Tests that stage 1 keeps its input itself (the attention layer reads the
// stage's input) and recomputes the layer after the head's input gradient.
// CHECK-LABEL: pipe.stage 1 rank 1 chunk 0
// CHECK: buffers(params 1344, saved 720, workspace 800)
// CHECK-SAME: recompute 1072 rc0 <offset = 544, bytes = 128, dtype = f32> rc1 <offset = 672, bytes = 128, dtype = f32>
// CHECK-NEXT: %[[ATT:.+]] = pipe.kernel_layer attention layer 2 {{.*}} recomputed <offset = 0, bytes = 1072, dtype = f32>
// CHECK-NEXT: %[[HEAD:.+]] = pipe.kernel_layer head {{.*}} saved <offset = 0, bytes = 592, dtype = f32>
// CHECK-NEXT: pipe.kernel_pass forward {
// CHECK-NEXT:   pipe.kernel_save input -> <offset = 592, bytes = 128, dtype = f32>
// CHECK-NEXT:   pipe.kernel_call %[[ATT]](input) -> act0
// CHECK-NEXT:   pipe.kernel_call %[[HEAD]](act0) -> none
// CHECK-NEXT: }
// CHECK-NEXT: pipe.kernel_pass backward_input {
// CHECK-NEXT:   pipe.kernel_call %[[HEAD]](none) -> act0
// CHECK-NEXT:   pipe.kernel_load <offset = 592, bytes = 128, dtype = f32> -> rc0
// CHECK-NEXT:   pipe.kernel_recompute %[[ATT]](rc0) -> rc1
// CHECK-NEXT:   pipe.kernel_call %[[ATT]](act0) -> grad_input

// Tests block recompute of one layer beside the MTP depth, checkpointed
// whole: the MoE layer (1524 bytes, moe-mtp's sizes: 4 * (4 * (2*8 + 1 + 2 +
// 2) + 2*2 + 1 + 4 * (8 + 2*16 + 16 + 2*8) + 4), the 2*2 the kept and the
// routed counts) and the depth's input projection (816) and attention layer
// (1072) recompute, 1524 + 816 + 1072 = 3412 bytes; the depth needs no checkpoint (its input projection reads the
// tokens and the head's normed output, which the head keeps), so the saved
// buffer is embedding 144 + head 592 + MTP output 592 + one checkpoint 128 =
// 1456.
// MTP: buffers(params 4608, saved 1456, workspace 1104)
// MTP-SAME: recompute 3412
// MTP: %[[MOE:.+]] = pipe.kernel_layer moe layer 1 {{.*}} recomputed <offset = 0, bytes = 1524, dtype = f32>
// MTP: %[[HEAD:.+]] = pipe.kernel_layer head {{.*}} saved <offset = 144, bytes = 592
// MTP-NEXT: %[[IN:.+]] = pipe.kernel_layer mtp_input {{.*}} recomputed <offset = 1524, bytes = 816
// MTP-NEXT: %[[ATT:.+]] = pipe.kernel_layer attention {{.*}} recomputed <offset = 2340, bytes = 1072
// MTP-NEXT: %[[OUT:.+]] = pipe.kernel_layer mtp_output {{.*}} saved <offset = 736, bytes = 592
// MTP: pipe.kernel_pass backward_input {
// MTP-NEXT:   pipe.kernel_call %[[OUT]](none) -> act0
// MTP-NEXT:   pipe.kernel_recompute %[[IN]](none) -> rc0
// MTP-NEXT:   pipe.kernel_recompute %[[ATT]](rc0) -> rc1
// MTP-NEXT:   pipe.kernel_call %[[ATT]](act0) -> act1
// MTP-NEXT:   pipe.kernel_call %[[IN]](act1) -> act0
// MTP-NEXT:   pipe.kernel_call %[[HEAD]](none) -> act1
// MTP-NEXT:   pipe.kernel_load <offset = 1328, bytes = 128, dtype = f32> -> rc0
// MTP-NEXT:   pipe.kernel_recompute %[[MOE]](rc0) -> rc1
// MTP-NEXT:   pipe.kernel_call %[[MOE]](act1) -> act0

// Tests selective recompute on moe-mtp: the MoE layer drops its normed
// input (4 tokens * 8 = 32 floats) and its routed rows' activations (4 rows
// * ffn 16 = 64): 96 floats = 384 bytes of its 1524, keeping 1140; the MTP
// depth's attention layer drops its normed input (32) and the core's
// log-sum-exp and context (4 * (2 heads + 8)) = 72 floats = 288 bytes of
// its 1072, keeping 784. The recompute buffer is 384 + 288 = 672 bytes; the
// saved buffer 144 + 1140 + 592 + 816 + 784 + 592 = 4068. No slot is added:
// each layer computes its dropped tensors from its kept ones, just before
// its input gradient.
// SEL: buffers(params 4608, saved 4068, workspace 848)
// SEL-SAME: recompute 672 {
// SEL: %[[MOE:.+]] = pipe.kernel_layer moe layer 1 {{.*}} saved <offset = 144, bytes = 1140, dtype = f32> recompute ["moe_act", "layernorm"] <offset = 0, bytes = 384, dtype = f32>
// SEL: %[[ATT:.+]] = pipe.kernel_layer attention {{.*}} saved <offset = 2692, bytes = 784, dtype = f32> recompute ["core_attn", "layernorm"] <offset = 384, bytes = 288, dtype = f32>
// SEL: pipe.kernel_pass forward {
// SEL-NOT: kernel_save
// SEL: pipe.kernel_pass backward_input {
// SEL:   pipe.kernel_recompute %[[ATT]](none) -> none
// SEL-NEXT:   pipe.kernel_call %[[ATT]](act0) -> act1
// SEL:   pipe.kernel_recompute %[[MOE]](none) -> none
// SEL-NEXT:   pipe.kernel_call %[[MOE]](act1) -> act0

// Tests that selective recompute without modules is Megatron's default,
// core_attn: only the attention layer drops (40 floats = 160 bytes).
// CORE: recompute 160 {
// CORE: pipe.kernel_layer moe {{.*}} saved <offset = 144, bytes = 1524, dtype = f32> shape
// CORE: pipe.kernel_layer attention {{.*}} recompute ["core_attn"] <offset = 0, bytes = 160, dtype = f32>

// Tests that the moe module (which brings moe_act) drops everything the
// router and the experts keep: 4 tokens x (2 probabilities + 1 choice + 1
// weight + 1 routed row of input 8, fc1 16, fc2 8 and its row id) + 2
// kept and 2 routed counts + 1 aux loss + 4 rows x 16 activations = 217
// floats = 868 bytes of 1524, keeping x, xn, rstd and the gradient stash (656); the layer's
// forward runs again into rc0 (rc0 and rc1 join the workspace: 848 + 256);
// the saved buffer is 144 + 656 + head 592 + 816 + 1072 + MTP output 592.
// MOEMOD: buffers(params 4608, saved 3872, workspace 1104)
// MOEMOD-SAME: recompute 868 rc0 <offset = 848, bytes = 128, dtype = f32> rc1 <offset = 976, bytes = 128, dtype = f32>
// MOEMOD: %[[MOE:.+]] = pipe.kernel_layer moe layer 1 {{.*}} saved <offset = 144, bytes = 656, dtype = f32> recompute ["moe", "moe_act"] <offset = 0, bytes = 868, dtype = f32>
// MOEMOD: pipe.kernel_recompute %[[MOE]](none) -> rc0
// MOEMOD-NEXT: pipe.kernel_call %[[MOE]](act1) -> act0

// Tests that without recompute nothing changes.
// NONE-NOT: recompute
// NONE-NOT: kernel_save

// ZERO: full recompute needs num-layers >= 1, got 0
// METHOD: pipe-recompute: unknown method 'sideways'
// TWICE: is recomputed already: run pipe-recompute once
