//===- PipeOps.h - ops of the pipe dialect --------------------------------===//
#ifndef HYPIPE_DIALECTS_PIPE_PIPEOPS_H
#define HYPIPE_DIALECTS_PIPE_PIPEOPS_H

#include "dialects/pipe/PipeDialect.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_ATTRDEF_CLASSES
#include "dialects/pipe/PipeAttrs.h.inc"

#define GET_OP_CLASSES
#include "dialects/pipe/PipeOps.h.inc"

namespace hypipe::pipe {

/// Discardable attribute names written by `pipe-plan-buffers`: a stage's
/// #pipe.buffer_plan, each layer's #pipe.kernel (an MTP depth's output end
/// under its own name, on the same op as its input end's).
inline constexpr const char *kBufferPlanAttr = "pipe.buffer_plan";
inline constexpr const char *kKernelAttr = "pipe.kernel";
inline constexpr const char *kKernelMtpOutputAttr = "pipe.kernel_mtp_output";
/// On a hybrid.model: the target its stages are planned for (cpu, cuda).
inline constexpr const char *kTargetAttr = "pipe.target";

} // namespace hypipe::pipe

#endif
