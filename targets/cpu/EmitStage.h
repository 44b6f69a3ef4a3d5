//===- EmitStage.h - translate a planned stage to C++ ---------------------===//
//
// Writes the source of one stage library: the layer shapes as constants, the
// buffer plan as offsets, and the four functions of runtime/StageABI.h as
// straight-line calls into runtime/kernels/cpu.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_TARGETS_CPU_EMITSTAGE_H
#define HYPIPE_TARGETS_CPU_EMITSTAGE_H

#include "passes/lowering/KernelPlan.h"

#include <string>

namespace hypipe::cpu {

std::string emitStageCpp(const StagePlan &plan, const std::string &modelName);

} // namespace hypipe::cpu

#endif
