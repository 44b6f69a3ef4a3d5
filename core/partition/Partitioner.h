//===- Partitioner.h - exact min-max split of a sequence into segments ----===//
//
// Splits a sequence of items with non-negative costs into exactly K
// contiguous segments so that the most expensive segment is as cheap as
// possible. Exact: the optimum is found by binary search over integer costs
// with a greedy feasibility test, which is optimal for contiguous splits.
// Ties are broken by one documented rule (docs/passes.md):
//   - the first item (the embedding) is in segment 0 and the last (the head)
//     in segment K-1;
//   - with at least K items, every segment is non-empty, and among the splits
//     that reach the optimum, the one with the smallest sum of squared segment
//     costs is chosen (the segments that are not the bottleneck are as even as
//     they can be); remaining ties keep the earliest segment starts;
//   - with fewer items than segments, item i goes to segment i and the last
//     item to segment K-1, the segments between stay empty.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_PARTITIONER_H
#define HYPIPE_CORE_PARTITIONER_H

#include "core/Error.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace hypipe {

struct Partition {
  std::vector<int64_t> segmentSizes; ///< items per segment; sums to the items
  int64_t maxSegmentCost = 0;
};

/// Whether items [begin, end) fit in segment `segment` (e.g. a memory cap).
/// Must be monotone: if a range fits, every sub-range fits.
using SegmentFits =
    std::function<bool(int64_t segment, int64_t begin, int64_t end)>;

/// No split satisfies `fits`: segment `segment` would have to hold items
/// [begin, end) (a single item it cannot hold, or everything left over).
struct PartitionInfeasible {
  int64_t segment = 0, begin = 0, end = 0;
};

/// The optimal split of `costs` into `numSegments` segments. With `fits`,
/// only splits whose every segment fits are considered; if none exists, the
/// error says which segment cannot hold which items, and `infeasible` (when
/// given) receives them.
Expected<Partition> partitionMinMax(const std::vector<int64_t> &costs,
                                    int64_t numSegments,
                                    const SegmentFits &fits = nullptr,
                                    PartitionInfeasible *infeasible = nullptr);

} // namespace hypipe

#endif
