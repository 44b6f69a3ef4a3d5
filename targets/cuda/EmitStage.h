//===- EmitStage.h - translate a planned stage to CUDA C++ ----------------===//
//
// The cuda stage source: the same plan, constants and statements as the cpu
// one (targets/cpu/EmitStage.h), calling runtime/kernels/cuda on device
// pointers. nvcc compiles it; this file includes no CUDA header.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_TARGETS_CUDA_EMITSTAGE_H
#define HYPIPE_TARGETS_CUDA_EMITSTAGE_H

#include "passes/lowering/KernelPlan.h"

#include <string>

namespace hypipe::cuda {

std::string emitStageCuda(const cpu::StagePlan &plan,
                          const std::string &modelName);

} // namespace hypipe::cuda

#endif
