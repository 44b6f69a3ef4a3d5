//===- PipeDialect.cpp ----------------------------------------------------===//
#include "dialects/pipe/PipeDialect.h"
#include "dialects/hybrid/HybridOps.h"
#include "dialects/pipe/PipeOps.h"

using namespace mlir;
using namespace hypipe::pipe;

#include "dialects/pipe/PipeDialect.cpp.inc"

void PipeDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/pipe/PipeOps.cpp.inc"
      >();
}
