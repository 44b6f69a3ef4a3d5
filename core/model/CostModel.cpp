//===- CostModel.cpp ------------------------------------------------------===//
#include "core/model/CostModel.h"

#include "core/Saturating.h"
#include "core/model/ShardLayout.h"
#include "core/model/TensorParallel.h"
#include "core/schedule/Schedule.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace hypipe {

namespace {

/// A bias-free linear layer `in -> out` applied to `tokens` tokens: forward,
/// input gradient and weight gradient are each one GEMM of 2*T*in*out FLOPs.
/// (Parameter counts are not counted here: they are the sizes of the
/// parameters the layer shapes the kernels use declare.)
void addLinear(ItemCost &c, int64_t tokens, int64_t in, int64_t out) {
  c.forwardFlops += 2 * tokens * in * out;
  c.backwardInputFlops += 2 * tokens * in * out;
  c.backwardWeightFlops += 2 * tokens * in * out;
}

int64_t upWidth(const ModelDims &d, int64_t ffn) {
  return d.activation == "swiglu" ? 2 * ffn : ffn;
}

/// Causal attention's core: QK^T and PV, b*heads*s*s*k multiply-adds each
/// over the lower triangle, of a rank's tp-th of the heads.
int64_t attentionCoreFlops(const ModelDims &d, const CostSettings &s) {
  return 2 * s.microBatchSize * (d.numHeads / s.tp) * s.seqLength *
         s.seqLength * d.kvChannels();
}

/// An MLA layer ('+', and the attention of a 'D'): a rank's tp-th of the
/// heads (the down-projections are replicated, so every rank runs them
/// whole); `pairs2` is twice the (query, key) pairs each head's core scores
/// per sample, s^2 for causal attention over the lower triangle. Its
/// parameters are the whole layer's (MlaShape's or DsaShape's).
void addLatentAttention(ItemCost &c, const ModelDims &d, const CostSettings &s,
                        int64_t pairs2) {
  const int64_t t = s.tokens(), h = d.hidden, tp = s.tp;
  const int64_t e = s.activationBytesPerElement();
  const rt::MlaShape m = rt::mlaShape(d);
  const int64_t heads = d.numHeads / tp, q = heads * m.queryDim(),
                ctx = heads * m.vHeadDim;
  const int64_t kvLatent = m.kvLoraRank + m.posEmbDim;
  if (m.qLoraRank > 0) {
    addLinear(c, t, h, m.qLoraRank);
    addLinear(c, t, m.qLoraRank, q);
  } else {
    addLinear(c, t, h, q);
  }
  addLinear(c, t, h, kvLatent);
  addLinear(c, t, m.kvLoraRank, heads * (m.qkHeadDim + m.vHeadDim));
  // QK^T over qk + pe channels and PV over v channels, per head and pair;
  // backward costs 2x forward.
  const int64_t core =
      s.microBatchSize * heads * pairs2 * (m.queryDim() + m.vHeadDim);
  c.forwardFlops += core;
  c.backwardInputFlops += 2 * core;
  addLinear(c, t, ctx, h);
  // Kept (besides the residual stream's two): the latents (and their
  // normed copies with qk_layernorm), q, k and v, the context, and the
  // softmax log-sum-exp per head and token.
  const int64_t latents = (m.qLoraRank + kvLatent) +
                          (m.qkLayernorm ? m.qLoraRank + m.kvLoraRank : 0);
  c.activationBytes +=
      t * (latents + 2 * q + 2 * ctx) * e + t * heads * int64_t(sizeof(float));
  c.params = rt::rankNumel(m.params(1), tp);
}

/// A 'D' layer: MLA whose core scores only each query's top-k keys (of its
/// causal prefix: sum over t < s of min(k, t + 1) pairs), and the indexer,
/// whole on every tensor-parallel rank (MLA's heads split). The indexer's
/// inputs are detached: its linears have forward and weight-gradient
/// GEMMs, no input gradient. Its dense causal scores cost
/// b nI dI s^2 (s^2 / 2 pairs of 2 nI dI), their gradient twice that; the
/// KL loss's target is the dense causal attention of a rank's heads, its
/// scores b heads (qk + pe) s^2 more forward FLOPs.
void addSparseAttention(ItemCost &c, const ModelDims &d,
                        const CostSettings &s) {
  const int64_t S = s.seqLength, k = std::min(d.dsaIndexerTopk, S);
  const int64_t pairs2 = k >= S ? S * S : k * (k + 1) + 2 * (S - k) * k;
  addLatentAttention(c, d, s, pairs2);
  const rt::DsaShape shape = rt::dsaShape(d);
  const int64_t t = s.tokens(), e = s.activationBytesPerElement(),
                b = s.microBatchSize;
  const int64_t nI = shape.indexerHeads, dI = shape.indexerHeadDim;
  for (auto [in, out] : {std::pair{shape.indexerQueryIn(), nI * dI},
                         {d.hidden, dI},
                         {d.hidden, nI}}) {
    c.forwardFlops += 2 * t * in * out;
    c.backwardWeightFlops += 2 * t * in * out;
  }
  const int64_t scores = b * nI * dI * S * S;
  c.forwardFlops +=
      scores + b * (d.numHeads / s.tp) * shape.mla().queryDim() * S * S;
  c.backwardInputFlops += 2 * scores;
  // Kept: the indexer's queries, its key before and after k_norm, the
  // head weights; in float, the KL loss's gradient of the dense causal
  // scores (s^2 per sample) and every query's top-k key indices.
  c.activationBytes += t * (nI * dI + 2 * dI + nI) * e +
                       b * S * S * int64_t(sizeof(float)) +
                       t * k * int64_t(sizeof(int32_t));
  c.params = rt::rankNumel(shape.params(1), s.tp);
}

} // namespace

