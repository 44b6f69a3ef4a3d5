//===- Passes.h - hypipe's passes and the functions they drive ------------===//
#ifndef HYPIPE_PASSES_PASSES_H
#define HYPIPE_PASSES_PASSES_H

#include "core/model/Recompute.h"
#include "core/partition/AutoPartition.h"
#include "dialects/hybrid/HybridOps.h"
#include "dialects/pipe/PipeOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace hypipe {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// The passes from a placed `hybrid.model` to planned, scheduled stages:
/// what `hypipe compile` runs before the translation to a target
/// (`--hypipe-artifact-pipeline` in hypipe-opt). `scheduleCsv`: the programs
/// come from this PyTorch pipelining CSV instead of the generator;
/// `recompute`: the kernel programs recompute activations so.
void buildArtifactPassPipeline(mlir::OpPassManager &pm,
                               const std::string &scheduleCsv = "",
                               const RecomputeSpec &recompute = {});
/// Registers the pipelines above with the pass registry.
void registerHypipePassPipelines();

/// Sets `#hybrid.placement` on every main layer of `model` from `placement`
/// (stage by stage, in order).
mlir::LogicalResult applyPlacement(hybrid::ModelOp model,
                                   const PatternPlacement &placement);

/// The work of each pass on one model; errors are emitted on the model.
mlir::LogicalResult assignStages(hybrid::ModelOp model, llvm::StringRef layout);
mlir::LogicalResult autoPartitionModel(hybrid::ModelOp model,
                                       PartitionObjective objective,
                                       std::optional<double> maxMemoryGiB,
                                       bool bf16);
mlir::LogicalResult outlineStages(hybrid::ModelOp model);
mlir::LogicalResult insertP2P(hybrid::ModelOp model);
mlir::LogicalResult buildSchedulePrograms(hybrid::ModelOp model,
                                          llvm::StringRef importCsv = "");
mlir::LogicalResult insertComms(hybrid::ModelOp model);
mlir::LogicalResult lowerKernels(hybrid::ModelOp model);
mlir::LogicalResult recomputeActivations(hybrid::ModelOp model,
                                         const RecomputeSpec &spec);
mlir::LogicalResult verifySchedule(hybrid::ModelOp model,
                                   llvm::StringRef costs);

} // namespace hypipe

#endif
