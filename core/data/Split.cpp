//===- Split.cpp - train, validation and test splits, as Megatron-LM's ----===//

#include "core/data/Split.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <vector>

namespace hypipe {

std::string_view splitPartName(SplitPart part) {
  switch (part) {
  case SplitPart::Train:
    return "train";
  case SplitPart::Validation:
    return "validation";
  case SplitPart::Test:
    return "test";
  }
  return "?";
}

std::pair<int64_t, int64_t> DataSplit::documentRange(SplitPart part,
                                                     int64_t documents) const {
  // megatron-core's convert_split_vector_to_split_matrix adds the weights
  // up from 0 in order (so the last bookend may miss 1 by an ulp), and
  // its builder rounds each bookend times the count with Python's round:
  // half to even, which nearbyint is in the default rounding mode.
  double bookend = 0;
  std::array<double, kSplitParts + 1> bookends{0};
  for (int i = 0; i < kSplitParts; ++i)
    bookends[size_t(i + 1)] = bookend += weights[size_t(i)];
  const auto at = [&](size_t i) {
    return int64_t(std::nearbyint(bookends[i] * double(documents)));
  };
  if (!hasPart(part))
    return {0, 0};
  return {at(size_t(part)), at(size_t(part) + 1)};
}

Expected<DataSplit> parseSplit(std::string_view text) {
  const std::string help =
      "give up to three non-negative weights of the train, validation and "
      "test parts, e.g. 969,30,1 (Megatron-LM's --split)";
  std::vector<double> weights;
  size_t start = 0;
  while (true) {
    const size_t comma = std::min(text.find(',', start), text.size());
    size_t first = start, last = comma;
    while (first < last && text[first] == ' ')
      ++first;
    while (last > first && text[last - 1] == ' ')
      --last;
    const std::string_view item = text.substr(first, last - first);
    if (weights.size() == size_t(kSplitParts))
      return sourceError(
          start, fmt::format("--split has more than {} weights", kSplitParts),
          help, text.size() - start);
    if (item.empty())
      return sourceError(first, "--split has an empty weight", help);
    double value = 0;
    const auto [end, ec] =
        std::from_chars(item.data(), item.data() + item.size(), value);
    if (ec != std::errc() || end != item.data() + item.size() ||
        !std::isfinite(value))
      return sourceError(first, fmt::format("'{}' is not a number", item), help,
                         item.size());
    if (value < 0)
      return sourceError(first, fmt::format("the weight {} is negative", item),
                         help, item.size());
    weights.push_back(value);
    if (comma == text.size())
      break;
    start = comma + 1;
  }
  weights.resize(size_t(kSplitParts), 0.0); // as Megatron pads them
  double sum = 0;
  for (double w : weights)
    sum += w;
  if (!(sum > 0))
    return sourceError(0, "--split's weights are all 0: no part holds data",
                       help, std::max<size_t>(1, text.size()));
  // Megatron-LM divides each weight by their sum: a sum past a double's
  // range would make every part 0.
  if (!std::isfinite(sum))
    return sourceError(0,
                       "--split's weights add up to more than a double "
                       "holds: every part would be 0",
                       help, std::max<size_t>(1, text.size()));
  DataSplit split;
  split.text = std::string(text);
  for (int i = 0; i < kSplitParts; ++i)
    split.weights[size_t(i)] = weights[size_t(i)] / sum;
  return split;
}

} // namespace hypipe
