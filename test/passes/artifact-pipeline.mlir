// Tests that --hypipe-artifact-pipeline, the registered pipeline `hypipe
// compile` runs, takes placed layers to scheduled stages with a buffer plan:
// stages outlined, p2p inserted, one verified program per rank with its
// transfers, and the plan of pipe-plan-buffers (the numbers worked out in
// plan-buffers.mlir for the same input).
// RUN: hypipe-opt %S/Inputs/two-stages.mlir --hybrid-assign-stages --hypipe-artifact-pipeline | FileCheck %s

// CHECK-LABEL: pipe.stage 0 rank 0 chunk 0
// CHECK-SAME: pipe.buffer_plan = {params = 502 : i64, saved = 548 : i64
// CHECK: pipe.send
// CHECK-LABEL: pipe.stage 1 rank 1 chunk 0
// CHECK-SAME: pipe.buffer_plan = {params = 336 : i64, saved = 408 : i64
// CHECK: pipe.program rank 0 "1f1b"
// CHECK-SAME: "0F0", "0SEND_F0"
// CHECK: pipe.program rank 1 "1f1b"
// CHECK-SAME: "1RECV_F0", "1F0"
