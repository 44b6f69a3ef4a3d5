//===- EventWriter.h - TensorBoard event files of scalars -----------------===//
//
// --tensorboard-dir (Megatron-LM's flag): an event file
// (events.out.tfevents.<seconds>.<host>.<pid>) that TensorBoard reads, as
// TensorFlow writes it: TFRecords (a little-endian uint64 length, its masked
// CRC-32C, the serialised Event, the data's masked CRC-32C), the first
// record naming the file version, then one Event of scalar summaries per
// call. The tags are Megatron-LM's where it has one (docs/runtime.md lists
// them), so that runs of both show side by side.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_TENSORBOARD_EVENTWRITER_H
#define HYPIPE_RUNTIME_TENSORBOARD_EVENTWRITER_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace hypipe::tensorboard {

/// Megatron-LM's tags for what a training step logs.
inline constexpr const char *kLossTag = "lm loss";
inline constexpr const char *kLearningRateTag = "learning-rate";
inline constexpr const char *kGradNormTag = "grad-norm";
inline constexpr const char *kValidationLossTag = "lm loss validation";
inline constexpr const char *kValidationPerplexityTag =
    "lm loss validation ppl";
/// hypipe's own (Megatron logs throughput in TFLOP/s and the CUDA caching
/// allocator's bytes instead).
inline constexpr const char *kTokensPerSecondTag = "tokens-per-second";
inline constexpr const char *kPeakTensorBytesTag = "mem-max-allocated-bytes";

class EventWriter {
public:
  /// Creates `dir` (and its parents) and a new event file in it; a resumed
  /// run adds a file beside the earlier ones, which TensorBoard reads as
  /// one run. Throws RuntimeError naming the path when it cannot.
  explicit EventWriter(const std::string &dir);

  /// One Event at `step` holding a scalar summary per (tag, value),
  /// flushed so that a running TensorBoard sees it. Throws RuntimeError
  /// when the file cannot be written.
  void scalars(int64_t step,
               const std::vector<std::pair<const char *, double>> &values);

  /// The validation loss of `step` and its perplexity, as Megatron logs
  /// them (the perplexity exp(min(20, loss))).
  void validationLoss(int64_t step, double loss);

  const std::string &path() const { return file; }

private:
  /// Appends one TFRecord holding `data` and flushes.
  void writeRecord(const std::string &data);

  std::string file;
  std::ofstream out;
};

/// Megatron's perplexity of a loss: exp(min(20, loss)). What the JSON log,
/// the console and validationLoss report beside a validation loss.
inline double perplexity(double loss) { return std::exp(std::min(20.0, loss)); }

} // namespace hypipe::tensorboard

#endif
