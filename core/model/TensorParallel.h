//===- TensorParallel.h - a layer split over tensor-parallel ranks --------===//
//
// Megatron-LM's tensor parallelism, as the kernels of one rank see it. A
// layer on `tp` ranks runs the shape of its shard (tensorParallelShard:
// a tp-th of the heads, query groups, Mamba heads and groups, the MLP's
// hidden width, the vocabulary), over the shard of each parameter that
// ParamSpec::split names; its collectives (Collective, collectivesOf) join
// the partial results. Shards are slices of the same global tensors, by
// global element index, so initialisation from (seed, name) and the
// checkpoints' whole tensors do not depend on tp (forEachShardRun).
//
// Header-only and dependency-free: the compiler, the runtime and the cost
// model read the same rules.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_MODEL_TENSORPARALLEL_H
#define HYPIPE_CORE_MODEL_TENSORPARALLEL_H

#include "core/model/LayerShapes.h"

#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace hypipe::rt {

/// Why a `shape` layer cannot be split over `tp` ranks ("" when it can):
/// Megatron-LM's divisibility rules. (A MoE layer also needs sequence
/// parallelism: the spec's check, which knows the layout.)
inline std::string tensorParallelProblem(const LayerShape &shape, int64_t tp) {
  // The experts' grid fills the layer's group (at tp 1 too: a manifest's).
  if (const auto *moe = std::get_if<MoeShape>(&shape)) {
    const int64_t group = tp * moe->groupReplicas;
    if (moe->groupReplicas < 1 ||
        (moe->expertRanks != 1 &&
         (moe->expertRanks < 1 || tp < 1 || moe->expertTp < 1 ||
          moe->expertRanks * moe->expertTp != group ||
          moe->experts % moe->expertRanks != 0)) ||
        (moe->expertRanks == 1 && moe->groupReplicas != 1))
      return "num_moe_experts (" + std::to_string(moe->experts) +
             ") must be a multiple of ep (" + std::to_string(moe->expertRanks) +
             "), and etp x ep (" + std::to_string(moe->expertTp) + " x " +
             std::to_string(moe->expertRanks) + ") the layer's group of " +
             std::to_string(moe->groupReplicas) + " x tp " +
             std::to_string(tp) + " ranks";
    if (moe->expertRanks > 1 && moe->ffn % moe->expertTp != 0)
      return "moe_ffn_hidden_size (" + std::to_string(moe->ffn) +
             ") is not a multiple of the expert tensor-parallel size " +
             std::to_string(moe->expertTp);
  }
  if (tp == 1)
    return "";
  auto divides = [&](int64_t n, const char *what) -> std::string {
    if (n % tp == 0)
      return "";
    return std::string(what) + " (" + std::to_string(n) +
           ") is not a multiple of the tensor-parallel size " +
           std::to_string(tp);
  };
  return std::visit(
      [&](const auto &s) -> std::string {
        using S = std::decay_t<decltype(s)>;
        std::string why;
        if constexpr (std::is_same_v<S, MambaShape>) {
          if ((why = divides(s.heads, "mamba_num_heads")).empty())
            why = divides(s.groups, "mamba_num_groups");
        } else if constexpr (std::is_same_v<S, AttentionShape>) {
          // Query groups split, or (tp a multiple of them) each shared by
          // tp / groups ranks, as Megatron-LM's attention does; linear_qkv's
          // rows split evenly either way.
          why = divides(s.heads, "num_attention_heads");
          if (why.empty() && s.groups % tp != 0 && tp % s.groups != 0)
            why = "num_query_groups (" + std::to_string(s.groups) +
                  ") is neither a multiple nor a divisor of the "
                  "tensor-parallel size " +
                  std::to_string(tp);
          if (why.empty())
            why = divides(s.qkvWidth(), "kv_channels x (num_attention_heads "
                                        "+ 2 num_query_groups)");
        } else if constexpr (std::is_same_v<S, MlpShape>) {
          why = divides(s.ffn, "ffn_hidden_size");
        } else if constexpr (std::is_same_v<S, EmbeddingShape> ||
                             std::is_same_v<S, HeadShape>) {
          why = divides(s.vocab, "vocab_size");
        } else if constexpr (std::is_same_v<S, MtpInputShape>) {
          // eh_proj is column-parallel over the hidden size; the depth looks
          // up the vocabulary-parallel embedding.
          if ((why = divides(s.hidden, "hidden_size")).empty())
            why = divides(s.vocab, "vocab_size");
        } else if constexpr (std::is_same_v<S, MtpOutputShape>) {
          why = divides(s.vocab, "vocab_size");
        } else if constexpr (std::is_same_v<S, GdnShape>) {
          // Megatron-LM splits the key and value heads alike (a value
          // head's key head stays on its rank).
          if ((why = divides(s.keyHeads, "linear_num_key_heads")).empty())
            why = divides(s.valueHeads, "linear_num_value_heads");
        } else if constexpr (std::is_same_v<S, MoeShape>) {
          // Expert tensor parallelism at Megatron-LM's default, the
          // tensor-parallel size: every expert's width split; or the
          // experts spread over ep ranks of the group, each split over
          // tp / ep.
          // (An expert grid's etp is checked above.)
          if (s.expertRanks == 1)
            why = divides(s.ffn, "moe_ffn_hidden_size");
        } else if constexpr (std::is_same_v<S, MlaShape> ||
                             std::is_same_v<S, DsaShape>) {
          // Megatron-LM splits the heads; the latents (and DSA's indexer)
          // are every rank's.
          why = divides(s.heads, "num_attention_heads");
        }
        return why;
      },
      shape);
}

