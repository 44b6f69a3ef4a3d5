//===- Artifact.h - write the compiled artifact directory -----------------===//
//
// An artifact (format in docs/artifact.md) is a directory:
//   manifest.json   spec, layout, rank grid, per-stage parameter tables and
//                   kernel programs (the stages as data), per-rank schedule
//                   programs
//   model.mlir      the final IR, for inspection
// Nothing is generated or compiled per stage: hypipe-run executes the
// kernel programs over the target's kernel library.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_TARGETS_ARTIFACT_H
#define HYPIPE_TARGETS_ARTIFACT_H

#include "frontend/Spec.h"
#include "runtime/formats/Artifact.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <string>

namespace hypipe {

/// The manifest's packing options of `spec` (disabled without
/// data.packing) with the cost model's sample cost.
rt::PackingConfig packingConfig(const ModelSpec &spec);

/// Runs the lowering pipeline on `module` (built from `spec`), then writes
/// the artifact into `dir`.
llvm::Error writeArtifact(mlir::ModuleOp module, const ModelSpec &spec,
                          const std::string &dir);

/// Marks the model with the spec's target and precision (`pipe.target`,
/// `pipe.precision`) and runs lowerForArtifact: what `hypipe compile
/// --emit kernels` prints and the artifact is written from.
mlir::LogicalResult lowerSpecModel(mlir::ModuleOp module,
                                   const ModelSpec &spec);

/// The pass pipeline from a built model to scheduled stages lowered to
/// kernel programs; the programs come from `scheduleCsv` when it names a
/// file, and the kernel programs recompute activations as `recompute` asks.
mlir::LogicalResult lowerForArtifact(mlir::ModuleOp module,
                                     const std::string &scheduleCsv = "",
                                     const RecomputeSpec &recompute = {});

} // namespace hypipe

#endif
