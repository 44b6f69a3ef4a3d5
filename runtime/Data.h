//===- Data.h - training data: text as bytes
//-------------------------------===//
//
// A text file read as bytes (vocabulary 256). Sample i of the run is the
// window at a pseudo-random offset that depends only on (seed, i), so a
// resumed run sees exactly the data an uninterrupted one would.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_DATA_H
#define HYPIPE_RUNTIME_DATA_H

#include <cstdint>
#include <string>
#include <vector>

namespace hypipe::rt {

class TextDataset {
public:
  /// Throws RuntimeError when the file is missing or shorter than seq + 1.
  TextDataset(const std::string &path, int64_t seqLength, int64_t vocab);

  /// Writes tokens [0, seq) and labels [1, seq] of sample `index`.
  void sample(uint64_t seed, int64_t index, int32_t *tokens,
              int32_t *labels) const;

  const std::vector<uint8_t> &bytes() const { return data; }
  /// Entropy (nats) of the byte unigram distribution of the file.
  double unigramEntropy() const;

private:
  std::vector<uint8_t> data;
  int64_t seq;
};

} // namespace hypipe::rt

#endif
