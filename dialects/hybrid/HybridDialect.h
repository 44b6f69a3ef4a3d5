//===- HybridDialect.h - the hybrid model dialect -------------------------===//
#ifndef HYPIPE_DIALECTS_HYBRID_HYBRIDDIALECT_H
#define HYPIPE_DIALECTS_HYBRID_HYBRIDDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialects/hybrid/HybridDialect.h.inc"

#endif
