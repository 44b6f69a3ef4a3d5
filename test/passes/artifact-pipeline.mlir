// Tests that --hypipe-artifact-pipeline, the registered pipeline `hypipe
// compile` runs, takes placed layers to scheduled stages lowered to kernel programs.
// RUN: hypipe-opt %S/Inputs/two-stages.mlir --hybrid-assign-stages --hypipe-artifact-pipeline | FileCheck %s

// Tests that the stages get p2p and the kernel programs of lower-kernels.mlir, and each rank a program with its transfers.
// CHECK-LABEL: hybrid.model @two
// CHECK-LABEL: pipe.stage 0 rank 0 chunk 0
// CHECK: %[[ACT:.+]] = hybrid.mamba
// CHECK: pipe.send %[[ACT]] to 1 stage 1
// CHECK: pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 2 buffers(params 2008, saved 2192,
// CHECK-LABEL: pipe.stage 1 rank 1 chunk 0
// CHECK: pipe.kernel_program activations f32 tokens 1 x 4 hidden 8 layers 2 buffers(params 1344, saved 1664,
// CHECK: pipe.program rank 0 "1f1b"
// CHECK-SAME: "0F0", "0SEND_F0"
// CHECK: pipe.program rank 1 "1f1b"
// CHECK-SAME: "1RECV_F0", "1F0"