/// The group a layer's kernels split over in a stage of `tp` ranks, with
/// or without sequence parallelism: its tensor-parallel group, or for a MoE
/// layer whose experts spread over data-parallel ranks
/// (MoeShape::groupReplicas m > 1) Megatron-LM's tp-ep group, the m
/// consecutive data-parallel replicas' tensor-parallel groups (m tp ranks,
/// in rank order: replica-major, tp fastest), over which the layer runs as
/// under sequence parallelism over m times the tokens, each rank holding
/// its own rows.
struct LayerGroup {
  int64_t size = 1;
  bool sequenceParallel = false;
  int64_t replicas = 1;
};
inline LayerGroup layerGroupOf(const LayerShape &shape, int64_t tp,
                               bool sequenceParallel) {
  if (const auto *moe = std::get_if<MoeShape>(&shape);
      moe && moe->groupReplicas > 1)
    return {tp * moe->groupReplicas, true, moe->groupReplicas};
  return {tp, sequenceParallel, 1};
}

/// The shape one of `tp` ranks runs of a `shape` layer
/// (tensorParallelProblem empty): what its kernels and buffers are sized
/// for. Over a group that splits the sequence (layerGroupOf: sequence
/// parallelism, or a MoE layer's replicas, each with its own tokens) its
/// saved input holds the rank's rows (sequenceShards).
inline LayerShape tensorParallelShard(LayerShape shape, int64_t tp,
                                      bool sequenceParallel) {
  const LayerGroup group = layerGroupOf(shape, tp, sequenceParallel);
  const int64_t shards =
      group.sequenceParallel && group.size > 1 ? group.size : 1;
  std::visit(
      [&](auto &s) {
        using S = std::decay_t<decltype(s)>;
        if constexpr (!std::is_same_v<S, EmbeddingShape>)
          s.sequenceShards = shards;
        if constexpr (std::is_same_v<S, MambaShape>) {
          s.heads /= tp;
          s.groups /= tp;
        } else if constexpr (std::is_same_v<S, GdnShape>) {
          s.keyHeads /= tp;
          s.valueHeads /= tp;
        } else if constexpr (std::is_same_v<S, AttentionShape>) {
          s.heads /= tp;
          s.ranks = tp;
          if (s.groups % tp == 0) {
            s.groups /= tp;
          } else { // tp a multiple of the groups: one, shared
            s.kvReplicas = tp / s.groups;
            s.groups = 1;
          }
        } else if constexpr (std::is_same_v<S, MlpShape>) {
          s.ffn /= tp;
        } else if constexpr (std::is_same_v<S, MlaShape> ||
                             std::is_same_v<S, DsaShape>) {
          s.heads /= tp;
        } else if constexpr (std::is_same_v<S, MoeShape>) {
          // etp: the rest of the layer's group is ep
          s.ffn /= s.expertRanks == 1 ? tp : s.expertTp;
        } else if constexpr (std::is_same_v<S, EmbeddingShape> ||
                             std::is_same_v<S, HeadShape> ||
                             std::is_same_v<S, MtpInputShape> ||
                             std::is_same_v<S, MtpOutputShape>) {
          s.vocab /= tp;
        }
      },
      shape);
  return shape;
}

