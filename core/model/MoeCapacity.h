//===- MoeCapacity.h - Megatron-LM's expert capacity and token dropping ---===//
//
// With --moe-expert-capacity-factor an expert takes at most
// ceil(tokens x topk / experts x factor) of the tokens routed to it
// (moe_utils.get_capacity over the router's tokens); the others' choices of
// it are dropped: their weight is zeroed (the token's other choices keep
// theirs, not renormalised) and no row is made for them
// (apply_router_token_dropping). Megatron-LM's router runs on each
// tensor-parallel rank's sequence shard, so the capacity is counted per
// shard: here per block of the routed tokens (MoeShape::capacityBlocks).
// Host code, shared by the targets that group their rows on the host.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_MODEL_MOECAPACITY_H
#define HYPIPE_CORE_MODEL_MOECAPACITY_H

#include "core/model/LayerShapes.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace hypipe::rt {

/// Megatron-LM's get_capacity(tokens x topk, experts, factor), computed in
/// double in its order: ceil(tokens x topk / experts x factor).
inline int64_t expertCapacity(const MoeShape &s, int64_t tokens) {
  return int64_t(std::ceil(double(tokens * s.topk) / double(s.experts) *
                           s.capacityFactor));
}

/// Which of the (token, slot) choices `topIdx` (expert ids) and `topW`
/// (routing weights) of the tokens `t` stay within capacity: kept[slot] =
/// 1 or 0. Dropless (capacityFactor 0) keeps them all. Megatron-LM's router
/// sees a microbatch as [seq, batch] (sequence-major: hypipe's rows are
/// sample-major) and, with sequence parallelism, each rank the positions
/// [r S / blocks, (r+1) S / blocks) of every sample (of the packed rows, with
/// THD); in each such block an expert keeps its capacity of the tokens
/// routed to it: those of the highest weights (its "probs" policy; equal
/// weights to the earlier token in Megatron-LM's order) or the earliest
/// ("position"). Megatron-LM takes them with torch.topk(sorted=False),
/// whose choice among equal values PyTorch does not specify; this one is
/// deterministic.
inline void keepWithinCapacity(const MoeShape &s, const TokenShape &t,
                               const int32_t *topIdx, const float *topW,
                               std::vector<uint8_t> &kept) {
  const int64_t k = s.topk, T = t.tokens();
  kept.assign(size_t(T * k), 1);
  if (s.capacityFactor <= 0 || T == 0)
    return;
  // Megatron-LM's view: B samples of S positions, or one packed sequence;
  // on an expert grid over data-parallel replicas (MoeShape::groupReplicas)
  // each replica's B / replicas samples apart, as its own router sees them.
  const int64_t B = t.cuSeqlens ? 1 : t.batch, S = T / B;
  const int64_t replicas = std::clamp<int64_t>(s.groupReplicas, 1, B),
                perReplica = B / replicas;
  const int64_t blocks = std::clamp<int64_t>(s.capacityBlocks, 1, S);
  std::vector<std::vector<int64_t>> routed(size_t(s.experts));
  // (A NaN weight, which stops the run after this step, sorts last.)
  auto weight = [&](int64_t slot) {
    return std::isnan(topW[slot]) ? -INFINITY : topW[slot];
  };
  for (int64_t rb = 0; rb < replicas * blocks; ++rb) {
    const int64_t b = rb % blocks, first = rb / blocks * perReplica;
    const int64_t s0 = b * S / blocks, s1 = (b + 1) * S / blocks;
    const int64_t capacity = expertCapacity(s, (s1 - s0) * perReplica);
    for (auto &slots : routed)
      slots.clear();
    for (int64_t pos = s0; pos < s1; ++pos)
      for (int64_t sample = first; sample < first + perReplica; ++sample)
        for (int64_t j = 0; j < k; ++j) {
          const int64_t slot = (sample * S + pos) * k + j;
          routed[size_t(topIdx[slot])].push_back(slot);
        }
    for (auto &slots : routed) {
      if (int64_t(slots.size()) <= capacity)
        continue;
      // In Megatron-LM's token order already: the earliest come first.
      if (!s.dropByPosition)
        std::stable_sort(slots.begin(), slots.end(), [&](int64_t a, int64_t b) {
          return weight(a) > weight(b);
        });
      for (size_t i = size_t(capacity); i < slots.size(); ++i)
        kept[size_t(slots[i])] = 0;
    }
  }
}

} // namespace hypipe::rt

#endif
