//===- Packing.h - variable-length samples packed into microbatches -------===//
//
// Sequence packing (THD): the samples of a global batch are assigned to
// microbatches ("bins") of at most `budget` tokens each, and the bins to
// data-parallel ranks. A sample of n tokens costs `perToken * n +
// perSquaredToken * n^2` (the cost model's linear layers and scans, and
// attention's quadratic core); the `balanced` scheduler evens out that cost
// over the bins, `first-fit-decreasing` packs by tokens only. Both are
// deterministic: the same lengths give the same bins on every rank.
//
// The bin count is the smallest count k >= minBins, k a multiple of
// binMultiple (both default to dp x pp, NeMo-RL's min_bin_count and
// bin_count_multiple), into which the scheduler fits every sample, so every
// data-parallel rank gets k / dp microbatches and every pipeline stage work.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_DATA_PACKING_H
#define HYPIPE_CORE_DATA_PACKING_H

#include "core/Error.h"
#include "core/model/ModelDims.h"

#include <cstdint>
#include <string>
#include <vector>

namespace hypipe::packing {

enum class Scheduler {
  Balanced,           ///< least-cost bin with room, costliest sample first
  FirstFitDecreasing, ///< first bin with room, longest sample first
  Unpacked,           ///< one sample per bin: the reference packing
};

const char *schedulerName(Scheduler s);
/// Parses a scheduler name of docs/data.md.
Expected<Scheduler> parseScheduler(const std::string &name);
/// "balanced, first-fit-decreasing, unpacked".
std::string schedulerNames();

/// Work of one sample of n tokens: perToken * n + perSquaredToken * n^2.
struct SampleCost {
  double perToken = 1, perSquaredToken = 0;
  double of(int64_t n) const {
    return perToken * double(n) + perSquaredToken * double(n) * double(n);
  }
};

/// The cost model's training FLOPs (forward and backward) of one sample of
/// the model, split exactly into its linear and quadratic parts in the
/// sample's length (attention's core is the only quadratic term).
SampleCost modelSampleCost(const ModelDims &dims, const std::string &layers,
                           const std::string &mtpLayers, int mtpDepths);

struct Options {
  int64_t budget = 0; ///< tokens per microbatch
  int64_t dp = 1;
  int64_t minBins = 1;
  int64_t binMultiple = 1;
  Scheduler scheduler = Scheduler::Balanced;
  SampleCost cost;
};

struct Bin {
  std::vector<int64_t> samples; ///< indices into the lengths, in bin order
  int64_t tokens = 0;
  double cost = 0;
};

struct Plan {
  std::vector<Bin> bins;
  /// Data-parallel rank `d`'s microbatches: indices into `bins`, k / dp each.
  std::vector<std::vector<int64_t>> ranks;
  int64_t microbatchesPerRank() const {
    return ranks.empty() ? 0 : int64_t(ranks[0].size());
  }
  int64_t tokens() const;
  double maxBinCost() const;
};

/// Checks `options` (positive budget and counts, minBins and binMultiple
/// multiples that the dp ranks can share).
Error checkOptions(const Options &options);

/// Packs samples of `lengths` tokens. Fails, saying what to change, when a
/// sample is empty or longer than the budget, or when there are fewer
/// samples than the bin count needs (every bin holds at least one sample).
Expected<Plan> pack(const std::vector<int64_t> &lengths,
                    const Options &options);

/// Every count of microbatches per data-parallel rank that pack() can give a
/// batch of `samples` samples under `options` (checked), in increasing order:
/// k / dp for each bin count k it may choose (at least minBins and one
/// budget's worth of one-token samples, a multiple of binMultiple, at most
/// one bin a sample; the unpacked scheduler's k is `samples`). The compiler
/// writes a schedule program for each (docs/artifact.md).
std::vector<int64_t> microbatchCounts(const Options &options, int64_t samples);

} // namespace hypipe::packing

#endif