/// The passes of a stage's kernel program.
enum class StagePass { Forward, BackwardInput, BackwardWeight };

/// What a tensor-parallel collective does to a [tokens, n] tensor of the
/// layer's ranks: sums it (in place), takes its maximum (in place), gathers
/// each rank's [tokens/tp, n] rows into the whole (rank r's rows r-th), or
/// sums it and leaves rank r the r-th tp-th of the rows. An all-to-all
/// moves rows of `n` floats between the ranks, as many as the layer's data
/// says (the MoE layers' alltoall dispatcher: each rank's routed rows to
/// the ranks of their experts and back).
enum class CollectiveKind {
  AllReduce,
  AllReduceMax,
  AllGather,
  ReduceScatter,
  AllToAll
};

inline const char *collectiveKindName(CollectiveKind k) {
  switch (k) {
  case CollectiveKind::AllReduce:
    return "all_reduce";
  case CollectiveKind::AllReduceMax:
    return "all_reduce_max";
  case CollectiveKind::AllGather:
    return "all_gather";
  case CollectiveKind::ReduceScatter:
    return "reduce_scatter";
  case CollectiveKind::AllToAll:
    return "all_to_all";
  }
  return "?";
}
inline std::optional<CollectiveKind> parseCollectiveKind(std::string_view s) {
  for (CollectiveKind k :
       {CollectiveKind::AllReduce, CollectiveKind::AllReduceMax,
        CollectiveKind::AllGather, CollectiveKind::ReduceScatter,
        CollectiveKind::AllToAll})
    if (s == collectiveKindName(k))
      return k;
  return std::nullopt;
}

/// One collective of a layer's kernels over its tensor-parallel group: of
/// a tensor of `perToken` floats for each token of the microbatch (the
/// whole tensor's, before a reduce-scatter and after an all-gather).
struct Collective {
  CollectiveKind kind = CollectiveKind::AllReduce;
  int64_t perToken = 0;
  bool operator==(const Collective &o) const {
    return kind == o.kind && perToken == o.perToken;
  }
};

/// The elements of one activation between a stage's layers, [tokens,
/// hidden], that one of `tp` ranks keeps: a tp-th of the tokens with
/// sequence parallelism (its sequence shard), else all of them. Full
/// recompute's checkpoints hold one each. (The activation slots hold the
/// whole [tokens, hidden]: a row-parallel layer writes its partial output
/// of every token there before the reduce-scatter.)
inline int64_t rankActivationFloats(int64_t tokens, int64_t hidden, int64_t tp,
                                    bool sequenceParallel) {
  return shardRows(TokenShape{1, tokens}, sequenceParallel && tp > 1 ? tp : 1) *
         hidden;
}

