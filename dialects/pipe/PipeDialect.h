//===- PipeDialect.h - the pipe dialect -----------------------------------===//
#ifndef HYPIPE_DIALECTS_PIPE_PIPEDIALECT_H
#define HYPIPE_DIALECTS_PIPE_PIPEDIALECT_H

#include "dialects/hybrid/HybridDialect.h"
#include "mlir/IR/Dialect.h"

#include "dialects/pipe/PipeDialect.h.inc"

#endif
