//===- Interop.h - checkpoints to and from Hugging Face and Megatron-LM ---===//
//
// `hypipe ckpt export --format hf` writes a hypipe checkpoint as a Hugging
// Face model (config.json, sharded safetensors and
// model.safetensors.index.json): NemotronH, the format transformers, vLLM
// and SGLang serve Megatron's hybrids in, or for models of G or + layers
// Qwen3-Next or DeepSeek-V3 (HfArchitectures.h); `hypipe ckpt import` reads
// one back, or a Megatron-LM state dict saved as safetensors, into a hypipe
// checkpoint file that `training.init_from` starts a run from. NemotronH's
// names follow Megatron-Bridge's mapping (docs/interop.md).
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_FORMATS_INTEROP_H
#define HYPIPE_RUNTIME_FORMATS_INTEROP_H

#include "runtime/formats/Artifact.h"

#include <cstdint>
#include <string>

namespace hypipe::rt {

struct ExportResult {
  std::string architecture; ///< "NemotronH", "Qwen3-Next", "DeepSeek-V3"
  int64_t tensors = 0, files = 0, bytes = 0;
};

/// Writes checkpoint `checkpoint` (a --save directory, a step directory or
/// a merged file) of model `model` to `outDir` as a Hugging Face checkpoint
/// (Qwen3-Next when the model has G layers, DeepSeek-V3 when it has +
/// layers, else NemotronH) with `dtype` tensors (float32, or bfloat16
/// rounded to the nearest, ties to even) in shards of at most
/// `maxShardBytes` (a tensor larger than that gets a shard of its own).
/// Throws RuntimeError, before writing anything, when the model has what
/// the architecture cannot express, saying what and why.
ExportResult exportHuggingFace(const std::string &checkpoint,
                               const ModelInfo &model,
                               const std::string &outDir, int64_t maxShardBytes,
                               DType dtype = DType::F32);

/// The model a checkpoint was trained as: from its metadata
/// (`model_config`), or else from `artifactDir`'s manifest when given.
/// Throws RuntimeError saying what to pass when neither has it.
ModelInfo checkpointModel(const std::string &checkpoint,
                          const std::string &artifactDir);

struct ImportResult {
  /// "hf-nemotron-h", "hf-qwen3-next", "hf-deepseek-v3" or "megatron"
  std::string kind;
  int64_t tensors = 0;
};

/// Reads `input` — a Hugging Face NemotronH, Qwen3-Next or DeepSeek-V3
/// directory (config.json and its safetensors) or a safetensors file of a
/// Megatron-LM state dict (hypipe's names, or its earlier ones) — and writes a
/// hypipe checkpoint file of its parameters in float32 at step 0 to `outFile`.
/// Throws RuntimeError.
ImportResult importCheckpoint(const std::string &input,
                              const std::string &outFile);

} // namespace hypipe::rt

#endif