/// Whether hypipe-run lays out an expert grid of etp x ep ranks at tensor
/// parallelism tp: etp x ep = m x tp ranks, the tensor-parallel group (m =
/// 1) or m data-parallel replicas' with ep > 1 (Megatron-LM's other grids
/// are costed by explain and plan only).
inline bool runsExpertGrid(int64_t tp, int64_t etp, int64_t ep) {
  const int64_t replicas = (etp * ep) / tp;
  return replicas * tp == etp * ep && !(replicas > 1 && ep == 1);
}

/// Whether a MoE layer runs Megatron-LM's alltoall dispatcher: asked for
/// (model.moe_token_dispatcher_type), over tp > 1 ranks with sequence
/// parallelism, which MoE layers split over tp need; anywhere else the
/// layer is whole and no token moves. KernelPlan and the cost model both
/// ask here.
inline bool moeAllToAll(bool requested, int64_t tp, bool sequenceParallel) {
  return requested && tp > 1 && sequenceParallel;
}

/// The collectives a `shape` layer's kernels run, in order, in `pass` over
/// `tp` ranks (none at tp 1): Megatron-LM's. A column-parallel linear reads
/// the whole input, a row-parallel one leaves a partial sum: without
/// sequence parallelism the partial output is summed (all_reduce) after
/// the forward's row-parallel linear and the input's partial gradient
/// after the backward's column-parallel one. With it the residual stream
/// holds a tp-th of the tokens: the normed input is gathered before the
/// column-parallel linear and the output reduce-scattered after the
/// row-parallel one, and the backward gathers the output's gradient and
/// reduce-scatters the input's. The vocabulary-parallel embedding sums (or
/// reduce-scatters) its rows; the vocabulary-parallel cross-entropy takes
/// the maximum logit, then sums the target's logit and the exponentials.
inline std::vector<Collective> collectivesOf(const LayerShape &shape,
                                             int64_t tp, bool sequenceParallel,
                                             StagePass pass) {
  const LayerGroup group = layerGroupOf(shape, tp, sequenceParallel);
  tp = group.size;
  sequenceParallel = group.sequenceParallel;
  if (tp == 1 || pass == StagePass::BackwardWeight)
    return {};
  using K = CollectiveKind;
  const bool forward = pass == StagePass::Forward;
  const bool sp = sequenceParallel;
  return std::visit(
      [&](const auto &s) -> std::vector<Collective> {
        using S = std::decay_t<decltype(s)>;
        const int64_t h = s.hidden;
        if constexpr (std::is_same_v<S, AttentionShape>) {
          // With fewer query groups than ranks, the ranks' linear_qkv
          // outputs are gathered side by side (each rank takes its group's
          // k and v and its heads' q), and going backward their gradients
          // reduce-scattered back (Megatron-LM's
          // all_gather_last_dim_from_tensor_parallel_region).
          std::vector<Collective> c;
          if (sp)
            c.push_back({K::AllGather, h});
          if (s.groups % tp != 0)
            c.push_back(
                {forward ? K::AllGather : K::ReduceScatter, s.qkvWidth()});
          c.push_back({sp ? K::ReduceScatter : K::AllReduce, h});
          return c;
        } else if constexpr (std::is_same_v<S, MambaShape> ||
                             std::is_same_v<S, MlpShape> ||
                             std::is_same_v<S, GdnShape>) {
          // (Gated DeltaNet's in_proj and out_proj as Mamba's.)
          if (!sp)
            return {{K::AllReduce, h}};
          return {{K::AllGather, h}, {K::ReduceScatter, h}};
        } else if constexpr (std::is_same_v<S, MlaShape>) {
          // Forward as the MLP's: every rank computes the latents of every
          // token (the down-projections are replicated), its heads' up-
          // projections and attention, and linear_proj's partial output is
          // summed. Backward: the output's gradient gathered, the latents'
          // partial gradients ([c_kv | k_pe], then the query latent's or,
          // without one, the normed input's) summed into the rows the rank
          // holds, from where the latents' norms, the down-projections and
          // the pre-norm run on those rows alone (recipes/Mla.h).
          if (forward)
            return sp ? std::vector<Collective>{{K::AllGather, h},
                                                {K::ReduceScatter, h}}
                      : std::vector<Collective>{{K::AllReduce, h}};
          const K sum = sp ? K::ReduceScatter : K::AllReduce;
          std::vector<Collective> c;
          if (sp)
            c.push_back({K::AllGather, h});
          c.push_back({sum, s.kvDownWidth()});
          c.push_back({sum, s.qLoraRank > 0 ? s.qLoraRank : h});
          return c;
        } else if constexpr (std::is_same_v<S, DsaShape>) {
          // MLA's, and forward, between the indexer and the core, the KL
          // loss's target summed over the heads of every rank (Megatron-
          // LM's all-reduce of the attention scores, dsa.py): each rank's
          // heads' part of it, one float per pair of a query's row of seq
          // (recipes/Dsa.h). The indexer runs whole on every rank, its
          // inputs those MLA gathered; backward it needs nothing of the
          // others.
          std::vector<Collective> c = collectivesOf(MlaShape(s), tp, sp, pass);
          if (forward)
            c.insert(c.end() - 1, {K::AllReduce, s.seq});
          return c;
        } else if constexpr (std::is_same_v<S, MoeShape>) {
          // As the MLP's, and backward the routing weights' gradients
          // [tokens, topk] summed between the two: each rank's expert
          // shards give a part of every routed row's output. (Megatron-LM
          // splits MoE layers only with sequence parallelism; the
          // collectives without it are the same with all-reduces.)
          // Megatron-LM's alltoall dispatcher (with sequence parallelism,
          // which MoE layers over tp ranks need): the router's logits
          // gathered (every rank routes every token: the same choices and
          // load-balancing loss), each rank's routed rows to the ranks of
          // their experts and the experts' outputs back; backward the
          // rows' gradients the same two ways (recipes/Moe.h).
          if (s.allToAll && sp) {
            const Collective rows{K::AllToAll, h};
            if (forward)
              return {{K::AllGather, s.experts}, rows, rows};
            return {rows, rows};
          }
          const Collective in{sp ? K::AllGather : K::AllReduce, h};
          const Collective weights{K::AllReduce, s.topk};
          const Collective out{sp ? K::ReduceScatter : K::AllReduce, h};
          if (forward)
            return sp ? std::vector<Collective>{in, out}
                      : std::vector<Collective>{out};
          return sp ? std::vector<Collective>{in, weights, out}
                    : std::vector<Collective>{weights, out};
        } else if constexpr (std::is_same_v<S, EmbeddingShape>) {
          if (!forward)
            return sp ? std::vector<Collective>{{K::AllGather, h}}
                      : std::vector<Collective>{};
          return {{sp ? K::ReduceScatter : K::AllReduce, h}};
        } else if constexpr (std::is_same_v<S, MtpInputShape>) {
          // The embedding rows summed (or reduce-scattered), then with
          // sequence parallelism [e' | h'] gathered for eh_proj, whose
          // column-parallel output is gathered whole (Megatron's
          // gather_from_tensor_model_parallel_region; with sequence
          // parallelism each rank keeps its rows). Backward: the output's
          // gradient gathered (sequence parallelism), eh_proj's input
          // gradient summed, and the embedding rows' gathered again.
          if (forward) {
            if (!sp)
              return {{K::AllReduce, h}, {K::AllGather, h}};
            return {{K::ReduceScatter, h},
                    {K::AllGather, 2 * h},
                    {K::AllGather, h}};
          }
          if (!sp)
            return {{K::AllReduce, 2 * h}};
          return {
              {K::AllGather, h}, {K::ReduceScatter, 2 * h}, {K::AllGather, h}};
        } else if constexpr (std::is_same_v<S, HeadShape> ||
                             std::is_same_v<S, MtpOutputShape>) {
          if (!forward)
            return {{sp ? K::ReduceScatter : K::AllReduce, h}};
          std::vector<Collective> c;
          if (sp)
            c.push_back({K::AllGather, h});
          c.push_back({K::AllReduceMax, 1});
          c.push_back({K::AllReduce, 1});
          c.push_back({K::AllReduce, 1});
          return c;
        } else {
          return {};
        }
      },
      shape);
}

