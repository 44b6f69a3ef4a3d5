//===- StageRunner.h - one pass of a stage on its target ------------------===//
//
// Runs a pass of a stage's kernel program (StageProgram.h) over the kernels
// of the target it was compiled for: the CPU kernels, or the CUDA kernels
// where hypipe was built with them (StageInterpreter.h is the composition;
// this picks its instantiation).
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_EXEC_STAGERUNNER_H
#define HYPIPE_RUNTIME_EXEC_STAGERUNNER_H

#include "runtime/exec/StageArgs.h"
#include "runtime/formats/StageProgram.h"

namespace hypipe::rt {

enum class StagePass { Forward, BackwardInput, BackwardWeight };

/// Throws RuntimeError for a cuda program in a hypipe built without CUDA.
void runStagePass(const StageProgram &program, StagePass pass, StageArgs &args);

#if HYPIPE_HAVE_CUDA
/// The CUDA instantiation (StageRunnerCuda.cpp).
void runCudaStagePass(const StageProgram &program, StagePass pass,
                      StageArgs &args);
#endif

} // namespace hypipe::rt

#endif