int64_t ItemCost::totalFlops() const {
  return saturatingAdd(saturatingAdd(forwardFlops, backwardInputFlops),
                       backwardWeightFlops);
}

ItemCost &ItemCost::operator+=(const ItemCost &o) {
  for (auto [sum, part] : {std::pair{&params, o.params},
                           {&forwardFlops, o.forwardFlops},
                           {&backwardInputFlops, o.backwardInputFlops},
                           {&backwardWeightFlops, o.backwardWeightFlops},
                           {&activationBytes, o.activationBytes}})
    *sum = saturatingAdd(*sum, part);
  sendBytes = o.sendBytes;
  modelled = modelled && o.modelled;
  return *this;
}

int64_t selectiveRecomputeFlops(char symbol, const ModelDims &d,
                                const CostSettings &s,
                                RecomputeModuleSet modules) {
  auto has = [&](RecomputeModule m) { return (modules & moduleBit(m)) != 0; };
  if (symbol == '*' && has(RecomputeModule::CoreAttn))
    return attentionCoreFlops(d, s);
  if (symbol == '-' && has(RecomputeModule::Mlp))
    return 2 * s.tokens() * d.hidden * upWidth(d, d.ffnHidden / s.tp);
  if (symbol == 'E' && has(RecomputeModule::Moe))
    return layerCost('E', d, s)->forwardFlops;
  return 0;
}

