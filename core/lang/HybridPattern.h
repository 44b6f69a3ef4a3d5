//===- HybridPattern.h - Megatron's hybrid layer pattern language ---------===//
//
// One character per layer: `M` Mamba-2, `*` attention, `-` MLP, `E` MoE,
// `G` gated delta net, `D` DeepSeek sparse attention, `+` multi-latent
// attention. `|` separates pipeline segments (segment `s` runs on
// `pp_rank = s % pp`, `vp_stage = s / pp`); `/` starts the multi-token
// prediction parts, which must all be identical. Semantics follow
// Megatron-LM's `hybrid_layer_allocation.py`; see docs/languages.md.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_HYBRIDPATTERN_H
#define HYPIPE_CORE_HYBRIDPATTERN_H

#include "core/Error.h"
#include "core/schedule/Vocabulary.h"

#include <string_view>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hypipe {

/// The layer symbols, in the order Megatron lists them in its counts.
inline constexpr std::string_view kLayerSymbols = "*DGM+-E";

/// Most layers a model may have (a bound on what a spec can make us
/// allocate, and 10x the deepest trained model's; SizeBounds.h).
inline constexpr int64_t kMaxLayers = 1 << 12;

/// Human name of a layer symbol ("Mamba-2", ...), or "" if not a symbol.
std::string_view layerSymbolName(char symbol);

struct HybridPattern {
  std::string text;     ///< As given.
  std::string main;     ///< Main part, with its `|` (may be empty).
  std::string mtp;      ///< One MTP depth's layers ("" without MTP).
  int mtpDepths = 0;    ///< Number of MTP parts; 0 without MTP.
  size_t mtpOffset = 0; ///< Offset of the first MTP part in `text`.
  /// Offset of the first '/' when every part after it is empty ("M*/",
  /// "M*//"): Megatron reads that as no MTP; a spec refuses it.
  std::optional<size_t> emptyMtpOffset;
  std::vector<std::string> segments;  ///< `main` split on `|` (>= 1).
  std::vector<size_t> segmentOffsets; ///< Offset of each segment in `text`.

  bool hasMtp() const { return mtpDepths > 0; }
  /// The main layers with `|` removed.
  std::string layers() const;
  int64_t numLayers() const;
  int64_t numSegments() const { return static_cast<int64_t>(segments.size()); }
  bool hasPipes() const { return segments.size() > 1; }
  /// Count per symbol over the main layers and every MTP depth.
  std::map<char, int64_t> layerCounts() const;
};

/// Parses and validates a pattern (symbols, MTP parts, no attention mixed
/// with MLA/DSA). Errors are `SourceError`s with offsets into `text`.
Expected<HybridPattern> parseHybridPattern(std::string_view text);

struct PatternStage {
  int64_t index = 0; ///< Segment index (vp-major: `vp_stage * pp + pp_rank`).
  int64_t ppRank = 0;
  int64_t vpStage = 0;
  std::string layers;
  int64_t layerOffset = 0;           ///< Layers in all earlier segments.
  std::vector<int64_t> layerNumbers; ///< 1-based global layer numbers.
};

struct PatternPlacement {
  int64_t pp = 1;
  int64_t vpp = 1;
  /// False where Megatron runs without virtual pipelining (`vp_stage` None).
  bool virtualStages = false;
  std::vector<PatternStage> stages;                 ///< By index.
  std::optional<std::pair<int64_t, int64_t>> mtpOn; ///< (pp_rank, vp_stage).

  /// The stage of (`ppRank`, `vpStage`); an error if there is none.
  Expected<const PatternStage &> stage(int64_t ppRank, int64_t vpStage) const;
};

struct PlacementOptions {
  int64_t pp = 1;
  std::optional<int64_t> vpp;
  std::optional<int64_t> firstStageLayers;
  std::optional<int64_t> lastStageLayers;
  /// Which rank and chunk run each segment: Megatron's loop (segment s on
  /// s % pp), or zbv's V. The languages alone mean the loop.
  schedule::Placement style = schedule::Placement::Loop;
};

/// Places every main layer on (pp_rank, vp_stage): from the `|` segments, or,
/// for a pattern without `|` and pp > 1, by Megatron's even split (or the
/// uneven one with first/last stage layer counts).
Expected<PatternPlacement> placeHybridPattern(const HybridPattern &pattern,
                                              const PlacementOptions &options);

/// The pattern with `|` at the placement's stage boundaries and the MTP parts
/// after `/`: what a user pins to keep this split, and what the IR records.
std::string patternWithStages(const HybridPattern &pattern,
                              const PatternPlacement &placement);

/// Megatron's (deprecated) allocation of a pattern from an attention ratio and
/// an MLP ratio: evenly spaced attention, then right-justified MLP layers.
/// Rounding is Python's round-half-to-even.
Expected<std::string> patternFromRatios(int64_t numLayers,
                                        double attentionRatio, double mlpRatio);

} // namespace hypipe

#endif
