//===- AutoPartition.h - balanced stages from the cost model --------------===//
//
// Chooses where a pattern without `|` is split into pp * vpp segments: the
// items are the embedding, every layer and the head (with MTP), their costs
// come from the cost model (FLOPs for `time`, parameters for `params`), and
// the split minimises the most expensive segment exactly, optionally under a
// per-rank memory cap. Used by the spec loader, `hypipe partition` and the
// `hybrid-auto-partition` pass.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_AUTOPARTITION_H
#define HYPIPE_CORE_AUTOPARTITION_H

#include "core/lang/HybridPattern.h"
#include "core/model/CostModel.h"
#include "core/model/Precision.h"
#include "core/model/Recompute.h"
#include "core/partition/Partitioner.h"

#include <optional>

namespace hypipe {

/// What the automatic split balances: time (the cost model's FLOPs of
/// forward and backward) or parameters.
enum class PartitionObjective { Time, Params };

/// `time`, `params`: the spelling of the spec and the command lines.
const char *objectiveName(PartitionObjective objective);
/// The inverse of objectiveName; nullopt for anything else.
std::optional<PartitionObjective> parseObjective(std::string_view name);

struct AutoPartitionRequest {
  ModelDims dims;
  CostSettings settings;
  std::string layers;    ///< main layers, no `|`
  std::string mtpLayers; ///< one MTP depth ("" without MTP)
  int mtpDepths = 0;
  int64_t pp = 1;
  int64_t vpp = 1;
  schedule::ScheduleKind schedule = schedule::ScheduleKind::OneFOneB;
  int64_t microbatches = 1;
  PartitionObjective objective = PartitionObjective::Time;
  std::optional<double> maxMemoryGiB;
  /// Activation recompute: with full recompute, a segment's recomputed
  /// layers keep only their chunks' inputs (rankMemoryBytes).
  RecomputeSpec recompute;
};

struct AutoPartitionResult {
  std::vector<ItemCost> items;
  std::vector<int64_t> costs; ///< per item, by the objective
  Partition partition;
  std::string pattern; ///< the layers with `|` (and `/` MTP parts)
  PatternPlacement placement;
};

/// Estimated peak bytes of rank `ppRank` for segments of the given item
/// ranges ([begin, end) per segment it holds): parameters with their
/// gradients and optimizer state, activations of the microbatches in flight,
/// and two p2p buffers per stage. With full recompute (Megatron's
/// checkpointing of a stage's layers in chunks), a microbatch in flight
/// keeps the layers not recomputed and one activation per chunk, and the
/// largest chunk's activations come back once, while its backward runs; the
/// embedding and the head (with its MTP depths) keep theirs.
int64_t rankMemoryBytes(const std::vector<ItemCost> &items,
                        const std::vector<std::pair<int64_t, int64_t>> &ranges,
                        const AutoPartitionRequest &request, int64_t ppRank);

/// Each pipeline rank's estimate (rankMemoryBytes), by part, holding the
/// stages `placement` gives it.
std::vector<RankMemory> rankMemories(const std::vector<ItemCost> &items,
                                     const PatternPlacement &placement,
                                     const AutoPartitionRequest &request);

/// The item range [begin, end) of every stage of `placement`, in stage
/// order: items are the embedding (0), layers 1..N and the head (N+1).
std::vector<std::pair<int64_t, int64_t>>
stageItemRanges(const PatternPlacement &placement);

/// The balanced split. Errors are plain messages that say what to change.
Expected<AutoPartitionResult>
autoPartition(const AutoPartitionRequest &request);

} // namespace hypipe

#endif
