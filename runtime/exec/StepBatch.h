//===- StepBatch.h - one step's microbatches of this data-parallel rank ---===//
//
// Draws a step's samples (windows of a token stream, or variable-length
// samples packed into microbatches, docs/data.md), keeps this replica's
// microbatches with their loss weights, and puts them where the stages
// read them (the device's memory).
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_EXEC_STEPBATCH_H
#define HYPIPE_RUNTIME_EXEC_STEPBATCH_H

#include "core/data/Packing.h"
#include "runtime/data/Data.h"
#include "runtime/data/Samples.h"
#include "runtime/formats/Artifact.h"
#include "runtime/kernels/StageArgs.h"
#include "runtime/kernels/Target.h"

#include <vector>

namespace hypipe::rt {

class Comm;
class SafeTensorsWriter;

/// Where a run's samples come from: one stream of tokens cut into windows
/// of seq_length (`stream`), or variable-length samples packed into
/// microbatches (`samples`, docs/data.md).
struct TrainingData {
  const Dataset *stream = nullptr;
  const SampleSource *samples = nullptr;
};

/// Samples per step: dp x microbatches x micro_batch_size, or
/// data.global_batch_size when packing.
int64_t globalBatchSize(const Artifact &artifact, const Comm &comm);

class StepBatch {
public:
  StepBatch(const Artifact &artifact, Comm &comm, Device &device,
            TrainingData data);

  /// What a step's batch holds: its microbatches per data-parallel rank
  /// (packing varies it), the global batch's real tokens, and what padding
  /// every sample to the longest of the step would have cost.
  struct Counts {
    int64_t microbatches = 0, tokens = 0, paddedTokens = 0;
  };
  /// Loads this data-parallel rank's microbatches of step `step` (every
  /// rank packs the same way) and puts them on the device.
  Counts load(int64_t step);

  int64_t microbatches() const { return int64_t(batch.size()); }
  /// Rows (tokens) of microbatch `mb`.
  int64_t rows(int64_t mb) const { return batch.at(size_t(mb)).tokens; }
  /// Microbatch `mb`'s weight in the step's objective.
  double scale(int64_t mb) const { return batch.at(size_t(mb)).scale; }
  /// A stage pass's arguments with microbatch `mb`'s inputs: its tokens,
  /// labels, loss mask, sample boundaries and loss scale.
  StageArgs argsFor(int64_t mb) const;

  /// Adds the step's tokens, labels (and, packed, the loss mask and where
  /// samples and microbatches start) to a reference dump; `keep` holds
  /// what the writer points at until it writes.
  void addTo(SafeTensorsWriter &w,
             std::vector<std::vector<int32_t>> &keep) const;

private:
  /// One microbatch: where its tokens, labels and mask start, how many
  /// rows it has, its sample boundaries (packed) and the weight of its loss.
  struct Microbatch {
    int64_t offset = 0, tokens = 0;
    std::vector<int32_t> cuSeqlens; ///< empty: batch x seq rows
    bool paddedTail = false;        ///< its last sequence is the padding
    /// On an expert grid over data-parallel replicas: the real tokens of
    /// the group's replicas' microbatches (TokenShape::replicaTokens).
    std::vector<int64_t> replicaTokens;
    int64_t cuOffset = 0; ///< of its cuSeqlens in the device copy
    double scale = 1;
  };
  Counts loadWindows(int64_t step);
  Counts loadPacked(int64_t step);
  /// Puts the loaded batch where the stages read it.
  void stageOnDevice();

  const Artifact &artifact;
  Comm &comm;
  Device &device;
  TrainingData data;
  packing::Options packOptions;        ///< packed runs only
  std::vector<int32_t> tokens, labels; ///< this step's microbatches, in order
  std::vector<float> lossMask;         ///< packed runs only
  std::vector<Microbatch> batch;
  /// The batch in device memory (cuda), and where the stages read it.
  DeviceArray<int32_t> deviceTokens, deviceLabels, deviceCuSeqlens;
  DeviceArray<float> deviceLossMask;
  const int32_t *batchTokens = nullptr, *batchLabels = nullptr,
                *batchCuSeqlens = nullptr;
  const float *batchLossMask = nullptr;
};

} // namespace hypipe::rt

#endif
