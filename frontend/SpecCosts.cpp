//===- SpecCosts.cpp - a spec's costs per stage and rank ------------------===//
#include "frontend/SpecCosts.h"

#include "core/model/BufferLayouts.h"
#include "core/model/LayerShapes.h"
#include "core/model/TensorParallel.h"
#include "core/partition/AutoPartition.h"
#include "core/schedule/Buffers.h"
#include "core/schedule/CommKind.h"
#include "core/schedule/Schedule.h"

#include <fmt/format.h>

#include <algorithm>

namespace hypipe {

namespace {

/// Gradients are reduced in fp32, whatever the model trains in.
constexpr double kGradientBytes = sizeof(float);

/// The costs of each stage: its items summed, and what it sends on.
std::vector<ItemCost> stageCosts(const std::vector<ItemCost> &items,
                                 const PatternPlacement &placement) {
  const int64_t last = static_cast<int64_t>(placement.stages.size()) - 1;
  auto ranges = stageItemRanges(placement);
  std::vector<ItemCost> stageCost(placement.stages.size());
  for (const PatternStage &s : placement.stages) {
    auto [begin, end] = ranges[s.index];
    ItemCost &c = stageCost[s.index];
    for (int64_t i = begin; i < end; ++i)
      c += items[i];
    c.sendBytes = s.index == last
                      ? 0
                      : items[std::max<int64_t>(begin, end - 1)].sendBytes;
    if (s.index != last &&
        begin == end) // an empty stage passes the activations on
      c.sendBytes = items[0].sendBytes;
  }
  return stageCost;
}

/// What selective recompute runs again of stage `st` before its layers'
/// input gradients: the named modules' forward in each main layer, and in
/// each MTP depth's layers on the last stage, as (measured kind, cost).
std::vector<std::pair<std::string, ItemCost>>
selectivelyRecomputedParts(const ModelSpec &spec, const PatternStage &st) {
  std::vector<std::pair<std::string, ItemCost>> parts;
  const RecomputeModuleSet modules =
      selectiveModuleSet(spec.training.recompute);
  const CostSettings s = spec.partitionRequest().settings;
  std::string layers = st.layers;
  if (st.index + 1 == int64_t(spec.placement.stages.size()))
    for (int depth = 0; depth < spec.pattern.mtpDepths; ++depth)
      layers += spec.pattern.mtp;
  for (char symbol : layers) {
    ItemCost c;
    c.forwardFlops = selectiveRecomputeFlops(symbol, spec.dims, s, modules);
    if (c.forwardFlops > 0)
      parts.push_back({measuredKindOf(std::string(1, symbol)), c});
  }
  return parts;
}

/// What recompute runs again of stage `st` before its input gradient. Full
/// (pipe-recompute's chunks): each recomputed main layer, and on the last
/// stage each MTP depth's input projection and layers (not its pass through
/// the output layer); selective: the named modules (above); as (measured
/// kind, cost); a layer the cost model does not cost has no cost. Empty
/// without recompute.
std::vector<std::pair<std::string, ItemCost>>
recomputedParts(const ModelSpec &spec, const PatternStage &st) {
  std::vector<std::pair<std::string, ItemCost>> parts;
  const RecomputeSpec &rc = spec.training.recompute;
  if (rc.granularity == RecomputeGranularity::Selective)
    return selectivelyRecomputedParts(spec, st);
  const ModelDims &d = spec.dims;
  const CostSettings s = spec.partitionRequest().settings;
  auto addLayer = [&](char symbol) {
    if (auto c = layerCost(symbol, d, s))
      parts.push_back({measuredKindOf(std::string(1, symbol)), *c});
  };
  for (auto [begin, end] : recomputeChunks(rc, int64_t(st.layers.size())))
    for (int64_t i = begin; i < end; ++i)
      addLayer(st.layers[size_t(i)]);
  if (!rc.full() || st.index + 1 != int64_t(spec.placement.stages.size()))
    return parts;
  for (int depth = 0; depth < spec.pattern.mtpDepths; ++depth) {
    ItemCost projection = mtpDepthCost(d, s);
    projection.forwardFlops -= headCost(d, s).forwardFlops;
    parts.push_back({"mtp", projection});
    for (char symbol : spec.pattern.mtp)
      addLayer(symbol);
  }
  return parts;
}

/// Each stage's forward, input-gradient and weight-gradient seconds for one
/// microbatch from measured layer costs (stepCosts).
struct StageSeconds {
  std::vector<double> f, i, w; ///< by stage index
  /// Recompute's forward again, part of the input gradient's (in `i`).
  std::vector<double> recompute;
};

Expected<StageSeconds> measuredStageSeconds(const ModelSpec &spec,
                                            const MeasuredCosts &measured) {
  const AutoPartitionRequest request = spec.partitionRequest();
  const ModelDims &d = request.dims;
  const CostSettings &s = request.settings;
  const int64_t tokens = s.tokens();
  StageSeconds out;
  std::string missing;
  // Adds the seconds of one part of kind `kind` costing `c`.
  auto add = [&](size_t stage, const std::string &kind, const ItemCost &c) {
    const double flops[3] = {double(c.forwardFlops),
                             double(c.backwardInputFlops),
                             double(c.backwardWeightFlops)};
    std::vector<double> *passes[3] = {&out.f, &out.i, &out.w};
    for (int p = 0; p < 3; ++p) {
      auto t = measuredSeconds(measured, kind, p, flops[p], tokens);
      if (!t) {
        missing = kind;
        return;
      }
      (*passes[p])[stage] += *t;
    }
  };
  auto addLayer = [&](size_t stage, char symbol) {
    if (auto c = layerCost(symbol, d, s))
      add(stage, measuredKindOf(std::string(1, symbol)), *c);
    else
      missing = std::string(1, symbol);
  };
  const size_t n = spec.placement.stages.size();
  out.f.assign(n, 0.0);
  out.i.assign(n, 0.0);
  out.w.assign(n, 0.0);
  out.recompute.assign(n, 0.0);
  for (const PatternStage &st : spec.placement.stages) {
    const size_t i = size_t(st.index);
    for (const auto &[kind, c] : recomputedParts(spec, st)) {
      auto t =
          measuredSeconds(measured, kind, 0, double(c.forwardFlops), tokens);
      if (!t)
        missing = kind;
      else
        out.recompute[i] += *t;
    }
    out.i[i] += out.recompute[i];
    if (st.index == 0)
      add(i, "embedding", embeddingCost(d, s));
    for (char symbol : st.layers)
      addLayer(i, symbol);
    if (i + 1 == n) {
      add(i, "head", headCost(d, s));
      for (int depth = 0; depth < request.mtpDepths; ++depth) {
        add(i, "mtp", mtpDepthCost(d, s));
        for (char symbol : request.mtpLayers)
          addLayer(i, symbol);
      }
    }
    if (!missing.empty())
      return Error(Problem{
          fmt::format("the measured costs have no '{}' layers, which this "
                      "spec has",
                      missing),
          "measure a spec with every layer kind of this one (hypipe train "
          "SPEC --costs-out FILE)"});
  }
  return out;
}

} // namespace

namespace {

/// What pipe-recompute does with a part of a stage (passes/lowering/
/// Recompute.cpp): a main layer is recomputed in its chunk, an MTP depth's
/// input projection and layers as the depth's one chunk, the embedding, the
/// head and each MTP output never.
enum class SavedRole { Main, MtpDepth, Kept };

/// One part's saved floats for a microbatch. Full recompute moves all of a
/// recomputed part's floats to the recompute buffer; selective recompute the
/// `dropped` ones of its named modules (LayerShapes.h, recomputedFloats).
struct SavedPart {
  SavedRole role = SavedRole::Kept;
  int64_t floats = 0;
  int64_t dropped = 0;
  bool wholeMoe = false; ///< drops a MoE layer's moe module (rc0, rc1)
  /// A bf16 run's packed floats of what it keeps (rt::packedFloats).
  int64_t packed = 0;
};

/// `parts` (a stage's, in order) placed as pipe-recompute places them under
/// `spec`: the recomputed parts' floats in the recompute buffer, the rest
/// and one checkpoint of `kept` floats (the rank's rows) per chunk of main
/// layers in the saved buffer, and two more slots of `activation` floats
/// (whole) of workspace (rc0, rc1) where the stage recomputes anything.
void placeSaved(const std::vector<SavedPart> &parts, const RecomputeSpec &spec,
                int64_t activation, int64_t kept, bool bf16,
                schedule::StageBuffers &b) {
  if (spec.granularity == RecomputeGranularity::Selective) {
    int64_t all = 0, again = 0, packed = 0;
    bool slots = false;
    for (const SavedPart &p : parts) {
      all += p.floats;
      again += p.dropped;
      packed += p.packed;
      slots |= p.wholeMoe;
    }
    b.savedFloats = all - again;
    b.stashFloats = bf16 ? packed : 0;
    b.recomputeFloats = again;
    if (slots)
      b.workspaceFloats += 2 * activation;
    return;
  }
  std::vector<int64_t> mains;
  for (const SavedPart &p : parts)
    if (p.role == SavedRole::Main)
      mains.push_back(p.floats);
  const auto chunks = recomputeChunks(spec, int64_t(mains.size()));
  std::vector<bool> recomputed(mains.size(), false);
  for (auto [begin, end] : chunks)
    for (int64_t i = begin; i < end; ++i)
      recomputed[size_t(i)] = true;
  int64_t all = 0, again = 0, packed = 0;
  size_t main = 0;
  for (const SavedPart &p : parts) {
    all += p.floats;
    const bool isMain = p.role == SavedRole::Main;
    if ((isMain && recomputed[main]) ||
        (spec.full() && p.role == SavedRole::MtpDepth))
      again += p.floats;
    else
      packed += p.packed;
    main += isMain;
  }
  const bool depths =
      spec.full() && std::any_of(parts.begin(), parts.end(), [](auto &p) {
        return p.role == SavedRole::MtpDepth;
      });
  b.savedFloats = all - again + int64_t(chunks.size()) * kept;
  // Each chunk's checkpoint, the rank's rows of an activation.
  b.stashFloats =
      bf16 ? packed + int64_t(chunks.size()) * rt::packedBytes(kept, true) / 4
           : 0;
  b.recomputeFloats = again;
  if (!chunks.empty() || depths)
    b.workspaceFloats += 2 * activation;
}

} // namespace

std::optional<rt::LayerShape> patternLayerShape(const ModelSpec &spec,
                                                char symbol) {
  const ModelDims &d = spec.dims;
  switch (symbol) {
  case 'M':
    return rt::mambaShape(d);
  case '*':
    return rt::attentionShape(d, spec.positionEmbedding == "rope");
  case '-':
    return rt::mlpShape(d);
  case 'E': {
    // An expert grid that fills the tensor-parallel group or m data-
    // parallel replicas' is hypipe-run's (docs/expert-parallel.md); the
    // others are costed by layerCost only.
    rt::MoeShape s = rt::moeShape(d);
    const ParallelSpec &par = spec.parallel;
    // (A grid the experts do not divide is the spec's error, at its key.)
    if (par.ep > 1 && (par.etp * par.ep) % par.tp == 0 &&
        s.experts % par.ep == 0 && s.ffn % par.etp == 0) {
      s.expertRanks = par.ep;
      s.expertTp = par.etp;
      s.groupReplicas = par.etp * par.ep / par.tp;
    }
    // The capacity sizes the routed rows a rank keeps (heldRows), counted
    // per sequence shard as the kernel plan does (KernelPlan.cpp).
    s.capacityFactor = spec.moeExpertCapacityFactor.value_or(0.0);
    s.dropByPosition = spec.moeTokenDropPolicy == "position";
    s.capacityBlocks = par.sequenceParallel ? par.tp : 1;
    const rt::LayerGroup group =
        rt::layerGroupOf(s, par.tp, par.sequenceParallel);
    s.allToAll = rt::moeAllToAll(spec.moeDispatcher == MoeDispatcher::AllToAll,
                                 group.size, group.sequenceParallel);
    return s;
  }
  case 'G':
    return rt::gdnShape(d);
  case '+': // the sizes; its rotary settings change no buffer
    return rt::mlaShape(d);
  case 'D': {
    rt::DsaShape s = rt::dsaShape(d);
    s.seq = spec.training.seqLength;
    return s;
  }
  default:
    return std::nullopt;
  }
}

namespace {

/// The elements of a [tokens, hidden] activation one rank keeps between
/// layers: a tp-th with sequence parallelism (a checkpoint's).
int64_t streamFloats(const ModelSpec &spec) {
  return rt::rankActivationFloats(
      spec.training.microBatchSize * spec.training.seqLength, spec.dims.hidden,
      spec.parallel.tp, spec.parallel.sequenceParallel);
}

/// The elements of an activation buffer (the workspace's slots, the
/// stages' inputs and outputs): [tokens, hidden] whole also with sequence
/// parallelism, where a row-parallel layer writes its partial output of
/// every token before the reduce-scatter (StageInterpreter.h).
int64_t slotFloats(const ModelSpec &spec) {
  return spec.training.microBatchSize * spec.training.seqLength *
         spec.dims.hidden;
}

} // namespace

std::optional<schedule::StageBuffers> stageBuffers(const ModelSpec &spec,
                                                   const PatternStage &stage) {
  const ModelDims &d = spec.dims;
  const rt::TokenShape tokens{spec.training.microBatchSize,
                              spec.training.seqLength};
  const rt::Target target = spec.training.target;
  const bool bf16 = spec.training.dtype == TrainingPrecision::Bf16;
  const int64_t tp = spec.parallel.tp;
  schedule::StageBuffers b;
  b.stage = stage.index;
  int64_t scratch = 0;
  std::vector<SavedPart> parts;
  const RecomputeModuleSet named = selectiveModuleSet(spec.training.recompute);
  // A rank holds its tp-th of each split parameter and all of each
  // replicated one; its kernels' tensors are sized for the shard's shape.
  // The rank's expert slots in the stage's buffer, laid out as the
  // compiler lays it out: layer after layer, each layer's tensors at
  // paramOffsets.
  std::vector<std::pair<int64_t, int64_t>> expertSlots;
  auto add = [&](const rt::LayerShape &whole, SavedRole role) {
    const std::vector<rt::ParamSpec> params = rt::paramsOf(whole, 1);
    const std::vector<int64_t> at = rt::paramOffsets(params, tp);
    for (size_t k = 0; k < params.size(); ++k)
      if (params[k].expertRank == 0)
        expertSlots.push_back(
            {b.params + at[k],
             b.params + at[k] + rt::paramNumel(params[k], tp)});
    b.params += rt::rankNumel(params, tp);
    const rt::LayerShape shard =
        rt::tensorParallelShard(whole, tp, spec.parallel.sequenceParallel);
    const RecomputeModuleSet drops =
        named & rt::selectiveModulesOf(rt::kindOf(shard));
    parts.push_back(
        {role, rt::savedFloatsOf(shard, tokens, target),
         rt::recomputedFloatsOf(shard, tokens, drops),
         (drops & moduleBit(RecomputeModule::Moe)) != 0,
         rt::packedFloats(rt::savedSpansOf(shard, tokens, drops), bf16)});
    scratch = std::max(scratch, rt::workspaceFloatsOf(shard, tokens, target));
  };
  bool hasMoe = false;
  auto addLayer = [&](char symbol, SavedRole role) {
    hasMoe |= symbol == 'E';
    std::optional<rt::LayerShape> shape = patternLayerShape(spec, symbol);
    if (shape)
      add(*shape, role);
    return shape.has_value();
  };
  const bool first = stage.index == 0,
             last = stage.index == spec.placement.pp * spec.placement.vpp - 1;
  if (first)
    add(rt::embeddingShape(d), SavedRole::Kept);
  for (char symbol : stage.layers)
    if (!addLayer(symbol, SavedRole::Main))
      return std::nullopt;
  if (last) {
    const int64_t lossChunk = spec.lossChunkRows(tokens.tokens());
    add(rt::headShape(d, lossChunk), SavedRole::Kept);
    // MTP runs in the stage of the output layer; each depth carries a copy
    // of the embedding table where the stage has none of its own (no
    // embedding, an untied head: KernelPlan.cpp's describeMtp).
    const bool tableHere = first || d.tieEmbeddings;
    for (int depth = 1; depth <= spec.pattern.mtpDepths; ++depth) {
      const rt::MtpInputShape in{d.vocab, d.hidden, depth, !tableHere};
      add(in, SavedRole::MtpDepth);
      for (char symbol : spec.pattern.mtp)
        if (!addLayer(symbol, SavedRole::MtpDepth))
          return std::nullopt;
      const rt::MtpOutputShape out{d.vocab, d.hidden, depth,
                                   spec.mtpLossScalingFactor, lossChunk};
      add(out, SavedRole::Kept);
    }
  }
  const int64_t activation = slotFloats(spec);
  b.workspaceFloats = scratch + 2 * activation;
  // A part per program layer (KernelPlan's: the embedding, the layers, the
  // head, each MTP depth's input, layers and output).
  b.checkFloats = schedule::routerCheckFloats(hasMoe, int64_t(parts.size()));
  const ParallelSpec &par = spec.parallel;
  if (par.distributedOptimizer && par.ep > 1 && par.etp * par.ep > tp) {
    std::sort(expertSlots.begin(), expertSlots.end());
    const ExpertShardFloats x =
        expertShardFloats(b.params, expertSlots, par.dp, par.etp * par.ep / tp,
                          kDefaultGradientBucketFloats);
    b.optimizerFloats = x.moments;
    b.scratchFloats = x.scratch;
  }
  placeSaved(parts, spec.training.recompute, activation, streamFloats(spec),
             bf16, b);
  return b;
}

std::optional<RuntimeBuffers>
runtimeBuffers(const ModelSpec &spec, const schedule::Schedule &programs) {
  const PatternPlacement &placement = spec.placement;
  RuntimeBuffers out;
  std::vector<std::vector<schedule::StageBuffers>> held(size_t(placement.pp));
  for (const PatternStage &s : placement.stages) {
    std::optional<schedule::StageBuffers> b = stageBuffers(spec, s);
    if (!b)
      return std::nullopt;
    held[size_t(s.ppRank)].push_back(*b);
    out.stages.push_back(*b);
  }
  const double perParameter = runtimeBytesPerParameter(
      spec.training.dtype == TrainingPrecision::Bf16,
      spec.parallel.distributedOptimizer ? spec.parallel.dp : 1);
  for (int64_t rank = 0; rank < placement.pp; ++rank) {
    out.peaks.push_back(schedule::rankBuffers(programs.ranks.at(size_t(rank)),
                                              placement.pp * placement.vpp));
    out.bytes.push_back(schedule::peakTensorBytes(
        held[size_t(rank)], out.peaks.back(), slotFloats(spec), perParameter));
  }
  return out;
}

SpecCosts specCosts(const ModelSpec &spec) {
  SpecCosts c;
  c.request = spec.partitionRequest();
  const AutoPartitionRequest &request = c.request;
  const PatternPlacement &placement = spec.placement;
  std::vector<ItemCost> items =
      modelItems(request.dims, request.settings, request.layers,
                 request.mtpLayers, request.mtpDepths);
  c.stageCost = stageCosts(items, placement);
  c.rankParams.assign(placement.pp, 0);
  for (const PatternStage &s : placement.stages)
    c.rankParams[s.ppRank] += c.stageCost[s.index].params;
  for (const RankMemory &memory : rankMemories(items, placement, request))
    c.rankMemory.push_back(memory.total());
  if (request.settings.tp == 1 && request.settings.expertGroup() == 1) {
    for (int64_t params : c.rankParams)
      c.totalParams += params;
  } else { // the rank figures are one tp (or ep) rank's: the model's whole
    CostSettings whole = request.settings;
    whole.tp = 1;
    whole.ep = 1;
    whole.etp = 0;
    for (const ItemCost &item :
         modelItems(request.dims, whole, request.layers, request.mtpLayers,
                    request.mtpDepths))
      c.totalParams += item.params;
  }
  c.exact = std::all_of(items.begin(), items.end(),
                        [](const ItemCost &item) { return item.modelled; });
  c.pinned = patternWithStages(spec.pattern, placement);
  if (auto programs = specPrograms(spec.parallel)) {
    c.runtime = runtimeBuffers(spec, *programs);
    if (c.runtime)
      c.rankRuntimeMemory = c.runtime->bytes;
  } else
    (void)programs.takeError(); // no programs: no runtime estimate
  return c;
}

Expected<schedule::Schedule> specPrograms(const ParallelSpec &par) {
  if (par.csvPrograms) {
    schedule::Schedule programs = *par.csvPrograms;
    schedule::insertCommunication(programs);
    return programs;
  }
  auto built = schedule::buildSchedule(
      {par.schedule, par.pp, par.vpp, par.microbatches, par.groupSize});
  if (!built)
    return built.takeError();
  schedule::insertCommunication(*built);
  return built;
}

double stepTokens(const ModelSpec &spec) {
  return double(spec.training.microBatchSize) *
         double(spec.training.seqLength) * double(spec.parallel.microbatches) *
         double(spec.parallel.dp);
}

namespace {

/// The cluster's communication of a step (StepModel::cluster): each stage
/// boundary's hand-off, each stage's gradient reduction, and what follows
/// it at the step's end.
void communicationCosts(const ModelSpec &spec,
                        const std::vector<ItemCost> &stageCost,
                        const Cluster &cluster, schedule::Costs &costs) {
  const auto &stages = spec.placement.stages;
  const int64_t dp = spec.parallel.dp, tp = spec.parallel.tp;
  for (size_t b = 0; b + 1 < stages.size(); ++b)
    costs.boundaryTransfer.push_back(
        cluster.pipelineLink(stages[b].ppRank, stages[b + 1].ppRank, dp, tp)
            .seconds(double(stageCost[b].sendBytes)));
  // Gradients are reduced in fp32 (Megatron forces it with bf16); the
  // distributed optimizer gathers the parameters the kernels read.
  const double paramBytes =
      spec.training.dtype == TrainingPrecision::Bf16 ? 2 : 4;
  costs.stageReduce.assign(stages.size(), 0.0);
  costs.stageBuckets.assign(stages.size(), 1);
  costs.stageAfterStep.assign(stages.size(), 0.0);
  for (const PatternStage &s : stages) {
    const Link &link = cluster.dataParallelLink(s.ppRank, dp, tp);
    const double params = double(stageCost[s.index].params);
    // hypipe-run's default buckets, started inside the last backward.
    costs.stageBuckets[s.index] = std::max<int64_t>(
        1, (stageCost[s.index].params + kDefaultGradientBucketFloats - 1) /
               kDefaultGradientBucketFloats);
    if (spec.parallel.distributedOptimizer) {
      costs.stageReduce[s.index] =
          reduceScatterSeconds(dp, params * kGradientBytes, link);
      costs.stageAfterStep[s.index] =
          allGatherSeconds(dp, params * paramBytes, link);
    } else {
      costs.stageReduce[s.index] =
          allReduceSeconds(dp, params * kGradientBytes, link);
    }
  }
  // The tied embedding's gradient (a rank's tp-th of the vocabulary) is
  // summed over its two pipeline ranks.
  const PatternStage &first = stages.front(), &last = stages.back();
  if (spec.dims.tieEmbeddings && first.ppRank != last.ppRank) {
    const double seconds = allReduceSeconds(
        2,
        double(spec.dims.vocab / tp) * double(spec.dims.hidden) *
            kGradientBytes,
        cluster.pipelineLink(first.ppRank, last.ppRank, dp, tp));
    costs.stageAfterStep[first.index] += seconds;
    costs.stageAfterStep[last.index] += seconds;
  }
}

/// Seconds one ring collective of `kind` over `tp` ranks takes of `bytes`.
double collectiveSeconds(rt::CollectiveKind kind, int64_t tp, double bytes,
                         const Link &link) {
  switch (kind) {
  case rt::CollectiveKind::AllReduce:
  case rt::CollectiveKind::AllReduceMax:
    return allReduceSeconds(tp, bytes, link);
  case rt::CollectiveKind::AllGather:
    return allGatherSeconds(tp, bytes, link);
  case rt::CollectiveKind::ReduceScatter:
    return reduceScatterSeconds(tp, bytes, link);
  case rt::CollectiveKind::AllToAll:
    return allToAllSeconds(tp, bytes, link);
  }
  return 0;
}

/// The seconds of the tensor-parallel collectives (collectivesOf) one
/// microbatch runs in stage `st`'s `pass`, on the tp group's link: each of
/// the whole tensor's bytes, an activation value in the training precision,
/// the cross-entropy's per-token statistics (one value a token) in fp32.
/// With full recompute the I also runs its recomputed layers' forward
/// collectives again. On an expert grid (parallel.ep, parallel.etp) the
/// MoE layers' run over its tp x ep group of etp x ep consecutive ranks
/// instead (Megatron-LM's allgather dispatcher: the tokens of the group's
/// ranks gathered, the outputs reduce-scattered back). Its alltoall
/// dispatcher (model.moe_token_dispatcher_type) moves a rank's routed rows
/// instead: an all-to-all over ep there and one back, between them an
/// all-gather over etp and a reduce-scatter back (balanced routing: each
/// rank receives as many rows as it sends), in both the forward and the
/// backward's input pass.
double tensorParallelSeconds(const ModelSpec &spec, const PatternStage &st,
                             rt::StagePass pass, const Cluster &cluster) {
  const ParallelSpec &par = spec.parallel;
  const int64_t tp = par.tp;
  const bool expertGrid = par.expertParallel();
  const int64_t expertRanks = par.etp * par.ep;
  const double tokens =
      double(spec.training.microBatchSize) * double(spec.training.seqLength);
  const double valueBytes =
      spec.training.dtype == TrainingPrecision::Bf16 ? 2 : 4;
  double seconds = 0;
  auto add = [&](const rt::LayerShape &shape, rt::StagePass p) {
    const auto *moe = std::get_if<rt::MoeShape>(&shape);
    const bool onExperts = expertGrid && moe;
    const int64_t ranks = onExperts ? expertRanks : tp;
    if (ranks == 1)
      return;
    // (At ep 1 the alltoall dispatcher's all-to-all over ep moves nothing
    // and its all-gather over etp = tp every row.)
    if (moe && spec.moeDispatcher == MoeDispatcher::AllToAll &&
        (onExperts || moe->allToAll)) {
      if (p == rt::StagePass::BackwardWeight)
        return;
      const double local = tokens / double(par.sequenceParallel ? tp : 1);
      const double rowBytes =
          local * double(moe->topk) * double(moe->hidden) * valueBytes;
      const Link &link = cluster.tensorParallelLink(ranks);
      seconds +=
          2 * allToAllSeconds(par.ep, rowBytes, link) +
          allGatherSeconds(par.etp, rowBytes * double(par.etp), link) +
          reduceScatterSeconds(par.etp, rowBytes * double(par.etp), link);
      return;
    }
    // The group's whole tensor: every rank's tokens, a tp-th of a
    // microbatch each with sequence parallelism.
    const double rows = onExperts ? tokens * double(expertRanks) /
                                        double(par.sequenceParallel ? tp : 1)
                                  : tokens;
    const Link &link = cluster.tensorParallelLink(ranks);
    for (const rt::Collective &c :
         rt::collectivesOf(shape, ranks, onExperts || par.sequenceParallel, p))
      seconds +=
          collectiveSeconds(c.kind, ranks,
                            rows * double(c.perToken) *
                                (c.perToken == 1 ? sizeof(float) : valueBytes),
                            link);
  };
  if (st.index == 0)
    add(rt::embeddingShape(spec.dims), pass);
  for (char symbol : st.layers)
    if (auto shape = patternLayerShape(spec, symbol))
      add(*shape, pass);
  if (st.index + 1 == int64_t(spec.placement.stages.size()))
    add(rt::headShape(spec.dims,
                      spec.lossChunkRows(spec.training.seqLength *
                                         spec.training.microBatchSize)),
        pass);
  const RecomputeSpec &rc = spec.training.recompute;
  if (pass == rt::StagePass::BackwardInput && rc.full())
    for (auto [begin, end] : recomputeChunks(rc, int64_t(st.layers.size())))
      for (int64_t i = begin; i < end; ++i)
        if (auto shape = patternLayerShape(spec, st.layers[size_t(i)]))
          add(*shape, rt::StagePass::Forward);
  return seconds;
}

} // namespace

Expected<schedule::Costs> stepCosts(const ModelSpec &spec,
                                    const std::vector<ItemCost> &stageCost,
                                    const StepModel &model) {
  schedule::Costs costs;
  // The transport's model of transfers (parallel.comm).
  costs.setComm(spec.parallel.comm);
  for (const ItemCost &c : stageCost)
    costs.activationBytes.push_back(static_cast<double>(c.activationBytes));
  if (model.measured) {
    Expected<StageSeconds> seconds =
        measuredStageSeconds(spec, *model.measured);
    if (!seconds)
      return seconds.takeError();
    costs.stageF = seconds->f;
    costs.stageI = seconds->i;
    costs.stageW = seconds->w;
  } else {
    // Seconds at the device's rate, else GFLOP.
    const double perUnit =
        model.cluster ? model.cluster->flopsPerSecond(spec.training.dtype ==
                                                      TrainingPrecision::Bf16)
                      : 1e9;
    for (const ItemCost &c : stageCost) {
      costs.stageF.push_back(static_cast<double>(c.forwardFlops) / perUnit);
      costs.stageI.push_back(static_cast<double>(c.backwardInputFlops) /
                             perUnit);
      costs.stageW.push_back(static_cast<double>(c.backwardWeightFlops) /
                             perUnit);
    }
    // Recompute runs the recomputed parts' forward again in the I (or B).
    for (const PatternStage &st : spec.placement.stages)
      for (const auto &part : recomputedParts(spec, st))
        costs.stageI[size_t(st.index)] +=
            static_cast<double>(part.second.forwardFlops) / perUnit;
  }
  for (size_t i = 0; i < costs.stageI.size(); ++i)
    costs.stageB.push_back(costs.stageI[i] + costs.stageW[i]);
  if (model.cluster) {
    communicationCosts(spec, stageCost, *model.cluster, costs);
    if (spec.parallel.tp > 1 || spec.parallel.expertParallel())
      for (const PatternStage &st : spec.placement.stages) {
        costs.stageTensorF.push_back(tensorParallelSeconds(
            spec, st, rt::StagePass::Forward, *model.cluster));
        costs.stageTensorI.push_back(tensorParallelSeconds(
            spec, st, rt::StagePass::BackwardInput, *model.cluster));
      }
  }
  return costs;
}

double busiestRankCompute(const ModelSpec &spec, const schedule::Costs &costs) {
  std::vector<double> busy(size_t(spec.placement.pp), 0.0);
  for (const PatternStage &s : spec.placement.stages)
    busy[size_t(s.ppRank)] += (costs.cost(schedule::Op::F, s.index) +
                               costs.cost(schedule::Op::B, s.index)) *
                              double(spec.parallel.microbatches);
  return *std::max_element(busy.begin(), busy.end());
}

Expected<schedule::Simulation> simulateSpec(const ModelSpec &spec,
                                            const schedule::Costs &costs) {
  auto built = specPrograms(spec.parallel);
  if (!built)
    return built.takeError();
  // NCCL's links match by order: its programs receive in send order.
  if (costs.inOrderStreams)
    schedule::receiveInSendOrder(built->ranks);
  return schedule::simulate(*built, costs);
}

double communicationShare(const ModelSpec &spec, const schedule::Costs &costs,
                          double makespan) {
  if (makespan <= 0 || !costs.hasCommunication())
    return 0;
  // The same programs ran with communication: they run without it.
  Expected<schedule::Simulation> free =
      simulateSpec(spec, costs.withoutCommunication());
  if (!free) {
    (void)free.takeError();
    return 0;
  }
  return 1 - free->makespan / makespan;
}

} // namespace hypipe
