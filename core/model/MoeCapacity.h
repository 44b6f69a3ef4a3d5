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
#include <stdexcept>
#include <vector>

namespace hypipe::rt {

/// Which of the (token, slot) choices `topIdx` (expert ids) and `topW`
/// (routing weights) of the tokens `t` (a MoE layer's group's:
/// MoeShape::group) go to their expert: kept[slot] = 1 or 0. Padding rows
/// (past each replica's real tokens, MoeShape::realTokens: sequence
/// parallelism's, the group's) go nowhere; dropless (capacityFactor 0)
/// keeps every other choice. Megatron-LM's router sees a microbatch as
/// [seq, batch] (sequence-major: hypipe's rows are sample-major) and, with
/// sequence parallelism, each rank the positions [r S / blocks, (r+1) S /
/// blocks) of every sample (of the packed rows, with THD); in each such
/// block an expert keeps its capacity of the block's real tokens routed to
/// it: those of the highest weights (its "probs" policy; equal weights to
/// the earlier token in Megatron-LM's order) or the earliest ("position").
/// Megatron-LM takes them with torch.topk(sorted=False), whose choice among
/// equal values PyTorch does not specify; this one is deterministic. (Its
/// capacity counts a block's padding rows too, and they may take an
/// expert's places: here they do neither, so that a padded microbatch
/// routes as the same tokens unpadded do.)
inline void keepWithinCapacity(const MoeShape &s, const TokenShape &t,
                               const int32_t *topIdx, const float *topW,
                               std::vector<uint8_t> &kept) {
  const int64_t k = s.topk, T = t.tokens();
  kept.assign(size_t(T * k), 1);
  if (T == 0)
    return;
  // Megatron-LM's view: B samples of S positions, or one packed sequence;
  // on an expert grid over data-parallel replicas (MoeShape::groupReplicas)
  // each replica's B / replicas samples apart, as its own router sees them.
  const int64_t B = t.cuSeqlens ? 1 : t.batch, S = T / B;
  const int64_t replicas = s.groupReplicas, perReplica = B / replicas;
  if (replicas < 1 || B % replicas != 0)
    throw std::logic_error("keepWithinCapacity: the tokens are no group's "
                           "(MoeShape::group)");
  thread_local std::vector<int64_t> real; // no allocation once warm
  real.assign(size_t(replicas), 0);
  for (int64_t r = 0; r < replicas; ++r) {
    real[size_t(r)] = s.realTokens(t, r);
    for (int64_t slot = (r * perReplica * S + real[size_t(r)]) * k;
         slot < (r + 1) * perReplica * S * k; ++slot)
      kept[size_t(slot)] = 0;
  }
  if (s.capacityFactor <= 0)
    return;
  const int64_t blocks = std::clamp<int64_t>(s.capacityBlocks, 1, S);
  // The positions a replica's blocks cut: its samples', or of a packed
  // microbatch over replicas the rows it has without the group's padding
  // (its real tokens to a multiple of the blocks, as sequence parallelism
  // pads it), so that its blocks are the ones it has on its own.
  auto span = [&](int64_t r) {
    if (perReplica > 1)
      return S;
    return std::min(S, (real[size_t(r)] + blocks - 1) / blocks * blocks);
  };
  std::vector<std::vector<int64_t>> routed(size_t(s.experts));
  // (A NaN weight, which stops the run after this step, sorts last.)
  auto weight = [&](int64_t slot) {
    return std::isnan(topW[slot]) ? -INFINITY : topW[slot];
  };
  for (int64_t rb = 0; rb < replicas * blocks; ++rb) {
    const int64_t b = rb % blocks, first = rb / blocks * perReplica,
                  Sr = span(rb / blocks);
    const int64_t s0 = b * Sr / blocks, s1 = (b + 1) * Sr / blocks;
    for (auto &slots : routed)
      slots.clear();
    int64_t tokens = 0;
    for (int64_t pos = s0; pos < s1; ++pos)
      for (int64_t sample = first; sample < first + perReplica; ++sample) {
        if ((sample - first) * S + pos >= real[size_t(rb / blocks)])
          continue; // padding
        ++tokens;
        for (int64_t j = 0; j < k; ++j) {
          const int64_t slot = (sample * S + pos) * k + j;
          routed[size_t(topIdx[slot])].push_back(slot);
        }
      }
    const int64_t capacity = s.capacityOf(tokens);
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
