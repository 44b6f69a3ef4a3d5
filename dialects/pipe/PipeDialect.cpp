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

#define GET_ATTRDEF_CLASSES
#include "dialects/pipe/PipeAttrs.cpp.inc"

void PipeDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/pipe/PipeAttrs.cpp.inc"
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
  if (type.isF32())
    return 4;
  if (type.isBF16())
    return 2;
  return 0;
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

LogicalResult KernelAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 StringRef kind, RangeAttr params,
                                 RangeAttr saved) {
  // kernel_c1
  bool known = false;
  for (const char *name : hypipe::rt::kLayerKindNames)
    known |= kind == name;
  if (!known)
    return emitError() << "unknown kernel '" << kind << "' (kernel_c1)";
  // kernel_c2
  for (RangeAttr range : {params, saved})
    if (!range.getDtype().isF32())
      return emitError() << "kernel '" << kind << "' takes f32 tensors, not "
                         << range.getDtype() << " (kernel_c2)";
  return success();
}

LogicalResult
BufferPlanAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                       int64_t params, int64_t saved, int64_t workspace) {
  // buffer_plan_c1
  for (int64_t size : {params, saved, workspace})
    if (size < 0 || size % 4 != 0)
      return emitError() << "buffer sizes must be non-negative multiples of 4 "
                            "bytes, got "
                         << size << " (buffer_plan_c1)";
  return success();
}

LogicalResult PipeDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == kBufferPlanAttr) {
    if (!isa<StageOp>(op))
      return op->emitError() << "'" << name << "' belongs on a pipe.stage";
    if (!isa<BufferPlanAttr>(attr.getValue()))
      return op->emitError() << "'" << name << "' must be a #pipe.buffer_plan";
    return success();
  }
  if (name == kKernelAttr || name == kKernelMtpOutputAttr) {
    if (!isa<KernelAttr>(attr.getValue()))
      return op->emitError() << "'" << name << "' must be a #pipe.kernel";
    return success();
  }
  if (name == kTargetAttr) {
    auto target = dyn_cast<StringAttr>(attr.getValue());
    if (!isa<hybrid::ModelOp>(op) || !target)
      return op->emitError()
             << "'" << name << "' is a string on a hybrid.model";
    return success(); // its values are the planner's to check, with help
  }
  return op->emitError() << "unknown pipe attribute '" << name << "'";
}
