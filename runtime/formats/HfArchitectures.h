//===- HfArchitectures.h - hypipe models as Hugging Face architectures ----===//
//
// What `hypipe ckpt export --format hf` and `hypipe ckpt import` need of
// each Hugging Face architecture besides NemotronH (Interop.cpp): when a
// model maps to it, its config.json both ways, and one table of its tensors
// in hypipe's (Megatron-LM's) names and its own, which both directions read.
// Qwen3-Next (Qwen3NextForCausalLM) takes models of Gated DeltaNet and MLP
// layers (`G-G-...`), DeepSeek-V3 (DeepseekV3ForCausalLM) models of
// multi-latent attention and MLP layers (`+-+-...`); docs/interop.md.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_FORMATS_HFARCHITECTURES_H
#define HYPIPE_RUNTIME_FORMATS_HFARCHITECTURES_H

#include "runtime/formats/Artifact.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace hypipe::rt::hf {

/// Rows of one hypipe tensor that make one Hugging Face tensor: `rows` in
/// that order (every row, in order, when empty), each element plus `offset`
/// (-1 for a zero-centred norm, whose weight w stands for 1 + w).
struct Piece {
  std::string name;
  std::vector<int64_t> rows;
  float offset = 0;
};

/// A hypipe tensor and the Hugging Face tensors its rows become.
struct TensorMap {
  std::string ours;
  std::vector<Piece> pieces;
};

/// One Hugging Face architecture a hypipe model can be exported as.
struct Architecture {
  /// "Qwen3-Next"; Qwen3NextForCausalLM, qwen3_next.
  const char *displayName, *className, *modelType;
  /// What a model must be to export as it (the refusal's help).
  const char *exportable;
  /// The embedding's name (a tied model's head is written as a copy of it).
  const char *embedding;
  /// Why a model of `layers` (the pattern, stage boundaries dropped) cannot
  /// be this architecture, or "".
  std::string (*inexpressible)(const ModelInfo &m, const std::string &layers);
  nlohmann::json (*config)(const ModelInfo &m, const std::string &layers);
  std::vector<TensorMap> (*tensors)(const ModelInfo &m,
                                    const std::string &layers);
  /// config.json (at `path`) as the model hypipe trains; throws
  /// RuntimeError naming the field for what hypipe does not compute.
  ModelInfo (*model)(const nlohmann::json &config, const std::string &path);
};

extern const Architecture kQwen3Next, kDeepseekV3;

/// config.json's integer `key`; throws RuntimeError naming it when absent
/// or of another type.
int64_t configInt(const nlohmann::json &c, const char *key,
                  const std::string &path);

[[noreturn]] void throwWrongType(const std::string &path, const char *key,
                                 const std::string &value, const char *type);

/// config.json's `key` of the JSON type of `fallback`, which it is when
/// absent; another type is an error naming the key (not a json exception).
template <typename T>
T configOr(const nlohmann::json &c, const char *key, T fallback,
           const std::string &path) {
  auto it = c.find(key);
  if (it == c.end())
    return fallback;
  if (it->type() != nlohmann::json(fallback).type())
    throwWrongType(path, key, it->dump(), nlohmann::json(fallback).type_name());
  return it->template get<T>();
}

} // namespace hypipe::rt::hf

#endif
