//===- StageProgram.h - a stage's kernel program, translated --------------===//
//
// The artifact's view of a stage: its `pipe.kernel_program`
// (`pipe-lower-kernels`, dialects/pipe/PipeOps.td) translated op by op into
// the manifest's stage entry -- the kernel program hypipe-run executes
// (runtime/formats/StageProgram.h) and the parameters' Megatron names,
// shapes, initialisation and places, which follow from each layer's shape.
// A translation reads the IR only; it never plans. The same for every
// target; no code is generated.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_TARGETS_STAGEPROGRAM_H
#define HYPIPE_TARGETS_STAGEPROGRAM_H

#include "dialects/pipe/PipeOps.h"
#include "runtime/formats/Artifact.h"

#include "mlir/Support/LogicalResult.h"

namespace hypipe {

/// The manifest entry of `stage` from its kernel program; an error at the
/// stage when it has none (pipe-lower-kernels has not run).
mlir::FailureOr<rt::StageEntry> translateStage(pipe::StageOp stage,
                                               rt::Target target);

} // namespace hypipe

#endif
