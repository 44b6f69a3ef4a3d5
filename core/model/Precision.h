//===- Precision.h - the precision a model trains in ----------------------===//
//
// `training.dtype` of the spec, `--dtype` of the CLI and the manifest's
// `precision`: parsed once where it is read, carried as the enum by the
// compiler and the runtime. LLVM-free.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_MODEL_PRECISION_H
#define HYPIPE_CORE_MODEL_PRECISION_H

#include <optional>
#include <string_view>

namespace hypipe {

/// fp32: weights, activations and transfers in fp32. bf16: bf16 weights,
/// activations and transfers over an fp32 master copy (docs/precision.md).
enum class TrainingPrecision { Fp32, Bf16 };

/// `fp32`, `bf16`: the spelling of the spec, the CLI and the manifest.
inline const char *precisionName(TrainingPrecision p) {
  return p == TrainingPrecision::Bf16 ? "bf16" : "fp32";
}

/// The inverse of precisionName; nullopt for anything else.
inline std::optional<TrainingPrecision> parsePrecision(std::string_view name) {
  for (TrainingPrecision p : {TrainingPrecision::Fp32, TrainingPrecision::Bf16})
    if (name == precisionName(p))
      return p;
  return std::nullopt;
}

} // namespace hypipe

#endif