std::optional<ItemCost> layerCost(char symbol, const ModelDims &d,
                                  const CostSettings &s) {
  const int64_t t = s.tokens(), h = d.hidden, tp = s.tp;
  const int64_t e = s.activationBytesPerElement();
  // The layer's input and its normed copy: residual-stream tensors.
  const int64_t stream = s.streamBytes(h);
  ItemCost c;
  c.name = std::string(1, symbol);
  c.sendBytes = stream;
  switch (symbol) {
  case 'M': {
    // A rank's tp-th of the heads and groups (tensorParallelShard).
    const int64_t inner = d.mambaInner() / tp,
                  groupsState = d.mambaNumGroups / tp * d.mambaState;
    const int64_t heads = d.mambaNumHeads / tp;
    const int64_t inProj =
        2 * inner + 2 * groupsState + heads; // z, x, B, C, dt
    const int64_t convChannels = inner + 2 * groupsState;
    addLinear(c, t, h, inProj);
    // Depthwise causal conv (weight and bias) and SiLU.
    c.forwardFlops += 2 * t * convChannels * d.mambaConvWidth;
    c.backwardInputFlops += 2 * t * convChannels * d.mambaConvWidth;
    c.backwardWeightFlops += 2 * t * convChannels * d.mambaConvWidth;
    // SSD recurrence: state update dt*B*x (2*T*inner*N) and output C*h
    // (2*T*inner*N); its backward is all input-gradient work (2x forward).
    const int64_t scan = 4 * t * inner * d.mambaState;
    c.forwardFlops += scan;
    c.backwardInputFlops += 2 * scan;
    addLinear(c, t, inner, h);
    // Kept: norm input, in_proj input, in_proj output, conv output, scan
    // output, gated-norm output.
    c.activationBytes =
        2 * stream + t * (inProj + convChannels + 2 * inner) * e;
    c.params = rt::rankNumel(rt::mambaShape(d).params(1), tp);
    return c;
  }
  case 'G': {
    // A rank's tp-th of the key and value heads (tensorParallelShard).
    const rt::GdnShape g = std::get<rt::GdnShape>(
        rt::tensorParallelShard(rt::gdnShape(d), tp, false));
    const int64_t nv = g.valueHeads, dk = g.keyHeadDim, dv = g.valueHeadDim;
    addLinear(c, t, h, g.inProj());
    // Depthwise causal conv (no bias) over [q k v], and SiLU.
    const int64_t conv = 2 * t * g.convChannels() * g.convWidth;
    c.forwardFlops += conv;
    c.backwardInputFlops += conv;
    c.backwardWeightFlops += conv;
    // The chunked gated delta rule (WY form, chunks of C = 64 tokens, the
    // last of a sequence shorter), per value head and chunk of c tokens: the
    // lower-triangular products K K^T, W = A(b K), U = A(b V), Q K^T and
    // its product with the new values, c^2 (3 dk + 2 dv) multiply-adds; the
    // inverse of the unit-lower-triangular A by forward substitution,
    // c^3 / 6; and three dk x dv state products (the new values U - W S,
    // the output Q S, the state update K^T V'), 3 c dk dv. The backward is
    // all input-gradient work and costs 2x forward.
    auto chunkFlops = [&](int64_t n) {
      return 2 * (n * n * (3 * dk + 2 * dv) + n * n * n / 6 + 3 * n * dk * dv);
    };
    const int64_t chunk = rt::GdnShape::kChunk;
    const int64_t whole = s.seqLength / chunk, rest = s.seqLength % chunk;
    const int64_t chunks = s.microBatchSize * (whole + (rest > 0 ? 1 : 0));
    const int64_t rule =
        s.microBatchSize * nv * (whole * chunkFlops(chunk) + chunkFlops(rest));
    c.forwardFlops += rule;
    c.backwardInputFlops += 2 * rule;
    addLinear(c, t, g.valueWidth(), h);
    // Kept: norm input, in_proj input, in_proj output, conv output, the
    // rule's output, the gated-norm output, and each chunk's starting state
    // (dk x dv per value head, in float).
    c.activationBytes =
        2 * stream +
        t * (g.inProj() + g.convChannels() + 2 * g.valueWidth()) * e +
        chunks * nv * dk * dv * int64_t(sizeof(float));
    c.params = rt::rankNumel(rt::gdnShape(d).params(1), tp);
    return c;
  }
  case '*': {
    // A rank's tp-th of the heads and of linear_qkv's rows; with fewer
    // query groups than ranks it holds one group's k and v, shared.
    const int64_t k = d.kvChannels(), q = d.numHeads / tp * k,
                  kv = std::max<int64_t>(d.numQueryGroups / tp, 1) * k,
                  rows = (d.numHeads + 2 * d.numQueryGroups) * k / tp;
    addLinear(c, t, h, rows);
    // Causal attention: QK^T and PV over the lower triangle, b*heads*s*s*k
    // multiply-adds each; backward recomputes nothing and costs 2x forward.
    const int64_t core = attentionCoreFlops(d, s);
    c.forwardFlops += core;
    c.backwardInputFlops += 2 * core;
    addLinear(c, t, q, h);
    // Kept: norm input, QKV input, Q/K/V, attention output, and the softmax
    // log-sum-exp per head and token (flash-style, no s*s probabilities).
    c.activationBytes = 2 * stream + t * (q + 2 * kv + q) * e +
                        t * (d.numHeads / tp) * int64_t(sizeof(float));
    c.params = rt::rankNumel(rt::attentionShape(d).params(1), tp);
    return c;
  }
  case '+':
    addLatentAttention(c, d, s, s.seqLength * s.seqLength);
    c.activationBytes += 2 * stream;
    return c;
  case 'D':
    addSparseAttention(c, d, s);
    c.activationBytes += 2 * stream;
    return c;
  case '-': {
    const int64_t ffn = d.ffnHidden / tp, up = upWidth(d, ffn);
    addLinear(c, t, h, up);
    addLinear(c, t, ffn, h);
    c.activationBytes = 2 * stream + t * (up + ffn) * e;
    c.params = rt::rankNumel(rt::mlpShape(d).params(1), tp);
    return c;
  }
  case 'E': {
    // Each expert's width split over etp ranks (tp by default:
    // tensorParallelShard), the experts over ep; every rank routes all the
    // microbatch's tokens with the replicated router. The allgather
    // dispatcher gathers the tokens of the etp x ep ranks (a tp-th of a
    // microbatch each with sequence parallelism, else all of it); of their
    // routed rows a rank's experts take an ep-th (balanced routing).
    const int64_t etp = s.expertTensorParallel(), ep = s.ep;
    const int64_t f = d.expertFfnHidden() / etp, up = upWidth(d, f),
                  k = d.moeTopK;
    const int64_t rows = t * k * etp / s.streamShards();
    addLinear(c, t, h, d.numExperts); // router
    // A capacity below 1 caps the rows an expert runs (balanced routing:
    // each would get its even share) and keeps (Megatron-LM's dispatcher
    // keeps the rows it dispatched; hypipe-run's exact layouts hold a
    // bound: MoeShape::heldRows).
    const int64_t run =
        s.capacityFactor > 0 && s.capacityFactor < 1
            ? int64_t(std::ceil(double(rows) * s.capacityFactor))
            : rows;
    ItemCost expert;
    addLinear(expert, run, h, up);
    addLinear(expert, run, f, h);

    c.forwardFlops += expert.forwardFlops;
    c.backwardInputFlops += expert.backwardInputFlops;
    c.backwardWeightFlops += expert.backwardWeightFlops;
    // Kept: the input (the rank's rows), the normed input whole, the
    // probabilities, and per routed row its input, fc1 output and
    // activation.
    c.activationBytes =
        stream + t * (h + d.numExperts) * e + run * (h + up + f) * e;
    // The norm and the router whole; the rank's ep-th of the experts, an
    // etp-th of each.
    const rt::MoeShape whole = rt::moeShape(d);
    const int64_t expertParams =
        rt::rankNumel(whole.params(1), 1) - h - d.numExperts * h;
    c.params = h + d.numExperts * h + expertParams / ep / etp;
    return c;
  }
  default:
    return std::nullopt;
  }
}

