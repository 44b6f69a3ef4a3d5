//===- KernelPlan.h - a pipe.stage's layers planned into its buffers ------===//
//
// The one description of a stage's layers for the kernels: in order, each
// with the static shape its kernel takes, its parameters (Megatron names,
// shapes, initialisation) and its place in bytes in the stage's parameter
// buffer and per-microbatch saved buffer. `pipe-lower-kernels` emits the
// plan as the stage's `pipe.kernel_program`; everything after it reads that
// op (targets/StageProgram.h), never this.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_TARGETS_CPU_KERNELPLAN_H
#define HYPIPE_TARGETS_CPU_KERNELPLAN_H

#include "core/model/LayerShapes.h"
#include "dialects/pipe/PipeOps.h"

#include "mlir/Support/LogicalResult.h"

#include <string>
#include <vector>

namespace hypipe::cpu {

/// What each layer lowers to (core/model/LayerShapes.h): the kernel
/// program's own kinds.
using KernelKind = rt::LayerKind;
using rt::layerKindName;

struct KernelLayer {
  KernelKind kind;
  mlir::Operation *op = nullptr;
  /// 1-based layer number in the pattern (0 for embedding and head).
  int64_t layer = 0;
  /// Parameter name prefix, e.g. `decoder.layers.3.` (Megatron numbers
  /// layers from 0).
  std::string prefix;
  rt::LayerShape shape;              ///< the alternative of `kind`, whole
  std::vector<rt::ParamSpec> params; ///< names without the prefix
  /// Bytes of the layer's parameters, its saved tensors of one microbatch
  /// and its scratch, and where the first two sit in the stage's buffers.
  int64_t paramBytes = 0, savedBytes = 0, workspaceBytes = 0;
  int64_t paramOffset = 0, savedOffset = 0;
  /// The full (Megatron) name of one of `params` (rt::parameterName).
  std::string parameterName(const rt::ParamSpec &p) const {
    return rt::parameterName(prefix, p);
  }
};

struct StagePlan {
  int64_t index = 0, ppRank = 0, vpStage = 0;
  /// The model's `pipe.target` (default cpu): attention's saved tensors and
  /// some workspaces differ between the targets' kernels.
  rt::Target target = rt::Target::Cpu;
  /// The model's `pipe.precision` (default f32): what the kernels keep
  /// activations in.
  mlir::Type activations;
  rt::TokenShape tokens;
  int64_t hidden = 0, numLayers = 0;
  /// The model's tensor-parallel size and sequence parallelism: each
  /// layer's buffers are then its shard's (core/model/TensorParallel.h).
  int64_t tensorParallel = 1;
  bool sequenceParallel = false;
  bool hasEmbedding = false, hasHead = false;
  std::vector<KernelLayer> layers;
  /// Buffer sizes in bytes: parameters, the saved tensors of one
  /// microbatch, and the workspace (two activations the stage ping-pongs
  /// between layers, then the largest scratch a layer needs).
  int64_t paramBytes = 0, savedBytes = 0, workspaceBytes = 0;
  /// Bytes of one [tokens, hidden] activation.
  int64_t activationBytes() const;
};

/// Plans `stage` (what pipe-lower-kernels lowers): its layers' kernels,
/// shapes and parameters, read off its ops, and their places in its
/// buffers. Fails (with an error at the op) on layers the targets cannot
/// lower yet: G, D, + and MTP outside the stage with the output layer.
mlir::FailureOr<StagePlan> planStage(pipe::StageOp stage);

} // namespace hypipe::cpu

#endif