/// The collectives a kernel call of a `shape` layer lists: a run's in
/// `pass` are its kind's; a recompute (before the input gradient) runs the
/// forward's again when the layer is recomputed whole (`wholeLayer`). A
/// selective one computes the dropped `modules`' tensors again from the
/// kept ones: with sequence parallelism the normed input (the layernorm
/// module) is gathered again, as the forward gathered it; the MoE layer's
/// moe module runs its forward again, with its collectives; nothing else
/// crosses ranks.
inline std::vector<Collective>
collectivesOfCall(const LayerShape &shape, int64_t tp, bool sequenceParallel,
                  StagePass pass, bool recompute, bool wholeLayer,
                  RecomputeModuleSet modules) {
  const bool moeAgain = std::holds_alternative<MoeShape>(shape) &&
                        (modules & moduleBit(RecomputeModule::Moe));
  const LayerGroup group = layerGroupOf(shape, tp, sequenceParallel);
  tp = group.size;
  sequenceParallel = group.sequenceParallel;
  if (recompute && !wholeLayer && !moeAgain) {
    const bool norm = modules & moduleBit(RecomputeModule::LayerNorm) &
                      selectiveModulesOf(kindOf(shape));
    // The alltoall dispatcher's MoE layer norms only its own rows.
    const auto *moe = std::get_if<MoeShape>(&shape);
    if (tp > 1 && sequenceParallel && norm && !(moe && moe->allToAll))
      return {{CollectiveKind::AllGather,
               std::visit([](const auto &s) { return s.hidden; }, shape)}};
    return {};
  }
  return collectivesOf(shape, tp, sequenceParallel,
                       recompute ? StagePass::Forward : pass);
}

