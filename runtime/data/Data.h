//===- Data.h - training data: text bytes or Megatron's indexed dataset ---===//
//
// A dataset is one stream of tokens. Sample `i` of a run with seed `s` is the
// window of seq + 1 tokens at offset splitmix64(splitmix64(s) ^ i) modulo
// (tokens - seq): tokens are its first seq, labels its last seq. The order
// therefore depends on the seed and the sample index only, never on the
// layout (docs/data.md).
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_DATA_DATA_H
#define HYPIPE_RUNTIME_DATA_DATA_H

#include "core/data/DataFormat.h"
#include "core/data/Split.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hypipe::rt {

class Dataset {
public:
  virtual ~Dataset() = default;

  /// Writes tokens [0, seq) and labels [1, seq] of sample `index`.
  void sample(uint64_t seed, int64_t index, int32_t *tokens,
              int32_t *labels) const;
  int64_t numTokens() const { return count; }
  /// Entropy (nats) of the token unigram distribution of the stream (of
  /// the part kept, after keepPart): what a model that ignores context can
  /// reach at best.
  double unigramEntropy() const { return entropy; }

  /// Keeps part `part` of `split` (docs/data.md): samples then come from
  /// its tokens alone. Indexed data splits over its sequences as
  /// megatron-core's GPT dataset does; other streams have no documents.
  /// Throws RuntimeError naming `path` when the stream cannot split or the
  /// part holds less than one sample.
  virtual void keepPart(const DataSplit &split, SplitPart part,
                        const std::string &path);

protected:
  Dataset(int64_t seqLength) : seq(seqLength) {}
  virtual int64_t at(int64_t position) const = 0;
  /// Checks the size and every token against `vocab`, computes the entropy.
  void validate(const std::string &path, int64_t vocab);
  /// Narrows the stream to tokens [first, first + tokens) and computes
  /// their entropy.
  void keepTokens(int64_t first, int64_t tokens);

  int64_t seq, count = 0;
  int64_t firstToken = 0; ///< of the part kept
  int64_t vocabSize = 0;
  double entropy = 0;
};

/// A file's bytes are its tokens (vocab_size >= 256).
class TextDataset : public Dataset {
public:
  /// Throws RuntimeError when the file is missing or shorter than seq + 1.
  TextDataset(const std::string &path, int64_t seqLength, int64_t vocab);

private:
  int64_t at(int64_t position) const override {
    return static_cast<uint8_t>(bytes[size_t(position)]);
  }
  std::string bytes; ///< the file as read (up to files::kTrainingData)
};

/// Megatron-LM's indexed dataset: PREFIX.idx (header "MMIDIDX\0\0", version
/// 1, dtype code, sequence and document counts, sequence lengths and byte
/// pointers, document boundaries) and PREFIX.bin (the tokens), mapped
/// read-only. The sequences, in order, form the stream.
class IndexedDataset : public Dataset {
public:
  /// `prefix` may also name the .bin or the .idx file. Throws RuntimeError
  /// naming the file and what is wrong (header, version, dtype, counts,
  /// sizes, a token outside the vocabulary).
  IndexedDataset(const std::string &prefix, int64_t seqLength, int64_t vocab);
  ~IndexedDataset() override;

  int64_t numSequences() const { return int64_t(lengths.size()); }
  int64_t numDocuments() const { return int64_t(documents.size()) - 1; }
  /// Document d's tokens: positions [first, first + count) of the stream.
  int64_t documentStart(int64_t d) const { return starts[documents[d]]; }
  int64_t documentTokens(int64_t d) const {
    return starts[documents[d + 1]] - starts[documents[d]];
  }
  int64_t token(int64_t position) const { return at(position); }

  void keepPart(const DataSplit &split, SplitPart part,
                const std::string &path) override;

private:
  int64_t at(int64_t position) const override;
  const uint8_t *bin = nullptr;
  size_t binBytes = 0;
  int itemSize = 0, dtypeCode = 0;
  std::vector<int32_t> lengths;
  std::vector<int64_t> pointers, documents, starts; ///< starts: token offsets
};

/// Opens `path` as `format` (text or indexed).
std::unique_ptr<Dataset> openDataset(const std::string &path, DataFormat format,
                                     int64_t seqLength, int64_t vocab);

} // namespace hypipe::rt

#endif
