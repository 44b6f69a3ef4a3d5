//===- PipeOps.h - ops of the pipe dialect --------------------------------===//
#ifndef HYPIPE_DIALECTS_PIPE_PIPEOPS_H
#define HYPIPE_DIALECTS_PIPE_PIPEOPS_H

#include "core/model/LayerShapes.h"
#include "core/model/TensorParallel.h"
#include "dialects/pipe/PipeDialect.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/pipe/PipeEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/pipe/PipeAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/pipe/PipeTypes.h.inc"

#define GET_OP_CLASSES
#include "dialects/pipe/PipeOps.h.inc"

namespace hypipe::pipe {

/// On a hybrid.model: the target its stages are planned for,
/// `#pipe<target cpu>` or `#pipe<target cuda>`.
inline constexpr const char *kTargetAttr = "pipe.target";
/// On a hybrid.model: the precision it trains in (f32 or bf16, a type).
inline constexpr const char *kPrecisionAttr = "pipe.precision";

/// A kernel layer's shape as its `shape` dictionary, and back: one entry
/// per field (rt::forEachField), integers and flags as i64 and bool,
/// coefficients as f64, the activation by name.
mlir::DictionaryAttr shapeAttr(mlir::MLIRContext *context,
                               const rt::LayerShape &shape);
/// Fails with a message (without the op) when `dict` is not a `kind`
/// shape: a missing, extra or mistyped field.
mlir::FailureOr<rt::LayerShape>
readShape(KernelKind kind, mlir::DictionaryAttr dict, std::string &error);

/// The model's `pipe.target` around `op` (cpu when it has none).
rt::Target targetOf(mlir::Operation *op);

/// The modules a selective `pipe.kernel_layer` names (absent: none); a
/// failure (with `error`) for an unknown or repeated name.
mlir::FailureOr<RecomputeModuleSet> moduleSetOf(mlir::ArrayAttr modules,
                                                std::string &error);
/// `modules` as the names pipe.kernel_layer's `recompute` lists, in
/// RecomputeModule's order.
mlir::ArrayAttr modulesAttr(mlir::MLIRContext *context,
                            RecomputeModuleSet modules);
/// `collectives` as a kernel call lists them (`all_reduce:8`, ...; null
/// for none).
mlir::ArrayAttr collectivesAttr(mlir::MLIRContext *context,
                                const std::vector<rt::Collective> &collectives);
/// The collectives a call of `layer` in `pass` runs over its program's
/// tensor-parallel group (a recompute: its forward's when the layer is
/// recomputed whole, none when selective): what pipe-lower-kernels and
/// pipe-recompute write and kernel_call_c2 and kernel_recompute_c2 check.
std::vector<rt::Collective> collectivesOfCall(KernelLayerOp layer,
                                              KernelPass pass, bool recompute);
/// The program's tensor-parallel size (1 without tensor_parallel).
int64_t tensorParallelOf(KernelProgramOp program);
/// The bytes of one activation the program's rank keeps (a full recompute
/// checkpoint's): with sequence parallelism its shard's rows
/// (rt::rankActivationFloats). What pipe-recompute places and
/// kernel_program_c6 checks.
int64_t keptActivationBytes(KernelProgramOp program);

inline TargetAttr targetAttr(mlir::MLIRContext *context, rt::Target target) {
  return TargetAttr::get(context, Target(int(target)));
}

inline rt::LayerKind layerKind(KernelKind kind) {
  return rt::LayerKind(int(kind));
}
inline KernelKind kernelKind(rt::LayerKind kind) {
  return KernelKind(int(kind));
}

} // namespace hypipe::pipe

#endif