/// The dims of one of `tp` ranks' shard of a tensor of `shape` cut by
/// `split`.
inline std::vector<int64_t> shardShape(std::vector<int64_t> shape, Split split,
                                       int64_t tp) {
  if (split == Split::Rows && !shape.empty())
    shape.front() /= tp;
  else if (split == Split::Columns && !shape.empty())
    shape.back() /= tp;
  return shape;
}

inline int64_t shapeNumel(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// The ranks of a tp group a parameter (ParamSpec or the manifest's
/// ParamEntry) is cut over: all tp, or an expert's tp / ep (the ranks of
/// its expert-parallel rank: ParamSpec::expertRank).
template <class P> int64_t shardRanksOf(const P &p, int64_t tp) {
  return p.expertRank < 0 ? tp : p.expertTp;
}
/// Whether rank `rank` holds (a shard of) the parameter: of the tensor-
/// parallel group, or for an expert's of its layer's group (LayerGroup:
/// the tp-ep group).
template <class P> bool holdsParam(const P &p, int64_t tp, int64_t rank) {
  return p.expertRank < 0 || rank / shardRanksOf(p, tp) == p.expertRank;
}
/// The elements of the parameter a rank that holds it keeps.
template <class P> int64_t paramNumel(const P &p, int64_t tp) {
  return shapeNumel(shardShape(p.shape, p.split, shardRanksOf(p, tp)));
}

/// The elements one of `tp` ranks holds of `params` (a layer's, whole): a
/// tp-th of each parameter ParamSpec::split cuts, all of each it
/// replicates (norms), and of experts spread over the group the experts of
/// one expert-parallel rank (every rank holds as many). What the compiler
/// sizes a rank's parameters by, and the runtime's manifest holds
/// parameter by parameter.
inline int64_t rankNumel(const std::vector<ParamSpec> &params, int64_t tp) {
  int64_t n = 0;
  for (const ParamSpec &p : params)
    if (p.expertRank <= 0)
      n += paramNumel(p, tp);
  return n;
}

/// Where each of `params` starts in a rank's range of them (rankNumel
/// elements, in order): expert-parallel rank 0's experts in order, and
/// rank r's k-th expert tensor where rank 0's k-th is (each rank's slots).
inline std::vector<int64_t> paramOffsets(const std::vector<ParamSpec> &params,
                                         int64_t tp) {
  std::vector<int64_t> out, slots;
  std::vector<int64_t> seen; // expert tensors so far, by expert rank
  int64_t at = 0;
  for (const ParamSpec &p : params) {
    if (p.expertRank <= 0) {
      out.push_back(at);
      if (p.expertRank == 0)
        slots.push_back(at);
      at += paramNumel(p, tp);
      continue;
    }
    if (seen.size() <= size_t(p.expertRank))
      seen.resize(size_t(p.expertRank) + 1, 0);
    out.push_back(slots.at(size_t(seen[size_t(p.expertRank)]++)));
  }
  return out;
}

/// Calls f(global, local, count) for each run of `count` consecutive
/// elements that rank `rank` of `tp` holds of a row-major tensor of `shape`
/// cut by `split` (in `sections` of rows; empty: one): element global + i
/// of the whole tensor is element local + i of the shard, the runs in shard
/// order and together the whole shard.
template <class F>
void forEachShardRun(const std::vector<int64_t> &shape, Split split,
                     const std::vector<int64_t> &sections, int64_t tp,
                     int64_t rank, F &&f) {
  const int64_t n = shapeNumel(shape);
  if (split == Split::None || tp == 1 || shape.empty()) {
    f(int64_t(0), int64_t(0), n);
    return;
  }
  const int64_t rows = shape.front(), rowElems = rows ? n / rows : 0;
  if (split == Split::Rows) {
    int64_t start = 0, local = 0;
    const std::vector<int64_t> one{rows};
    for (int64_t section : sections.empty() ? one : sections) {
      const int64_t part = section / tp;
      f((start + rank * part) * rowElems, local, part * rowElems);
      start += section;
      local += part * rowElems;
    }
    return;
  }
  const int64_t columns = shape.back(), part = columns / tp,
                outer = columns ? n / columns : 0;
  for (int64_t i = 0; i < outer; ++i)
    f(i * columns + rank * part, i * part, part);
}

/// forEachShardRun over a parameter (ParamSpec or the manifest's
/// ParamEntry) on tp rank `rank`: nothing when the rank holds none of it,
/// else its runs over the ranks it is cut over.
template <class P, class F>
void forEachParamShardRun(const P &p, int64_t tp, int64_t rank, F &&f) {
  if (!holdsParam(p, tp, rank))
    return;
  const int64_t ranks = shardRanksOf(p, tp);
  forEachShardRun(p.shape, p.split, p.sections, ranks, rank % ranks,
                  std::forward<F>(f));
}

/// Whether the row sections of a rows-cut tensor of `shape` all divide by
/// tp (and cover its rows): what the manifest reader checks.
inline bool splitsEvenly(const std::vector<int64_t> &shape, Split split,
                         const std::vector<int64_t> &sections, int64_t tp) {
  if (split == Split::None || tp == 1)
    return true;
  if (shape.empty())
    return false;
  if (split == Split::Columns)
    return shape.back() % tp == 0;
  int64_t sum = 0;
  for (int64_t s : sections) {
    if (s < 0 || s % tp != 0)
      return false;
    sum += s;
  }
  return sections.empty() ? shape.front() % tp == 0 : sum == shape.front();
}

} // namespace hypipe::rt

#endif
