//===- CudaTarget.h - the cuda target's two halves ------------------------===//
//
// The cuda target is one object (Target.h): its memory, optimizer kernels
// and the collectives' device side are CUDA code (Device.cu, in the kernel
// library), and its stage-running entry is plain C++ over the CUDA kernels
// (CudaTarget.cpp: the stage interpreter reads the stage program, which the
// kernel library does not link). This header joins them without CUDA
// headers.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_CUDA_CUDATARGET_H
#define HYPIPE_RUNTIME_KERNELS_CUDA_CUDATARGET_H

#include "runtime/kernels/Target.h"

#include <memory>

namespace hypipe::rt::cuda {

/// Runs one pass of a cuda stage's program over the CUDA kernels.
using StagePassRunner = void (*)(const StageProgram &program, StagePass pass,
                                 StageArgs &args);

/// The cuda target on GPU `ordinal`, running its stages with `runStages`.
std::unique_ptr<Device> openTarget(int ordinal, StagePassRunner runStages);

} // namespace hypipe::rt::cuda

#endif