ItemCost embeddingCost(const ModelDims &d, const CostSettings &s) {
  ItemCost c;
  c.name = "embedding";
  c.params = rt::rankNumel(rt::embeddingShape(d).params(), s.tp);
  // A lookup; its weight gradient is a scatter-add of T*H, of which each
  // rank adds the tokens in its tp-th of the vocabulary (a tp-th of them
  // on average).
  c.backwardWeightFlops = s.tokens() * d.hidden / s.tp;
  c.activationBytes = s.tokens() * 8; // the token ids
  c.sendBytes = s.streamBytes(d.hidden);
  return c;
}

ItemCost headCost(const ModelDims &d, const CostSettings &s) {
  ItemCost c;
  c.name = "head";
  const int64_t t = s.tokens();
  const int64_t vocab = d.vocab / s.tp; // vocabulary-parallel
  addLinear(c, t, d.hidden, vocab);
  // A tied head names the embedding's table, which the embedding counts.
  c.params = rt::rankNumel(rt::headShape(d).params(), s.tp) -
             (d.tieEmbeddings ? vocab * d.hidden : 0);
  // Kept: final-norm input, output-layer input (residual-stream tensors),
  // the rank's logits for the softmax, unless the linear cross-entropy
  // makes them again in the input gradient, which takes the weight
  // gradient from them too (W has nothing left).
  c.activationBytes = 2 * s.streamBytes(d.hidden);
  if (s.linearCrossEntropy) {
    const int64_t again = 2 * t * d.hidden * vocab;
    c.backwardInputFlops += again + c.backwardWeightFlops;
    c.backwardWeightFlops = 0;
  } else {
    // Megatron-LM's vocabulary-parallel cross-entropy upcasts the logits
    // and keeps their fp32 softmax for the backward, in a bf16 run too
    // (hypipe-run keeps the bf16 logits: its own memory is the buffer
    // layouts', not this).
    c.activationBytes += t * vocab * int64_t(sizeof(float));
  }
  return c;
}

