//===- Samples.h - variable-length training samples for sequence packing --===//
//
// Where a packed run's samples come from (docs/data.md): JSON Lines files
// (`{"tokens": [...]}` or `{"text": "..."}`, optional "loss_mask"),
// Megatron's indexed dataset (each document a sample) and the mock SFT
// dataset configured as Megatron-LM's (lognormal lengths, or lengths from a
// file). A sample of n + 1 tokens gives n training positions: inputs are its
// first n tokens, labels its last n; its length is n.
//
// Every rank opens the same source and packs the same global batch itself
// (the packing is deterministic), so the pipeline's first and last stages
// agree on tokens and labels without sending them.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_DATA_SAMPLES_H
#define HYPIPE_RUNTIME_DATA_SAMPLES_H

#include "core/data/DataFormat.h"
#include "core/data/Split.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hypipe::rt {

class SampleSource {
public:
  virtual ~SampleSource() = default;

  /// Training positions of sample `index` (after any truncation).
  virtual int64_t length(int64_t index) const = 0;
  /// The sum of sample `index`'s loss mask: the labels its loss averages.
  virtual double lossTokens(int64_t index) const {
    return double(length(index));
  }
  /// Writes length(index) inputs, labels and loss-mask values (1 or 0).
  virtual void read(int64_t index, int32_t *tokens, int32_t *labels,
                    float *lossMask) const = 0;

  /// The sample at position `position` of the run: finite sources go
  /// through their samples in a new seeded order every epoch; the mock
  /// source's samples are the positions themselves.
  int64_t sampleAt(uint64_t seed, int64_t position) const;

  /// Keeps part `part` of `split` (docs/data.md): its samples (documents)
  /// [first, last) as megatron-core's builder cuts them, all that sampleAt
  /// then draws from. Throws RuntimeError naming `path` when the part is
  /// empty or the source is unbounded (mock).
  void keepPart(const DataSplit &split, SplitPart part,
                const std::string &path);

  /// One line for the start of a run: what the samples are.
  const std::string &description() const { return about; }
  /// Samples cut to the token budget (data.truncate).
  int64_t truncatedSamples() const { return truncated; }

protected:
  /// Samples in one epoch; 0 for an unbounded (mock) source.
  int64_t count = 0;
  int64_t firstSample = 0; ///< of the part kept
  int64_t truncated = 0;
  std::string about;

private:
  mutable int64_t cachedEpoch = -1;
  mutable std::vector<int64_t> order;
};

struct SampleOptions {
  DataFormat format = DataFormat::Jsonl; ///< jsonl, indexed or mock
  std::string path;                      ///< jsonl file or indexed prefix
  std::string mockConfig; ///< the mock dataset's JSON (format mock)
  std::string specDir;    ///< resolves a relative lengths file of `mock`
  int64_t vocab = 0;
  int64_t budget = 0; ///< tokens per microbatch: the longest sample allowed
  bool truncate = false;
  uint64_t seed = 0;
};

/// Opens and checks every sample. Throws RuntimeError naming the file, the
/// line and column and what to do: a line that is not a JSON object, no
/// "tokens" or "text", a token outside the vocabulary, an empty sample, a
/// sample longer than the budget (unless truncating), a lengths file with
/// something other than positive integers.
std::unique_ptr<SampleSource> openSamples(const SampleOptions &options);

} // namespace hypipe::rt

#endif
