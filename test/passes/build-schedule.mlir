// Tests that pipe-build-schedule writes one pipe.program per rank holding the
// schedule's compute order, fed stages as pipe-outline-stages and
// pipe-insert-p2p leave them.
// RUN: hypipe-opt %s --split-input-file --pipe-build-schedule | FileCheck %s
// RUN: not hypipe-opt %S/Inputs/two-stages.mlir --pipe-build-schedule 2>&1 | FileCheck %s --check-prefix=NOSTAGES
// RUN: hypipe-opt %S/Inputs/two-outlined.mlir --pipe-build-schedule=import-csv=%S/Inputs/two-ranks-runtime.csv | FileCheck %s --check-prefix=CSV
// RUN: hypipe-opt %S/Inputs/two-outlined.mlir --pipe-build-schedule=import-csv=%S/Inputs/two-ranks-runtime.csv --pipe-insert-comms --pipe-verify-schedule | FileCheck %s --check-prefix=CSVCOMMS
// RUN: not hypipe-opt %S/Inputs/two-outlined.mlir --pipe-build-schedule=import-csv=%S/Inputs/two-ranks-one-mb.csv 2>&1 | FileCheck %s --check-prefix=CSVCOUNT

// Tests that import-csv takes a PyTorch runtime dump's programs as written, stage actions too, under the model's schedule.
// CSV-LABEL: hybrid.model @two
// CSV: pipe.program rank 0 "1f1b" ["0UNSHARD", "0F0", "0F1", "0B0", "0B1", "0REDUCE_GRAD", "0RESHARD"]
// CSV-NEXT: pipe.program rank 1 "1f1b" ["1F0", "1B0", "1F1", "1B1", "1REDUCE_GRAD"]

// Tests that pipe-insert-comms adds transfers around an imported compute order and leaves its stage actions in place.
// CSVCOMMS-LABEL: hybrid.model @two
// CSVCOMMS: pipe.program rank 0 "1f1b" ["0UNSHARD", "0F0", "0SEND_F0", "0F1", "0SEND_F1", "0RECV_B0", "0B0", "0RECV_B1", "0B1", "0REDUCE_GRAD", "0RESHARD"]
// CSVCOMMS-NEXT: pipe.program rank 1 "1f1b" ["1RECV_F0", "1F0", "1B0", "1SEND_B0", "1RECV_F1", "1F1", "1B1", "1SEND_B1", "1REDUCE_GRAD"]

// Tests that a model with no stages is refused with the pass to run first.
// NOSTAGES: error: 'hybrid.model' op has no pipe.stage ops: run pipe-outline-stages first

// Tests that a file for another microbatch count is refused, naming both.
// CSVCOUNT: error: 'hybrid.model' op {{.*}}two-ranks-one-mb.csv: the file runs 1 microbatches but the model takes 2 per step

// Tests that 1f1b on two ranks gets Megatron's compute-only order, one program per rank, before hybrid.return.
// CHECK-LABEL: hybrid.model @two
// CHECK-SAME: schedule = "1f1b"
// CHECK: %[[LOSS:.+]] = pipe.stage 1 rank 1 chunk 0
// CHECK: pipe.program rank 0 "1f1b" ["0F0", "0F1", "0B0", "0B1"]
// CHECK-NEXT: pipe.program rank 1 "1f1b" ["1F0", "1B0", "1F1", "1B1"]
// CHECK-NEXT: hybrid.return %[[LOSS]]
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
  hybrid.return %0 : tensor<f32>
}

// -----

// Tests that zbv runs on the stages' V placement: rank 0 runs stages 0 and 3, rank 1 the middle two.
// CHECK-LABEL: hybrid.model @two
// CHECK-SAME: schedule = zbv,
// CHECK: pipe.program rank 0 "zbv" ["0F0", "0F1", "3F0",
// CHECK: pipe.program rank 1 "zbv" ["1F0", "2F0",
#dims = #hybrid.dims<hidden = 8, ffn_hidden = 16, num_heads = 2, num_query_groups = 1, mamba_state = 4, mamba_num_heads = 2, mamba_head_dim = 4, mamba_num_groups = 1, mamba_conv_width = 4, num_experts = 2, moe_top_k = 1, moe_ffn_hidden = 0, vocab = 16, tie_embeddings = true, activation = "swiglu">
hybrid.model @two attributes {dims = #dims, parallel = #hybrid.parallel<pp = 2, vpp = 2, dp = 1, schedule = "zbv", microbatches = 2, group_size = 2>, pattern = "M|*||"} {
^bb0(%arg0: tensor<1x4xi64>, %arg1: tensor<1x4xi64>):
  pipe.stage 0 rank 0 chunk 0 inputs(%arg0 : tensor<1x4xi64>) {
  ^bb0(%arg2: tensor<1x4xi64>):
    %2 = hybrid.embedding %arg2 : tensor<1x4xi64> -> tensor<1x4x8xf32>
    %3 = hybrid.mamba %2 {placement = #hybrid.placement<segment = 0, pp_rank = 0, vp_stage = 0, layer = 1>} : tensor<1x4x8xf32>
    pipe.send %3 to 1 stage 1 : tensor<1x4x8xf32>
    pipe.recv_grad %3 from 1 stage 1 : tensor<1x4x8xf32>
    pipe.yield
  }
  %0 = pipe.stage 1 rank 1 chunk 0 -> tensor<1x4x8xf32> {
    %2 = pipe.recv from 0 stage 0 : tensor<1x4x8xf32>
    %3 = hybrid.attention %2 {placement = #hybrid.placement<segment = 1, pp_rank = 1, vp_stage = 0, layer = 2>} : tensor<1x4x8xf32>
    pipe.send_grad %2 to 0 stage 0 : tensor<1x4x8xf32>
    pipe.yield %3 : tensor<1x4x8xf32>
  }
  pipe.stage 2 rank 1 chunk 1 inputs(%0 : tensor<1x4x8xf32>) {
  ^bb0(%arg2: tensor<1x4x8xf32>):
    pipe.send %arg2 to 0 stage 3 : tensor<1x4x8xf32>
    pipe.recv_grad %arg2 from 0 stage 3 : tensor<1x4x8xf32>
    pipe.yield
  }
  %1 = pipe.stage 3 rank 0 chunk 1 inputs(%arg1 : tensor<1x4xi64>) -> tensor<f32> {
  ^bb0(%arg2: tensor<1x4xi64>):
    %2 = pipe.recv from 1 stage 2 : tensor<1x4x8xf32>
    %3 = hybrid.final_norm %2 : tensor<1x4x8xf32>
    %4 = hybrid.output %3, %arg2 : tensor<1x4x8xf32>, tensor<1x4xi64> -> tensor<f32>
    pipe.send_grad %2 to 1 stage 2 : tensor<1x4x8xf32>
    pipe.yield %4 : tensor<f32>
  }
  hybrid.return %1 : tensor<f32>
}