ItemCost mtpDepthCost(const ModelDims &d, const CostSettings &s) {
  ItemCost c;
  c.name = "mtp";
  const int64_t t = s.tokens(), h = d.hidden, e = s.activationBytesPerElement();
  addLinear(c, t, 2 * h, h);
  // No kernel yet, so no layer shape: the 2H -> H projection, two input
  // norms and the final norm, counted here.
  c.params = 2 * h * h + 2 * h + h;
  ItemCost output = headCost(d, s);
  c.forwardFlops += output.forwardFlops;
  c.backwardInputFlops += output.backwardInputFlops;
  c.backwardWeightFlops += output.backwardWeightFlops;
  c.activationBytes = t * (2 * h + 2 * h) * e + output.activationBytes;
  return c;
}

std::vector<ItemCost> modelItems(const ModelDims &d, const CostSettings &s,
                                 const std::string &layers,
                                 const std::string &mtpLayers, int mtpDepths) {
  std::vector<ItemCost> items;
  items.push_back(embeddingCost(d, s));
  // Every layer of a kind costs the same: each kind is costed once.
  std::map<char, std::optional<ItemCost>> kinds;
  for (char symbol : layers) {
    auto known = kinds.find(symbol);
    if (known == kinds.end())
      known = kinds.emplace(symbol, layerCost(symbol, d, s)).first;
    if (const std::optional<ItemCost> &c = known->second) {
      items.push_back(*c);
    } else {
      ItemCost unknown;
      unknown.name = std::string(1, symbol);
      unknown.modelled = false;
      unknown.sendBytes = s.streamBytes(d.hidden);
      items.push_back(unknown);
    }
  }
  ItemCost head = headCost(d, s);
  for (int depth = 0; depth < mtpDepths; ++depth) {
    head += mtpDepthCost(d, s);
    for (char symbol : mtpLayers) {
      if (auto c = layerCost(symbol, d, s))
        head += *c;
      else
        head.modelled = false;
    }
  }
  head.sendBytes = 0;
  items.push_back(head);
  return items;
}

double trainingBytesPerParameter(bool bf16, int64_t optimizerShards) {
  const double shards = double(std::max<int64_t>(1, optimizerShards));
  return bf16 ? 2 + 4 + 12 / shards : 4 + 4 + 8 / shards;
}

