//===- Partitioner.cpp ----------------------------------------------------===//
#include "core/partition/Partitioner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace hypipe {

namespace {

struct Greedy {
  std::vector<int64_t> sizes;
  bool complete = false;     ///< every item placed
  int64_t stuckSegment = -1; ///< a segment that could not take one more item
  int64_t stuckItem = -1;
};

/// Fills segments `firstSegment`..k-1 with items `firstItem`..n-1, left to
/// right; each takes as many items as keep its cost at most `bound` and still
/// fit, while leaving one item for each later segment. For a given bound this
/// covers the longest prefix possible, so it decides feasibility exactly.
Greedy fill(const std::vector<int64_t> &costs, int64_t firstItem,
            int64_t firstSegment, int64_t k, int64_t bound,
            const SegmentFits &fits) {
  Greedy g;
  auto n = static_cast<int64_t>(costs.size());
  int64_t next = firstItem;
  for (int64_t s = firstSegment; s < k; ++s) {
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

/// Among the splits whose every segment costs at most `bound` (the optimum)
/// and fits, the one with the smallest sum of squared segment costs: the most
/// even split of everything that is not the bottleneck. Dynamic programming
/// over (segment, end) with a sliding window of starts; ties keep the earliest
/// start. O(n * window * k) time, O(n * k) memory.
std::vector<int64_t> balance(const std::vector<int64_t> &costs, int64_t k,
                             int64_t bound, const SegmentFits &fits) {
  auto n = static_cast<int64_t>(costs.size());
  std::vector<int64_t> prefix(n + 1, 0);
  for (int64_t i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + costs[i];
  const double inf = std::numeric_limits<double>::infinity();
  // best[e]: smallest sum of squares splitting items [0, e) into s+1 segments.
  std::vector<double> best(n + 1, inf), next(n + 1, inf);
  std::vector<int32_t> parent(static_cast<size_t>(k) * (n + 1), -1);
  for (int64_t e = 1; e <= n - (k - 1); ++e) {
    int64_t sum = prefix[e];
    if (sum > bound || (fits && !fits(0, 0, e)))
      break;
    best[e] = static_cast<double>(sum) * static_cast<double>(sum);
    parent[e] = 0;
  }
  for (int64_t s = 1; s < k; ++s) {
    std::fill(next.begin(), next.end(), inf);
    // Segment s is [b, e) with b >= s, e <= n - (k - 1 - s), non-empty.
    int64_t lo = s; // smallest start whose cost to e stays within the bound
    for (int64_t e = s + 1; e <= n - (k - 1 - s); ++e) {
      while (lo < e && prefix[e] - prefix[lo] > bound)
        ++lo;
      for (int64_t b = lo; b < e; ++b) {
        if (best[b] == inf)
          continue;
        if (fits && !fits(s, b, e))
          continue;
        double cost = static_cast<double>(prefix[e] - prefix[b]);
        double total = best[b] + cost * cost;
        if (total < next[e]) {
          next[e] = total;
          parent[static_cast<size_t>(s) * (n + 1) + e] =
              static_cast<int32_t>(b);
        }
      }
    }
    std::swap(best, next);
  }
  std::vector<int64_t> sizes(k, 0);
  int64_t end = n;
  for (int64_t s = k - 1; s >= 0; --s) {
    int64_t begin = parent[static_cast<size_t>(s) * (n + 1) + end];
    sizes[s] = end - begin;
    end = begin;
  }
  return sizes;
}

} // namespace

Expected<Partition> partitionMinMax(const std::vector<int64_t> &costs,
                                    int64_t k, const SegmentFits &fits,
                                    PartitionInfeasible *infeasible) {
  auto n = static_cast<int64_t>(costs.size());
  auto cannotHold = [&](int64_t segment, int64_t begin, int64_t end) {
    if (infeasible)
      *infeasible = {segment, begin, end};
    return makeError(fmt::format("segment {} cannot hold items {}..{}", segment,
                                 begin, end - 1));
  };
  if (k < 1)
    return makeError("the number of segments must be at least 1");
  if (n < 2)
    return makeError(
        "the sequence must hold at least the embedding and the head");
  for (int64_t c : costs)
    if (c < 0)
      return makeError("costs must be non-negative");

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
          return cannotHold(s, item, item + 1);
      if (result.segmentSizes[s])
        result.maxSegmentCost =
            std::max(result.maxSegmentCost, costs[item - 1]);
    }
    return result;
  }

  // Binary search for the smallest feasible bound; every segment is non-empty.
  int64_t lo = *std::max_element(costs.begin(), costs.end());
  int64_t hi = 0;
  for (int64_t c : costs) {
    if (hi > INT64_MAX - c)
      return makeError("the total cost overflows 64 bits");
    hi += c;
  }
  Greedy loose = fill(costs, 0, 0, k, hi, fits);
  if (!loose.complete) {
    if (loose.stuckSegment >= 0)
      return cannotHold(loose.stuckSegment, loose.stuckItem,
                        loose.stuckItem + 1);
    int64_t placed = 0;
    for (size_t s = 0; s + 1 < loose.sizes.size(); ++s)
      placed += loose.sizes[s];
    return cannotHold(k - 1, placed, n);
  }
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (fill(costs, 0, 0, k, mid, fits).complete)
      hi = mid;
    else
      lo = mid + 1;
  }
  result.segmentSizes = balance(costs, k, lo, fits);
  int64_t item = 0;
  for (int64_t size : result.segmentSizes) {
    int64_t sum = 0;
    for (int64_t j = 0; j < size; ++j)
      sum += costs[item++];
    result.maxSegmentCost = std::max(result.maxSegmentCost, sum);
  }
  return result;
}

} // namespace hypipe
