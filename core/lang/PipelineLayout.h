//===- PipelineLayout.h - Megatron's pipeline layout language -------------===//
//
// `--pipeline-model-parallel-layout` strings: `E` embedding, `t` decoder layer,
// `m` MTP layer, `L` loss; `|` separates stages (stage `i` runs on
// `pp_rank = i % pp`, `vp_stage = i / pp`); `x*n` repeats one character,
// `(group)*n` repeats a group (no nesting); commas are cosmetic. Semantics
// follow Megatron-LM's `pipeline_parallel_layer_layout.py`.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_PIPELINELAYOUT_H
#define HYPIPE_CORE_PIPELINELAYOUT_H

#include "core/Error.h"

#include <string_view>

#include <optional>
#include <string>
#include <vector>

namespace hypipe {

/// Longest expansion accepted; Megatron has no bound, we refuse to allocate
/// without one.
inline constexpr size_t kMaxLayoutLength = 1 << 20;

struct LayoutStage {
  int64_t index = 0;
  int64_t ppRank = 0;
  int64_t vpStage = 0;
  std::string layers;                   ///< Expanded letters (`E t m L`).
  std::vector<int64_t> decoderLayerIds; ///< 0-based, as Megatron numbers them.
  std::vector<int64_t> mtpLayerIds;
};

struct PipelineLayout {
  std::string text;     ///< As given.
  std::string expanded; ///< Repetitions unrolled, commas dropped, `|` kept.
  /// For each character of `expanded`, its offset in `text`.
  std::vector<size_t> sourceOffsets;
  int64_t pp = 1;
  int64_t vpp = 1;
  std::vector<LayoutStage> stages; ///< By stage index.

  int64_t count(char letter) const;
};

/// Expands and parses `text` for `pp` ranks: every letter known and the
/// number of stages a multiple of `pp`. Errors are `SourceError`s into `text`.
Expected<PipelineLayout> parsePipelineLayout(std::string_view text, int64_t pp);

struct LayoutValidation {
  /// MTP layers sit on a rank other than the last (Megatron's
  /// `mtp_standalone`).
  bool mtpStandalone = false;
};

/// Megatron's `validate_layer_layout`: embedding first and once, loss last and
/// once, `numLayers` decoder layers, `mtpNumLayers` MTP layers (none when
/// unset), all MTP layers after every decoder layer, in one stage, on the last
/// virtual stage of a rank that is not the first.
Expected<LayoutValidation>
validatePipelineLayout(const PipelineLayout &layout, int64_t numLayers,
                       std::optional<int64_t> mtpNumLayers);

struct HybridPattern;
struct PatternPlacement;

/// Places the main layers of a pattern without `|` with a validated layout:
/// the k-th `t` is the k-th layer. hypipe runs MTP with the loss, so `m`
/// layers anywhere but the last stage (Megatron's standalone MTP) are a
/// `SourceError` into the layout text.
Expected<PatternPlacement> placementFromLayout(const HybridPattern &pattern,
                                               const PipelineLayout &layout);

} // namespace hypipe

#endif
