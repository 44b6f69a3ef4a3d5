//===- StageProgram.h - a planned stage as its kernel program -------------===//
//
// The last lowering step of a stage: the plan `pipe-plan-buffers` recorded
// (passes/lowering/KernelPlan.h) as the kernel program the manifest carries
// and hypipe-run executes (runtime/formats/StageProgram.h): layers with typed byte
// ranges, the workspace's two activation slots and scratch, and the calls
// of the forward, input-gradient and weight-gradient passes with the slots
// each reads and writes. The same for every target; no code is generated.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_TARGETS_STAGEPROGRAM_H
#define HYPIPE_TARGETS_STAGEPROGRAM_H

#include "passes/lowering/KernelPlan.h"
#include "runtime/formats/StageProgram.h"

namespace hypipe {

rt::StageProgram buildStageProgram(const cpu::StagePlan &plan);

} // namespace hypipe

#endif
