//===- Data.cpp - training data: text as bytes
//-----------------------------===//

#include "runtime/Data.h"

#include "runtime/Artifact.h"
#include "runtime/Init.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <iterator>

namespace hypipe::rt {

TextDataset::TextDataset(const std::string &path, int64_t seqLength,
                         int64_t vocab)
    : seq(seqLength) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw RuntimeError(fmt::format(
        "error: cannot read training data '{}'\nhelp: set data.path in the "
        "spec (relative to the spec file) or pass --data FILE",
        path));
  data.assign(std::istreambuf_iterator<char>(in),
              std::istreambuf_iterator<char>());
  if (int64_t(data.size()) < seqLength + 1)
    throw RuntimeError(fmt::format(
        "error: training data '{}' has {} bytes, fewer than one sample "
        "(seq_length {} + 1)\nhelp: use a longer text or a shorter "
        "training.seq_length",
        path, data.size(), seqLength));
  if (vocab < 256)
    throw RuntimeError(fmt::format(
        "error: byte-level text data needs vocab_size >= 256, the model has "
        "{}\nhelp: set model.vocab_size: 256",
        vocab));
}

void TextDataset::sample(uint64_t seed, int64_t index, int32_t *tokens,
                         int32_t *labels) const {
  uint64_t span = data.size() - uint64_t(seq);
  uint64_t offset = splitmix64(splitmix64(seed) ^ uint64_t(index)) % span;
  for (int64_t i = 0; i < seq; ++i) {
    tokens[i] = data[offset + i];
    labels[i] = data[offset + i + 1];
  }
}

double TextDataset::unigramEntropy() const {
  double counts[256] = {};
  for (uint8_t b : data)
    counts[b] += 1;
  double h = 0, n = double(data.size());
  for (double c : counts)
    if (c > 0)
      h -= c / n * std::log(c / n);
  return h;
}

} // namespace hypipe::rt
