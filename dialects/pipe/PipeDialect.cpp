//===- PipeDialect.cpp ----------------------------------------------------===//
#include "dialects/pipe/PipeDialect.h"
#include "dialects/hybrid/HybridOps.h"
#include "dialects/pipe/PipeOps.h"

using namespace mlir;
using namespace hypipe::pipe;

#include "core/model/LayerShapes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

#include "dialects/pipe/PipeDialect.cpp.inc"

#include "dialects/pipe/PipeEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/pipe/PipeAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/pipe/PipeTypes.cpp.inc"

void PipeDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/pipe/PipeAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialects/pipe/PipeTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/pipe/PipeOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

namespace {
/// Bytes of one element of `type`, for the dtypes a range may have.
int64_t elementBytes(Type type) {
  return type.isF32() || type.isBF16() ? type.getIntOrFloatBitWidth() / 8 : 0;
}
} // namespace

LogicalResult RangeAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                int64_t offset, int64_t bytes, Type dtype) {
  // range_c1
  if (offset < 0 || bytes < 0)
    return emitError() << "offset " << offset << " and bytes " << bytes
                       << " must be non-negative (range_c1)";
  // range_c2
  int64_t size = elementBytes(dtype);
  if (size == 0)
    return emitError() << "dtype " << dtype << " is not f32 or bf16 (range_c2)";
  // range_c3
  if (offset % size != 0 || bytes % size != 0)
    return emitError() << "offset " << offset << " and bytes " << bytes
                       << " must be multiples of the " << size << "-byte "
                       << dtype << " (range_c3)";
  return success();
}

LogicalResult PipeDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == kPrecisionAttr) {
    auto precision = dyn_cast<TypeAttr>(attr.getValue());
    if (!isa<hybrid::ModelOp>(op) || !precision ||
        !(precision.getValue().isF32() || precision.getValue().isBF16()))
      return op->emitError()
             << "'" << name << "' is f32 or bf16 on a hybrid.model";
    return success();
  }
  if (name == kTargetAttr) {
    if (!isa<hybrid::ModelOp>(op) || !isa<TargetAttr>(attr.getValue()))
      return op->emitError()
             << "'" << name << "' is a #pipe.target on a hybrid.model";
    return success();
  }
  return op->emitError() << "unknown pipe attribute '" << name << "'";
}
