//===- Split.h - train, validation and test splits, as Megatron-LM's ------===//
//
// `--split 969,30,1` (Megatron-LM's flag, `data.split` in the spec): weights
// of the train, validation and test parts, normalised to sum to 1, cut a
// data set's documents into three contiguous ranges the way megatron-core's
// BlendedMegatronDatasetBuilder does (docs/data.md). Parsed once where it is
// read; the compiler checks it against the spec and the runtime cuts the
// data with it. LLVM-free.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_DATA_SPLIT_H
#define HYPIPE_CORE_DATA_SPLIT_H

#include "core/Error.h"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace hypipe {

/// Megatron's Split enum: the parts, in the order the weights name them.
enum class SplitPart { Train = 0, Validation = 1, Test = 2 };
inline constexpr int kSplitParts = 3;

/// "train", "validation", "test".
std::string_view splitPartName(SplitPart part);

/// A `--split` as given, normalised: weights that sum to 1.
struct DataSplit {
  std::array<double, kSplitParts> weights{};
  /// The text it was parsed from ("969,30,1"), for messages and the manifest.
  std::string text;

  /// Document range [first, last) of `part` among `documents` documents:
  /// megatron-core's `round(bookend * documents)` (Python's round, half to
  /// even) of the cumulative weights, so the parts are contiguous, cover
  /// every document, and a part of weight 0 is empty.
  std::pair<int64_t, int64_t> documentRange(SplitPart part,
                                            int64_t documents) const;
  bool hasPart(SplitPart part) const { return weights[size_t(part)] > 0; }
};

/// Parses one to three comma-separated non-negative numbers ("969,30,1";
/// missing weights are 0, as Megatron pads them) and normalises them.
/// Refused with an offset under the bad text and a help line: more than
/// three weights, an empty weight, one that is not a number, a negative or
/// non-finite one, weights that are all 0 (Megatron divides by their sum).
Expected<DataSplit> parseSplit(std::string_view text);

} // namespace hypipe

#endif
