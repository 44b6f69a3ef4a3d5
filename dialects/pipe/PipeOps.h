//===- PipeOps.h - ops of the pipe dialect --------------------------------===//
#ifndef HYPIPE_DIALECTS_PIPE_PIPEOPS_H
#define HYPIPE_DIALECTS_PIPE_PIPEOPS_H

#include "dialects/pipe/PipeDialect.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "dialects/pipe/PipeOps.h.inc"

#endif
