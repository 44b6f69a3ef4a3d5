//===- Partitioner.cpp ----------------------------------------------------===//
#include "frontend/Partitioner.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace hypipe {

char PartitionInfeasible::ID = 0;

void PartitionInfeasible::log(llvm::raw_ostream &os) const {
  os << fmt::format("segment {} cannot hold items {}..{}", segment, begin, end - 1);
}

namespace {

struct Greedy {
  std::vector<int64_t> sizes;
  bool complete = false;      ///< every item placed
  int64_t stuckSegment = -1;  ///< a segment that could not take one more item
  int64_t stuckItem = -1;
};

/// Fills segments left to right; each takes as many items as keep its cost at
/// most `bound` and still fit, while leaving one item for each later segment.
Greedy fill(const std::vector<int64_t> &costs, int64_t k, int64_t bound,
            const SegmentFits &fits) {
  Greedy g;
  auto n = static_cast<int64_t>(costs.size());
  int64_t next = 0;
  for (int64_t s = 0; s < k; ++s) {
    int64_t begin = next, sum = 0;
    int64_t laterSegments = k - 1 - s;
    while (next < n && n - (next + 1) >= laterSegments &&
           sum + costs[next] <= bound && (!fits || fits(s, begin, next + 1))) {
      sum += costs[next];
      ++next;
    }
    if (next == begin && next < n && g.stuckSegment < 0) {
      g.stuckSegment = s;
      g.stuckItem = next;
    }
    g.sizes.push_back(next - begin);
  }
  g.complete = next == n;
  return g;
}

} // namespace

llvm::Expected<Partition> partitionMinMax(const std::vector<int64_t> &costs,
                                          int64_t k, const SegmentFits &fits) {
  auto n = static_cast<int64_t>(costs.size());
  if (k < 1)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the number of segments must be at least 1");
  if (n < 2)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the sequence must hold at least the embedding and the head");
  for (int64_t c : costs)
    if (c < 0)
      return llvm::createStringError(llvm::inconvertibleErrorCode(), "costs must be non-negative");

  Partition result;
  if (n < k) {
    // Item i in segment i, the head in the last segment, empty ones between.
    result.segmentSizes.assign(k, 0);
    for (int64_t i = 0; i + 1 < n; ++i)
      result.segmentSizes[i] = 1;
    result.segmentSizes[k - 1] = 1;
    int64_t item = 0;
    for (int64_t s = 0; s < k; ++s) {
      for (int64_t j = 0; j < result.segmentSizes[s]; ++j, ++item)
        if (fits && !fits(s, item, item + 1))
          return llvm::make_error<PartitionInfeasible>(s, item, item + 1);
      if (result.segmentSizes[s])
        result.maxSegmentCost = std::max(result.maxSegmentCost, costs[item - 1]);
    }
    return result;
  }

  // Binary search for the smallest feasible bound; every segment is non-empty.
  int64_t lo = *std::max_element(costs.begin(), costs.end());
  int64_t hi = 0;
  for (int64_t c : costs) {
    if (hi > INT64_MAX - c)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "the total cost overflows 64 bits");
    hi += c;
  }
  Greedy loose = fill(costs, k, hi, fits);
  if (!loose.complete) {
    if (loose.stuckSegment >= 0)
      return llvm::make_error<PartitionInfeasible>(loose.stuckSegment, loose.stuckItem,
                                                   loose.stuckItem + 1);
    int64_t placed = 0;
    for (size_t s = 0; s + 1 < loose.sizes.size(); ++s)
      placed += loose.sizes[s];
    return llvm::make_error<PartitionInfeasible>(k - 1, placed, n);
  }
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (fill(costs, k, mid, fits).complete)
      hi = mid;
    else
      lo = mid + 1;
  }
  Greedy best = fill(costs, k, lo, fits);
  result.segmentSizes = best.sizes;
  int64_t item = 0;
  for (int64_t size : best.sizes) {
    int64_t sum = 0;
    for (int64_t j = 0; j < size; ++j)
      sum += costs[item++];
    result.maxSegmentCost = std::max(result.maxSegmentCost, sum);
  }
  return result;
}

} // namespace hypipe
