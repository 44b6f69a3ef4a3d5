//===- KernelPlan.h - a pipe.stage as kernel calls with a buffer plan -----===//
//
// The lowering of one `pipe.stage` for a target (one planner, one emitter
// per target): its layers in order,
// each with the static shape its kernel takes, its parameters (Megatron
// names, shapes, initialisation) and its place in the stage's parameter
// buffer and per-microbatch saved buffer. `pipe-plan-buffers` records the
// plan on the IR; the C++ translation and the artifact writer read it.
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
  rt::LayerShape shape;              ///< the alternative of `kind`
  std::vector<rt::ParamSpec> params; ///< names without the prefix
  int64_t paramFloats = 0, savedFloats = 0, workspaceFloats = 0;
  int64_t paramOffset = 0, savedOffset = 0;
  /// The attribute pipe-plan-buffers records this kernel's ranges in: an
  /// MTP depth's op carries its input's and its output's.
  const char *planAttr() const;
  /// The full (Megatron) name of one of `params`: the prefix and the name,
  /// except the embedding table, which keeps its model-level name in any
  /// stage that holds a copy (an MTP depth's).
  std::string parameterName(const rt::ParamSpec &p) const {
    return p.name.rfind("embedding.", 0) == 0 ? p.name : prefix + p.name;
  }
};

struct StagePlan {
  int64_t index = 0, ppRank = 0, vpStage = 0;
  /// The model's `pipe.target` (default cpu): attention's saved tensors and
  /// some workspaces differ between the targets' kernels.
  rt::Target target = rt::Target::Cpu;
  rt::TokenShape tokens;
  int64_t hidden = 0;
  bool hasEmbedding = false, hasHead = false;
  std::vector<KernelLayer> layers;
  int64_t paramFloats = 0, savedFloats = 0;
  /// Layer workspace (the largest any layer needs) plus two activation
  /// buffers the stage ping-pongs between layers.
  int64_t workspaceFloats = 0;
};

/// Plans `stage` (what pipe-plan-buffers runs). Fails (with an error at the
/// op) on layers the targets cannot lower yet: G, D, +, MTP on cuda, and
/// MTP outside the stage with the output layer.
mlir::FailureOr<StagePlan> planStage(pipe::StageOp stage);

/// The plan pipe-plan-buffers recorded on `stage` (`pipe.buffer_plan` and
/// each layer's `pipe.kernel`), with the layers' shapes and parameters: what
/// a translation reads. Never plans: a stage without the attributes, or
/// with attributes that do not fit its layers, is an error at the op.
mlir::FailureOr<StagePlan> readStagePlan(pipe::StageOp stage);

inline const char *KernelLayer::planAttr() const {
  return kind == KernelKind::MtpOutput ? pipe::kKernelMtpOutputAttr
                                       : pipe::kKernelAttr;
}

} // namespace hypipe::cpu

#endif
