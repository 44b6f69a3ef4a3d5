//===- ParameterNames.h - parameter names across versions and frameworks -===//
//
// hypipe names parameters as Megatron-LM's HybridModel.state_dict() does
// for the layer specs Megatron builds hybrid models with (docs/model.md has
// the table and the Megatron commit). Before 2026-11-23 the names differed in
// three places; the old names still key the initial values (a seed draws the
// weights it always drew) and still resume.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_MODEL_PARAMETERNAMES_H
#define HYPIPE_CORE_MODEL_PARAMETERNAMES_H

#include <string>

namespace hypipe {

/// The name `name` had before hypipe followed Megatron's hybrid specs:
///   decoder.layers.i.mixer.in_proj.layer_norm_weight ->
///   decoder.layers.i.norm.weight
///   ...mixer.conv1d_weight / conv1d_bias -> ...mixer.conv1d.weight / .bias
///   ...mlp.experts.linear_fcK.weightE ->
///   ...mlp.experts.local_experts.E.linear_fcK.weight
/// Any other name is returned as it is.
std::string legacyParameterName(const std::string &name);

} // namespace hypipe

#endif