double runtimeBytesPerParameter(bool bf16, int64_t optimizerShards) {
  return trainingBytesPerParameter(false, optimizerShards) + (bf16 ? 4 : 0);
}

ExpertShardFloats
expertShardFloats(int64_t params,
                  const std::vector<std::pair<int64_t, int64_t>> &expertSlots,
                  int64_t dp, int64_t replicas, int64_t bucketFloats) {
  if (replicas <= 1 || dp % replicas != 0 || params <= 0)
    return {};
  ExpertShardFloats out;
  int64_t most = 0;
  for (int64_t d = 0; d < dp; ++d) {
    const rt::ExpertShardLayout x(rt::ShardLayout(params, dp, d, bucketFloats),
                                  expertSlots, replicas, dp / replicas,
                                  d / replicas);
    most = std::max(most, x.momentsFloats());
    out.scratch = x.scratchFloats();
  }
  // Two moments each; the bytes per parameter hold 2 params / dp.
  out.moments = 2 * most - 2 * params / dp;
  return out;
}

int64_t RankMemory::total() const {
  return saturatingAdd(saturatingAdd(parameters, activations), buffers);
}

RankMemory rankMemory(int64_t params, double bytesPerParameter,
                      double activationBytes, double inFlight,
                      int64_t fixedBytes) {
  return {saturatingCeil(double(params) * bytesPerParameter),
          saturatingCeil(inFlight * activationBytes), fixedBytes};
}

int64_t rankMemoryEstimate(int64_t params, double bytesPerParameter,
                           double activationBytes, double inFlight,
                           int64_t fixedBytes) {
  return rankMemory(params, bytesPerParameter, activationBytes, inFlight,
                    fixedBytes)
      .total();
}

double peakMicrobatchesInFlight(schedule::ScheduleKind schedule, int64_t pp,
                                int64_t vpp, int64_t microbatches,
                                int64_t ppRank) {
  using schedule::ScheduleKind;
  double m = static_cast<double>(microbatches);
  switch (schedule) {
  case ScheduleKind::GPipe:
    return m;
  case ScheduleKind::Interleaved1F1B: {
    // Megatron's warm-up: (pp - rank - 1) * 2 + (vpp - 1) * pp chunks, plus
    // the one in steady state; a chunk is 1/vpp of a microbatch here.
    double chunks =
        static_cast<double>((pp - ppRank - 1) * 2 + (vpp - 1) * pp + 1);
    return std::min(chunks, m * static_cast<double>(vpp)) /
           static_cast<double>(vpp);
  }
  case ScheduleKind::DualPipeV: {
    // Its phases hold different counts on each rank: read the peak off the
    // generated order (a forward takes a stage activation, B or W frees
    // it; two stages per rank, so a chunk is half a microbatch).
    auto built = schedule::buildSchedule(
        {schedule::ScheduleKind::DualPipeV, pp, 2, microbatches});
    if (!built) {
      (void)built.takeError();
      return std::min(static_cast<double>(pp), m);
    }
    int64_t live = 0, peak = 0;
    for (const schedule::Action &a : built->ranks[size_t(ppRank)]) {
      if (a.op == schedule::Op::F)
        peak = std::max(peak, ++live);
      else if (a.op == schedule::Op::B || a.op == schedule::Op::W)
        --live;
    }
    return static_cast<double>(peak) / 2.0;
  }
  case ScheduleKind::ZbV:
  case ScheduleKind::ZbH1:
    // zb-h1's rank r delays each W by r steps: a W frees its activations,
    // so every rank holds as many as rank 0 (pp); zbv likewise.
    return std::min(static_cast<double>(pp), m);
  case ScheduleKind::OneFOneB:
    // Rank r holds pp - r microbatches at the end of warm-up.
    return std::min(static_cast<double>(pp - ppRank), m);
  }
  return m;
}

} // namespace hypipe
