//===- Artifact.h - write the compiled artifact directory
//------------------===//
//
// An artifact (format in docs/artifact.md) is a directory:
//   manifest.json        spec, layout, rank grid, per-stage parameter
//                        tables and buffer plans, per-rank schedule programs
//   model.mlir           the final IR, for inspection
//   stages/stage_N.cpp   the generated C++ of stage N (cpu target)
//   stages/stage_N.cu    ... or CUDA C++ (cuda target)
//   stages/stage_N.so    ... compiled by the host compiler or nvcc
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_TARGETS_ARTIFACT_H
#define HYPIPE_TARGETS_ARTIFACT_H

#include "frontend/Spec.h"
#include "runtime/Artifact.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <string>

namespace hypipe {

struct ArtifactOptions {
  /// C++ compiler for the stage libraries (`$HYPIPE_CXX`, else `c++`).
  std::string cxx;
  /// Where runtime/ headers and libhypipe_kernels_cpu live.
  std::string includeDir, libDir;
  /// nvcc for cuda stages (empty: hypipe was built without CUDA, so there
  /// is no libhypipe_kernels_cuda to link them against).
  std::string nvcc;
};

/// The defaults this build was configured with.
ArtifactOptions defaultArtifactOptions();

/// Runs the lowering pipeline on `module` (built from `spec`), then writes
/// and compiles the artifact into `dir`.
llvm::Error writeArtifact(mlir::ModuleOp module, const ModelSpec &spec,
                          const std::string &dir,
                          const ArtifactOptions &options);

/// The pass pipeline from a built model to planned, scheduled stages; the
/// programs come from `scheduleCsv` when it names a file.
mlir::LogicalResult lowerForArtifact(mlir::ModuleOp module,
                                     const std::string &scheduleCsv = "");

} // namespace hypipe

#endif
