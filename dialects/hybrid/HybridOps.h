//===- HybridOps.h - ops and attributes of the hybrid dialect -------------===//
#ifndef HYPIPE_DIALECTS_HYBRID_HYBRIDOPS_H
#define HYPIPE_DIALECTS_HYBRID_HYBRIDOPS_H

#include "core/model/ModelDims.h"
#include "dialects/hybrid/HybridDialect.h"
#include "dialects/hybrid/HybridEnums.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_ATTRDEF_CLASSES
#include "dialects/hybrid/HybridAttrs.h.inc"

#define GET_OP_CLASSES
#include "dialects/hybrid/HybridOps.h.inc"

namespace hypipe::hybrid {

/// The plain-C++ view of a dims attribute, for the checks shared with the
/// spec loader.
ModelDims toModelDims(DimsAttr attr);
DimsAttr toDimsAttr(mlir::MLIRContext *ctx, const ModelDims &dims);

/// Pattern symbol of a layer op (`M`, `*`, ...), or 0 if `op` is no layer.
char layerSymbol(mlir::Operation *op);

} // namespace hypipe::hybrid

namespace hypipe {

/// Discardable attributes of `hybrid.model` read by the kernel lowering:
/// `position_embedding` ("none" when absent) and the MoE load-balancing
/// loss coefficient (0 when absent).
inline constexpr const char *kPositionEmbeddingAttr =
    "hybrid.position_embedding";
inline constexpr const char *kMoeAuxLossCoeffAttr = "hybrid.moe_aux_loss_coeff";
/// The MoE layers' capacity factor (moe_expert_capacity_factor; absent:
/// dropless) and, with it, the drop policy ("probs" or "position").
inline constexpr const char *kMoeCapacityFactorAttr =
    "hybrid.moe_expert_capacity_factor";
inline constexpr const char *kMoeDropPolicyAttr =
    "hybrid.moe_token_drop_policy";
/// The MoE layers' token dispatcher (moe_token_dispatcher_type), when it
/// is not Megatron-LM's default allgather: "alltoall".
inline constexpr const char *kMoeDispatcherAttr =
    "hybrid.moe_token_dispatcher_type";
/// The linear cross-entropy fusion (cross_entropy_fusion_impl: linear),
/// present only then: the rows of a chunk (cross_entropy_chunk_tokens), or
/// 0 for the lowering's choice (rt::lossChunkRows).
inline constexpr const char *kCrossEntropyChunkAttr =
    "hybrid.cross_entropy_chunk_tokens";
/// The MTP depths' loss weight (mtp_loss_scaling_factor), on models with MTP.
inline constexpr const char *kMtpLossScaleAttr =
    "hybrid.mtp_loss_scaling_factor";
/// Multi-latent attention's rotary embedding, on models with '+' layers: a
/// dictionary of rope_type ("yarn" or "rope"), rotary_scaling_factor,
/// mscale and mscale_all_dim (Megatron's defaults yarn, 1, 1, 0 when
/// absent).
inline constexpr const char *kMlaRopeAttr = "hybrid.mla_rope";
/// DeepSeek sparse attention's loss settings, on models with 'D' layers: a
/// dictionary of loss_coeff (--dsa-indexer-loss-coeff) and use_sparse_loss
/// (--dsa-indexer-use-sparse-loss).
inline constexpr const char *kDsaIndexerAttr = "hybrid.dsa_indexer";

} // namespace hypipe

#endif
