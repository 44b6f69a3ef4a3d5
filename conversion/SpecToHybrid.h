//===- BuildModel.h - spec to the hybrid dialect --------------------------===//
#ifndef HYPIPE_FRONTEND_BUILDMODEL_H
#define HYPIPE_FRONTEND_BUILDMODEL_H

#include "frontend/Spec.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace hypipe {

/// Builds a module holding one `hybrid.model` for `spec`, with every main
/// layer placed on its (pp_rank, vp_stage) and the model's `pattern` written
/// with `|` where that placement puts the stage boundaries (however the spec
/// chose them). The result verifies.
mlir::OwningOpRef<mlir::ModuleOp> buildModel(mlir::MLIRContext &context,
                                             const ModelSpec &spec);

} // namespace hypipe

#endif
