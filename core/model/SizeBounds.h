//===- SizeBounds.h - the most of every size a run may have ---------------===//
//
// One table of bounds for every size a spec gives (layers, widths, parallel
// sizes, sequence length, batches, steps) and the products that matter (the
// ranks, the stages, the tokens of a microbatch and of a step): each bound
// is at or above the sizes of every trained model and below what one rank's
// memory and 64-bit sizes can hold. The spec loader refuses a size past its
// bound at its line, the `#hybrid.dims` verifier (dims_c0) and the runtime's
// manifest reader refuse the same values, and docs/security.md ("Sizes")
// lists them with the reasons.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_MODEL_SIZEBOUNDS_H
#define HYPIPE_CORE_MODEL_SIZEBOUNDS_H

#include "core/lang/HybridPattern.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hypipe {

/// The most a size field may hold.
struct SizeBound {
  std::string_view field; ///< as the spec names it: "training.seq_length"
  int64_t max;
  std::string_view help; ///< what to do instead
};

/// Every bounded size field of a spec, in the spec's order of sections.
const std::vector<SizeBound> &sizeBounds();
/// The bound of `field`, one of sizeBounds()'s.
const SizeBound &sizeBound(std::string_view field);

/// pp x vpp: a stage holds a layer or more, and a model has at most
/// kMaxLayers of them.
inline constexpr int64_t kMaxStages = kMaxLayers;
/// Kernel layers of one stage's program: its share of the pattern's layers,
/// the embedding, the head, and each MTP depth's input, layers and output.
/// The spec loader holds a whole model's to it (at the pattern), and the
/// manifest reader a stage's.
inline constexpr int64_t kMaxProgramLayers = 2 * kMaxLayers;
/// Calls of one pass of a stage's program: a layer's run, and with recompute
/// its recompute and its chunk's checkpoint save or load, each at most once.
inline constexpr int64_t kMaxPassCalls = 4 * kMaxProgramLayers;
/// The kernel layers of a model of `pattern` (programLayers <= the sum of
/// its stages' program layers).
inline int64_t programLayers(const HybridPattern &pattern) {
  return pattern.numLayers() + 2 +
         int64_t(pattern.mtpDepths) * (int64_t(pattern.mtp.size()) + 2);
}
/// pp x dp: the processes `hypipe train` launches.
inline constexpr int64_t kMaxRanks = int64_t(1) << 16;
/// seq_length x micro_batch_size: the rows of every activation.
inline constexpr int64_t kMaxMicrobatchTokens = int64_t(1) << 22;
/// The tokens of one step's global batch.
inline constexpr int64_t kMaxStepTokens = int64_t(1) << 30;
/// mamba_num_heads x mamba_head_dim: the Mamba inner width.
inline constexpr int64_t kMaxMambaInner = int64_t(1) << 18;
/// Elements of one weight matrix: its weight, gradient and AdamW moments
/// (16 bytes an element) fill one rank's kMaxRankBytes.
inline constexpr int64_t kMaxWeightElements = int64_t(1) << 36;
/// One rank's memory estimate (parameters with their gradients and
/// optimizer state, activations in flight, buffers): 1 TiB.
inline constexpr int64_t kMaxRankBytes = int64_t(1) << 40;

/// CPU threads one rank runs (--threads of hypipe train and hypipe-run).
inline constexpr int64_t kMaxThreads = 4096;

/// "NAME is VALUE, more than the MAX (2^K) hypipe accepts".
std::string tooLarge(std::string_view name, int64_t value, int64_t max);

/// The sizes of one run as a spec or a manifest gives them. A field the spec
/// leaves out is 0, which every bound accepts (its default is in bounds).
struct RunSizes {
  int64_t numLayers = 0;
  int64_t pp = 1, vpp = 0, dp = 1, tp = 1;
  /// Expert parallelism: ep, and etp (0: left out, tp).
  int64_t ep = 1, etp = 0;
  int64_t microbatches = 0; ///< 0: pp
  int64_t groupSize = 0, firstStageLayers = 0, lastStageLayers = 0;
  int64_t seqLength = 1, microBatchSize = 1;
  int64_t steps = 0, warmupSteps = 0, lrDecaySteps = 0;
  bool packing = false;
  int64_t maxTokensPerMicrobatch = 0; ///< 0: seq_length
  int64_t globalBatchSize = 0;        ///< 0: dp x microbatches x mbs
  int64_t minBinCount = 0, binCountMultiple = 0;
};

/// A bound that sizes break: the field to change, as the spec names it
/// ("parallel.dp"), what is wrong and what to do.
struct SizeProblem {
  std::string field;
  std::string message;
  std::string help;
};

/// Each field of `sizes` against its bound, then the products: the stages,
/// the ranks, the tokens of a microbatch and of a step. A value below 1
/// passes: what a field's small values mean is its own check's to say.
/// (The model's widths are dims_c0 of checkModelDims, over the same table.)
std::optional<SizeProblem> checkRunSizes(const RunSizes &sizes);

} // namespace hypipe

#endif
