//===- HybridDialect.cpp --------------------------------------------------===//
#include "dialects/hybrid/HybridDialect.h"
#include "dialects/hybrid/HybridOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace hypipe::hybrid;

#include "dialects/hybrid/HybridDialect.cpp.inc"
#include "dialects/hybrid/HybridEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/hybrid/HybridAttrs.cpp.inc"

void HybridDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/hybrid/HybridAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/hybrid/HybridOps.cpp.inc"
      >();
}
