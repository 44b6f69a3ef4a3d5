//===- Artifact.cpp - load a compiled artifact (runtime side) -------------===//

#include "runtime/formats/Artifact.h"

#include "core/schedule/CommKind.h"

#include "core/data/Packing.h"
#include "core/data/Split.h"
#include "core/model/CostModel.h"
#include "core/model/ModelDims.h"
#include "core/model/SizeBounds.h"
#include "core/schedule/Buffers.h"
#include "core/schedule/Schedule.h"
#include "core/schedule/Simulate.h"
#include "runtime/formats/FileCheck.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>

using json = nlohmann::json;

namespace hypipe::rt {

namespace {

[[noreturn]] void fail(const std::string &message, const std::string &help) {
  throw RuntimeError(fmt::format("error: {}\nhelp: {}", message, help));
}

constexpr const char *kCorruptOrOther =
    "the manifest is corrupt or from another version of hypipe; recompile the "
    "artifact with `hypipe compile SPEC -o DIR`";

/// The enum a manifest's `name` (its `what`) parsed to; a name this
/// hypipe-run does not know (`knows` lists those it does) is refused.
template <typename Enum>
Enum knownName(std::optional<Enum> parsed, const std::string &path,
               const char *what, const std::string &name,
               const std::string &knows, const char *help) {
  if (!parsed)
    fail(fmt::format("'{}' has {} '{}'; this hypipe-run knows {}", path, what,
                     name, knows),
         help);
  return *parsed;
}

/// `key` of `j` if present, else `fallback`; a value of the wrong type is
/// refused like field()'s (json::value would throw a type_error instead).
template <typename T>
T optionalField(const json &j, const char *key, T fallback,
                const std::string &where);

/// Whether `v` is a JSON integer that T holds: converting a float or a
/// wider number to T would be undefined, and an edit can write either.
template <typename T> bool holdsInteger(const json &v) {
  using Limits = std::numeric_limits<T>;
  if (v.is_number_unsigned())
    return v.get<uint64_t>() <= uint64_t(Limits::max());
  return v.is_number_integer() && v.get<int64_t>() >= int64_t(Limits::min()) &&
         v.get<int64_t>() <= int64_t(Limits::max());
}

/// Whether get<T> converts `v` exactly (nlohmann refuses the other types).
template <typename T> bool convertsExactly(const json &v) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
    return holdsInteger<T>(v);
  else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
    return !v.is_array() ||
           std::all_of(v.begin(), v.end(), holdsInteger<int64_t>);
  else
    return true;
}

template <typename T>
T field(const json &j, const char *key, const std::string &where) {
  auto it = j.find(key);
  if (it == j.end())
    fail(fmt::format("{}: missing field '{}'", where, key),
         "the artifact is incomplete or from another tool; recompile it with "
         "`hypipe compile SPEC -o DIR`");
  try {
    if (!convertsExactly<T>(*it))
      fail(fmt::format("{}: field '{}' is {}, not a whole number in the "
                       "range it has",
                       where, key, it->dump().substr(0, 40)),
           "the manifest was edited or is corrupt; recompile the artifact "
           "with `hypipe compile SPEC -o DIR`");
    return it->get<T>();
  } catch (const json::exception &) {
    fail(fmt::format("{}: field '{}' has the wrong type", where, key),
         "recompile the artifact with `hypipe compile SPEC -o DIR`");
  }
}

template <typename T>
T optionalField(const json &j, const char *key, T fallback,
                const std::string &where) {
  return j.is_object() && j.contains(key) ? field<T>(j, key, where) : fallback;
}

[[noreturn]] void corruptProgram(const std::string &where,
                                 const std::string &what) {
  fail(fmt::format("{}: its kernel program is invalid: {}", where, what),
       kCorruptOrOther);
}

// A stage's kernel program (StageProgram.h) in the manifest: its layers
// with shapes and typed byte ranges, the workspace's slots and the three
// passes' calls.

json rangeJson(const TensorRange &r) {
  return {
      {"offset", r.offset}, {"bytes", r.bytes}, {"dtype", dtypeName(r.dtype)}};
}

TensorRange parseRange(const json &j, const std::string &where) {
  TensorRange r;
  r.offset = field<int64_t>(j, "offset", where);
  r.bytes = field<int64_t>(j, "bytes", where);
  std::string dtype = field<std::string>(j, "dtype", where);
  std::optional<DType> d = parseDType(dtype);
  if (!d)
    corruptProgram(where, fmt::format("unknown dtype '{}'", dtype));
  r.dtype = *d;
  return r;
}

json shapeJson(const LayerShape &shape) {
  json out = json::object();
  forEachField(shape, [&](const char *name, const auto &value) {
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, Activation>)
      out[name] = activationName(value);
    else
      out[name] = value;
  });
  return out;
}

/// A `kind` layer's shape, every field of forEachField read from `j`.
LayerShape parseShape(LayerKind kind, const json &j, const std::string &where) {
  LayerShape shape = blankShape(kind);
  forEachField(shape, [&](const char *name, auto &value) {
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<T, Activation>) {
      std::string text = field<std::string>(j, name, where);
      std::optional<Activation> a = parseActivation(text);
      if (!a)
        corruptProgram(where, fmt::format("unknown activation '{}'", text));
      value = *a;
    } else {
      value = field<T>(j, name, where);
    }
  });
  return shape;
}

json callsJson(const std::vector<KernelCall> &calls) {
  json out = json::array();
  for (const KernelCall &c : calls) {
    json call = {{"layer", c.layer}};
    if (c.op != CallOp::Run)
      call["op"] = callOpName(c.op);
    if (c.op == CallOp::Save || c.op == CallOp::Load)
      call["range"] = rangeJson(c.range);
    if (c.in != Slot::None)
      call["in"] = slotName(c.in);
    if (c.out != Slot::None)
      call["out"] = slotName(c.out);
    if (!c.collectives.empty()) {
      json collectives = json::array();
      for (const Collective &k : c.collectives)
        collectives.push_back({collectiveKindName(k.kind), k.perToken});
      call["collectives"] = collectives;
    }
    out.push_back(call);
  }
  return out;
}

std::vector<KernelCall> parseCalls(const json &j, const std::string &where) {
  std::vector<KernelCall> calls;
  if (!j.is_array() || j.size() > size_t(kMaxPassCalls))
    corruptProgram(where, fmt::format("a pass is not a list of at most {} calls",
                                      kMaxPassCalls));
  for (const json &c : j) {
    KernelCall call;
    call.layer = field<int32_t>(c, "layer", where);
    std::string op = optionalField<std::string>(c, "op", "run", where);
    std::optional<CallOp> parsedOp = parseCallOp(op);
    if (!parsedOp)
      corruptProgram(where, fmt::format("unknown call '{}'", op));
    call.op = *parsedOp;
    if (call.op == CallOp::Save || call.op == CallOp::Load)
      call.range = parseRange(field<json>(c, "range", where), where);
    for (auto [key, slot] : {std::pair{"in", &call.in}, {"out", &call.out}}) {
      std::string name = optionalField<std::string>(c, key, "none", where);
      std::optional<Slot> parsed = parseSlot(name);
      if (!parsed)
        corruptProgram(where, fmt::format("unknown slot '{}'", name));
      *slot = *parsed;
    }
    if (c.contains("collectives")) {
      const json &list = field<json>(c, "collectives", where);
      if (!list.is_array() || list.size() > 16)
        corruptProgram(where, "a call's collectives are not a short list");
      for (const json &k : list) {
        std::optional<CollectiveKind> kind =
            k.is_array() && k.size() == 2 && k[0].is_string()
                ? parseCollectiveKind(k[0].get<std::string>())
                : std::nullopt;
        if (!kind || !k[1].is_number_integer())
          corruptProgram(where, "a call names an unknown collective");
        call.collectives.push_back({*kind, k[1].get<int64_t>()});
      }
    }
    calls.push_back(call);
  }
  return calls;
}

json layersJson(const StageProgram &p) {
  json layers = json::array();
  for (const ProgramLayer &l : p.layers) {
    json layer = {{"kind", layerKindName(l.kind)},
                  {"layer", l.layer},
                  {"shape", shapeJson(l.shape)},
                  {"params", rangeJson(l.params)},
                  {"saved", rangeJson(l.saved)}};
    if (l.recomputed)
      layer["recomputed"] = true;
    if (l.modules) {
      json modules = json::array();
      for (RecomputeModule m : kRecomputeModules)
        if (l.modules & moduleBit(m))
          modules.push_back(recomputeModuleName(m));
      layer["recompute"] = {{"modules", modules},
                            {"range", rangeJson(l.again)}};
    }
    layers.push_back(std::move(layer));
  }
  return layers;
}

json programJson(const StageProgram &p) {
  json program = {{"workspace",
                   {{"act0", rangeJson(p.act0)},
                    {"act1", rangeJson(p.act1)},
                    {"scratch", rangeJson(p.scratch)}}},
                  {"forward", callsJson(p.forward)},
                  {"backward_input", callsJson(p.backwardInput)},
                  {"backward_weight", callsJson(p.backwardWeight)}};
  if (!p.sharedOutput.empty() || !p.sharedTable.empty())
    program["shared"] = {{"output_layer", rangeJson(p.sharedOutput)},
                         {"embedding_table", rangeJson(p.sharedTable)}};
  if (p.recomputeBytes > 0) {
    program["recompute"] = {{"bytes", p.recomputeBytes}};
    if (!p.rc0.empty())
      program["recompute"].update(
          {{"rc0", rangeJson(p.rc0)}, {"rc1", rangeJson(p.rc1)}});
  }
  return program;
}

/// The program of a stage from its manifest entry `s` (its layers and its
/// `program`), with the stage's own fields already read into `e`.
StageProgram parseProgram(const json &s, const StageEntry &e, Target target,
                          int64_t tp, bool sequenceParallel,
                          const std::string &where) {
  StageProgram p;
  p.target = target;
  p.tensorParallel = tp;
  p.sequenceParallel = sequenceParallel;
  p.tokens = TokenShape{e.batch, e.seq};
  p.hidden = e.hidden;
  // The manifest counts the buffers in f32 elements.
  const int64_t f32 = dtypeBytes(DType::F32);
  p.paramBytes = f32 * e.numParams;
  p.savedBytes = f32 * e.savedFloats;
  p.workspaceBytes = f32 * e.workspaceFloats;
  const json &layers = field<json>(s, "layers", where);
  if (!layers.is_array() || layers.size() > size_t(kMaxProgramLayers))
    corruptProgram(where,
                   fmt::format("'layers' is not a list of at most {} layers",
                               kMaxProgramLayers));
  for (const json &l : layers) {
    ProgramLayer pl;
    std::string kind = field<std::string>(l, "kind", where);
    std::optional<LayerKind> k = parseLayerKind(kind);
    if (!k)
      corruptProgram(where, fmt::format("unknown kernel '{}'", kind));
    pl.kind = *k;
    pl.layer = field<int64_t>(l, "layer", where);
    pl.shape = parseShape(pl.kind, field<json>(l, "shape", where), where);
    pl.params = parseRange(field<json>(l, "params", where), where);
    pl.saved = parseRange(field<json>(l, "saved", where), where);
    pl.recomputed = optionalField<bool>(l, "recomputed", false, where);
    if (l.contains("recompute")) {
      const json &rc = field<json>(l, "recompute", where);
      const json &modules = field<json>(rc, "modules", where);
      if (!modules.is_array() || modules.size() > std::size(kRecomputeModules))
        corruptProgram(where, "a layer's recompute modules are not a list");
      for (const json &name : modules) {
        std::optional<RecomputeModule> m =
            name.is_string() ? parseRecomputeModule(name.get<std::string>())
                             : std::nullopt;
        if (!m)
          corruptProgram(where, "a layer recomputes an unknown module");
        pl.modules |= moduleBit(*m);
      }
      pl.again = parseRange(field<json>(rc, "range", where), where);
    }
    p.layers.push_back(std::move(pl));
  }
  const json &program = field<json>(s, "program", where);
  const json &ws = field<json>(program, "workspace", where);
  p.act0 = parseRange(field<json>(ws, "act0", where), where);
  p.act1 = parseRange(field<json>(ws, "act1", where), where);
  p.scratch = parseRange(field<json>(ws, "scratch", where), where);
  if (program.contains("shared")) {
    const json &shared = field<json>(program, "shared", where);
    p.sharedOutput =
        parseRange(field<json>(shared, "output_layer", where), where);
    p.sharedTable =
        parseRange(field<json>(shared, "embedding_table", where), where);
  }
  if (program.contains("recompute")) {
    const json &rc = field<json>(program, "recompute", where);
    p.recomputeBytes = field<int64_t>(rc, "bytes", where);
    if (rc.contains("rc0")) {
      p.rc0 = parseRange(field<json>(rc, "rc0", where), where);
      p.rc1 = parseRange(field<json>(rc, "rc1", where), where);
    }
  }
  p.forward = parseCalls(field<json>(program, "forward", where), where);
  p.backwardInput =
      parseCalls(field<json>(program, "backward_input", where), where);
  p.backwardWeight =
      parseCalls(field<json>(program, "backward_weight", where), where);
  if (std::string why = shardLayers(p); !why.empty())
    corruptProgram(where, why);
  return p;
}

} // namespace

nlohmann::json optimizerJson(const TrainingConfig &t) {
  json j = {{"lr", t.lr},
            {"min_lr", t.minLr},
            {"lr_decay_style", lrDecayStyleName(t.lrDecayStyle)},
            {"warmup_steps", t.warmupSteps},
            {"lr_decay_steps", t.lrDecaySteps},
            {"lr_wsd_decay_iters", t.lrWsdDecaySteps},
            {"lr_wsd_decay_style", wsdDecayStyleName(t.lrWsdDecayStyle)},
            {"weight_decay", t.weightDecay},
            {"grad_clip", t.gradClip},
            {"adam_beta1", t.beta1},
            {"adam_beta2", t.beta2},
            {"adam_eps", t.eps}};
  if (t.lrWarmupFraction)
    j["lr_warmup_fraction"] = *t.lrWarmupFraction;
  return j;
}

/// The help of settings a run never writes, in a manifest or a checkpoint.
constexpr const char *kEditedSettings =
    "the file was edited, corrupted or written by another version of hypipe: "
    "recompile the artifact, or resume from an earlier checkpoint";

void readOptimizerSettings(const nlohmann::json &j, const std::string &where,
                           TrainingConfig &t) {
  t.lr = field<double>(j, "lr", where);
  t.minLr = field<double>(j, "min_lr", where);
  t.warmupSteps = field<int64_t>(j, "warmup_steps", where);
  t.lrDecaySteps = field<int64_t>(j, "lr_decay_steps", where);
  t.weightDecay = field<double>(j, "weight_decay", where);
  t.gradClip = field<double>(j, "grad_clip", where);
  t.beta1 = field<double>(j, "adam_beta1", where);
  t.beta2 = field<double>(j, "adam_beta2", where);
  t.eps = field<double>(j, "adam_eps", where);
  // The style named by `key` (its default in files written before
  // Megatron's styles, which held only the cosine).
  auto styleOf = [&](const char *key, const char *fallback, auto parse,
                     const char *known) {
    const std::string name =
        optionalField<std::string>(j, key, fallback, where);
    auto style = parse(name);
    if (!style)
      fail(fmt::format("{}: unknown {} '{}'; this hypipe knows {}", where, key,
                       name, known),
           kEditedSettings);
    return *style;
  };
  t.lrDecayStyle =
      styleOf("lr_decay_style", "cosine", parseLrDecayStyle,
              "constant, linear, cosine, inverse-square-root and WSD");
  t.lrWsdDecayStyle =
      styleOf("lr_wsd_decay_style", "exponential", parseWsdDecayStyle,
              "exponential, linear, cosine and minus_sqrt");
  t.lrWsdDecaySteps = optionalField<int64_t>(j, "lr_wsd_decay_iters", 0, where);
  if (j.contains("lr_warmup_fraction"))
    t.lrWarmupFraction = field<double>(j, "lr_warmup_fraction", where);
  // The schedule divides by these: a value the compiler refuses is an edit.
  const int64_t decayEnd = t.decayEnd();
  if (t.lrWsdDecaySteps < 0 ||
      t.lrWsdDecaySteps > std::max<int64_t>(decayEnd, 0) ||
      (t.lrDecayStyle == LrDecayStyle::Wsd && t.lrWsdDecaySteps < 1) ||
      (t.lrWarmupFraction &&
       !(*t.lrWarmupFraction >= 0 && *t.lrWarmupFraction < 1)) ||
      !(t.eps > 0) || !(t.beta1 >= 0 && t.beta1 < 1) ||
      !(t.beta2 >= 0 && t.beta2 < 1))
    fail(fmt::format("{}: its learning-rate or AdamW settings are out of "
                     "range (lr_wsd_decay_iters {}, lr_warmup_fraction {}, "
                     "adam_beta1 {}, adam_beta2 {}, adam_eps {})",
                     where, t.lrWsdDecaySteps,
                     t.lrWarmupFraction ? fmt::format("{}", *t.lrWarmupFraction)
                                        : std::string("unset"),
                     t.beta1, t.beta2, t.eps),
         kEditedSettings);
}

// As Megatron's get_optimizer_param_scheduler: the warm-up fraction of the
// decay samples, the others iterations times the global batch.
LrSchedule TrainingConfig::lrSchedule(int64_t globalBatch) const {
  LrSchedule s;
  s.style = lrDecayStyle;
  s.maxLr = lr;
  s.minLr = minLr;
  s.decaySamples = decayEnd() * globalBatch;
  s.warmupSamples = lrWarmupFraction
                        ? *lrWarmupFraction * double(s.decaySamples)
                        : double(warmupSteps * globalBatch);
  s.wsdDecaySamples = lrWsdDecaySteps * globalBatch;
  s.wsdStyle = lrWsdDecayStyle;
  return s;
}

namespace {

/// The manifest's `model` but for the G and + layers' shapes.
json modelDimsJson(const ModelInfo &d) {
  return {{"name", d.name},
          {"pattern", d.pattern},
          {"num_layers", d.numLayers},
          {"hidden_size", d.hidden},
          {"vocab_size", d.vocab},
          {"tie_embeddings", d.tieEmbeddings},
          {"position_embedding", d.positionEmbedding},
          {"moe_aux_loss_coeff", d.moeAuxLossCoeff},
          {"moe_expert_capacity_factor", d.moeExpertCapacityFactor},
          {"moe_token_drop_policy", d.moeTokenDropPolicy},
          {"ffn_hidden_size", d.ffnHidden},
          {"num_attention_heads", d.numHeads},
          {"num_query_groups", d.numQueryGroups},
          {"kv_channels", d.kvChannels},
          {"mamba_num_heads", d.mambaNumHeads},
          {"mamba_head_dim", d.mambaHeadDim},
          {"mamba_state_dim", d.mambaState},
          {"mamba_num_groups", d.mambaNumGroups},
          {"mamba_conv_width", d.mambaConvWidth},
          {"num_experts", d.numExperts},
          {"moe_router_topk", d.moeTopK},
          {"moe_ffn_hidden_size", d.moeFfnHidden},
          {"activation", d.activation},
          {"mtp_pattern", d.mtpPattern},
          {"mtp_depths", d.mtpDepths},
          {"mtp_loss_scaling_factor", d.mtpLossScalingFactor}};
}

} // namespace

nlohmann::json modelJson(const ModelInfo &d) {
  json out = modelDimsJson(d);
  if (d.gdn)
    out["gdn"] = shapeJson(*d.gdn);
  if (d.mla)
    out["mla"] = shapeJson(*d.mla);
  return out;
}

ModelInfo parseModelInfo(const nlohmann::json &model,
                         const std::string &where) {
  ModelInfo d;
  d.name = field<std::string>(model, "name", where);
  d.pattern = field<std::string>(model, "pattern", where);
  d.numLayers = field<int64_t>(model, "num_layers", where);
  d.hidden = field<int64_t>(model, "hidden_size", where);
  d.vocab = field<int64_t>(model, "vocab_size", where);
  d.tieEmbeddings = field<bool>(model, "tie_embeddings", where);
  d.positionEmbedding = field<std::string>(model, "position_embedding", where);
  d.moeAuxLossCoeff = field<double>(model, "moe_aux_loss_coeff", where);
  d.moeExpertCapacityFactor =
      optionalField<double>(model, "moe_expert_capacity_factor", 0.0, where);
  d.moeTokenDropPolicy = optionalField<std::string>(
      model, "moe_token_drop_policy", "probs", where);
  d.ffnHidden = field<int64_t>(model, "ffn_hidden_size", where);
  d.numHeads = field<int64_t>(model, "num_attention_heads", where);
  d.numQueryGroups = field<int64_t>(model, "num_query_groups", where);
  d.kvChannels = field<int64_t>(model, "kv_channels", where);
  d.mambaNumHeads = field<int64_t>(model, "mamba_num_heads", where);
  d.mambaHeadDim = field<int64_t>(model, "mamba_head_dim", where);
  d.mambaState = field<int64_t>(model, "mamba_state_dim", where);
  d.mambaNumGroups = field<int64_t>(model, "mamba_num_groups", where);
  d.mambaConvWidth = field<int64_t>(model, "mamba_conv_width", where);
  d.numExperts = field<int64_t>(model, "num_experts", where);
  d.moeTopK = field<int64_t>(model, "moe_router_topk", where);
  d.moeFfnHidden = field<int64_t>(model, "moe_ffn_hidden_size", where);
  d.activation = field<std::string>(model, "activation", where);
  d.mtpPattern = optionalField<std::string>(model, "mtp_pattern", "", where);
  d.mtpDepths = optionalField<int64_t>(model, "mtp_depths", 0, where);
  d.mtpLossScalingFactor =
      optionalField<double>(model, "mtp_loss_scaling_factor", 0.0, where);
  // Absent before 2026-11-28 (and for models without such layers).
  if (model.contains("gdn"))
    d.gdn = std::get<GdnShape>(
        parseShape(LayerKind::Gdn, field<json>(model, "gdn", where), where));
  if (model.contains("mla"))
    d.mla = std::get<MlaShape>(
        parseShape(LayerKind::Mla, field<json>(model, "mla", where), where));
  return d;
}

ModelDims dimsOf(const ModelInfo &m) {
  ModelDims d;
  d.hidden = m.hidden;
  d.ffnHidden = m.ffnHidden;
  d.numHeads = m.numHeads;
  d.numQueryGroups = m.numQueryGroups;
  d.mambaState = m.mambaState;
  d.mambaNumHeads = m.mambaNumHeads;
  d.mambaHeadDim = m.mambaHeadDim;
  d.mambaNumGroups = m.mambaNumGroups;
  d.mambaConvWidth = m.mambaConvWidth;
  d.numExperts = m.numExperts;
  d.moeTopK = m.moeTopK;
  d.moeFfnHidden = m.moeFfnHidden;
  d.vocab = m.vocab;
  d.tieEmbeddings = m.tieEmbeddings;
  d.activation = m.activation;
  if (m.gdn) {
    d.gdnNumKeyHeads = m.gdn->keyHeads;
    d.gdnNumValueHeads = m.gdn->valueHeads;
    d.gdnKeyHeadDim = m.gdn->keyHeadDim;
    d.gdnValueHeadDim = m.gdn->valueHeadDim;
    d.gdnConvWidth = m.gdn->convWidth;
  }
  if (m.mla)
    setMlaDims(d, *m.mla);
  return d;
}

schedule::Schedule Artifact::asSchedule(int64_t count) const {
  schedule::Schedule s;
  s.name = schedule::scheduleName(schedule);
  s.pp = pp;
  s.vpp = vpp;
  s.microbatches = count ? count : microbatches;
  s.placement = schedule::placementOf(schedule);
  s.ranks =
      count && count != microbatches ? packedPrograms.at(count) : programs;
  return s;
}

schedule::Schedule Artifact::asForwardSchedule() const {
  schedule::Schedule s = asSchedule();
  s.ranks = forwardPrograms;
  s.forwardOnly = true;
  return s;
}

packing::Options packingOptions(const PackingConfig &pc, int64_t dp) {
  packing::Options o;
  o.budget = pc.maxTokens;
  o.dp = dp;
  o.minBins = pc.minBins;
  o.binMultiple = pc.binMultiple;
  o.scheduler = *packing::parseScheduler(pc.scheduler);
  o.cost = {pc.costPerToken, pc.costPerSquaredToken};
  return o;
}

int64_t expertReplicas(const Artifact &artifact) {
  int64_t replicas = 1;
  for (const StageEntry &e : artifact.stages)
    for (const ProgramLayer &l : e.program.layers)
      if (const auto *moe = std::get_if<MoeShape>(&l.shape)) {
        if (replicas != 1 && moe->groupReplicas != replicas)
          throw RuntimeError(fmt::format(
              "error: {}: its MoE layers' expert grids span {} and {} "
              "data-parallel replicas\nhelp: the manifest is corrupt; "
              "recompile the artifact",
              artifact.dir, replicas, moe->groupReplicas));
        replicas = moe->groupReplicas;
      }
  return replicas;
}

std::vector<StageEntry *> Artifact::stagesOf(int64_t ppRank) {
  std::vector<StageEntry *> out;
  for (StageEntry &s : stages)
    if (s.ppRank == ppRank)
      out.push_back(&s);
  return out;
}

// The schema, written and read in the same order. A key added to one side
// must be added to the other; ArtifactSchemaTest round-trips them.

/// Per pp rank: its schedule's actions, each with its text.
static json programsJson(const Artifact &a,
                         const std::vector<std::vector<ActionEntry>> &ranks) {
  json programs = json::array();
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    json actions = json::array();
    for (const ActionEntry &act : ranks[rank]) {
      json action = {{"op", schedule::opName(act.op)},
                     {"stage", act.stage},
                     {"mb", act.microbatch},
                     {"text", schedule::pytorchText(act)}};
      if (act.peer >= 0)
        action["peer"] = act.peer;
      if (act.batched)
        action["batched"] = true;
      actions.push_back(action);
    }
    programs.push_back({{"pp_rank", rank},
                        {"schedule", schedule::scheduleName(a.schedule)},
                        {"actions", actions}});
  }
  return programs;
}

nlohmann::json manifestToJson(const Artifact &a) {
  const ModelInfo &d = a.model;
  json stages = json::array();
  for (const StageEntry &e : a.stages) {
    json params = json::array();
    for (const ParamEntry &p : e.params) {
      json param = {{"name", p.name},
                    {"shape", p.shape},
                    {"offset", p.offset},
                    {"init", p.init},
                    {"init_args", {p.initA, p.initB}},
                    {"weight_decay", p.weightDecay}};
      if (p.split != Split::None)
        param["split"] = splitName(p.split);
      if (!p.sections.empty())
        param["sections"] = p.sections;
      if (p.expertRank >= 0) {
        param["expert_rank"] = p.expertRank;
        param["expert_ranks"] = p.expertRanks;
        param["expert_tp"] = p.expertTp;
      }
      if (p.sharedByHeads)
        param["shared_by_heads"] = true;
      params.push_back(std::move(param));
    }
    stages.push_back({{"index", e.index},
                      {"pp_rank", e.ppRank},
                      {"vp_stage", e.vpStage},
                      {"has_embedding", e.hasEmbedding},
                      {"has_head", e.hasHead},
                      {"batch", e.batch},
                      {"seq", e.seq},
                      {"hidden", e.hidden},
                      {"num_params", e.numParams},
                      {"saved_floats", e.savedFloats},
                      {"workspace_floats", e.workspaceFloats},
                      {"layers", layersJson(e.program)},
                      {"program", programJson(e.program)},
                      {"params", params}});
  }
  json packedPrograms = json::array();
  for (const auto &[count, programs] : a.packedPrograms)
    packedPrograms.push_back(
        {{"microbatches", count}, {"programs", programsJson(a, programs)}});
  const TrainingConfig &t = a.training;
  json manifest = {
      {"format", "hypipe-artifact"},
      {"version", kArtifactVersion},
      {"target", targetName(a.target)},
      {"precision", precisionName(a.precision)},
      {"compute_capability", a.computeCapability},
      {"model", modelJson(d)},
      {"parallel",
       {{"pp", a.pp},
        {"vpp", a.vpp},
        {"dp", a.dp},
        {"tp", a.tp},
        {"sequence_parallel", a.sequenceParallel},
        {"schedule", schedule::scheduleName(a.schedule)},
        {"microbatches", a.microbatches},
        {"microbatch_group_size", a.groupSize},
        {"distributed_optimizer", a.distributedOptimizer},
        {"comm", schedule::commKindName(a.comm)}}},
      {"training",
       {{"seq_length", t.seqLength},
        {"micro_batch_size", t.microBatchSize},
        {"steps", t.steps},
        {"seed", t.seed},
        {"calculate_per_token_loss", t.perTokenLoss},
        {"init_from", t.initFrom},
        {"tensorboard_dir", t.tensorboardDir}}},
      {"data",
       {{"path", a.dataPath},
        {"format", dataFormatName(a.dataFormat)},
        {"split", a.split},
        {"packing",
         {{"enabled", a.packing.enabled},
          {"max_tokens_per_microbatch", a.packing.maxTokens},
          {"global_batch_size", a.packing.globalBatchSize},
          {"min_bin_count", a.packing.minBins},
          {"bin_count_multiple", a.packing.binMultiple},
          {"scheduler", a.packing.scheduler},
          {"truncate", a.packing.truncate},
          {"mock", a.packing.mock},
          {"cost_per_token", a.packing.costPerToken},
          {"cost_per_squared_token", a.packing.costPerSquaredToken}}}}},
      {"spec", {{"file", a.specFile}, {"text", a.specText}}},
      {"stages", stages},
      {"programs", programsJson(a, a.programs)},
      {"packed_programs", packedPrograms},
      {"forward_programs", programsJson(a, a.forwardPrograms)},
  };
  manifest["training"].update(optimizerJson(t));
  return manifest;
}

double runtimeBytesPerParameter(const Artifact &a) {
  return hypipe::runtimeBytesPerParameter(a.precision ==
                                              TrainingPrecision::Bf16,
                                          a.distributedOptimizer ? a.dp : 1);
}

/// `ppRank`'s program of `compiled`, its receives in send order when
/// asked.
static std::vector<ActionEntry>
programOfRank(const std::vector<std::vector<ActionEntry>> &compiled,
              int64_t ppRank, bool inSendOrder) {
  if (!inSendOrder)
    return compiled.at(size_t(ppRank));
  std::vector<std::vector<ActionEntry>> programs = compiled;
  // Posting receives earlier keeps a verified program verified.
  schedule::receiveInSendOrder(programs);
  return programs.at(size_t(ppRank));
}

std::vector<ActionEntry> rankProgram(const Artifact &a, int64_t ppRank,
                                     int64_t microbatches, bool inSendOrder) {
  const auto packed = a.packedPrograms.find(microbatches);
  if (microbatches != a.microbatches && packed == a.packedPrograms.end()) {
    std::vector<int64_t> held = {a.microbatches};
    for (const auto &[count, programs] : a.packedPrograms)
      held.push_back(count);
    std::sort(held.begin(), held.end());
    throw RuntimeError(fmt::format(
        "error: a step has {} microbatches per data-parallel rank, and the "
        "artifact holds {} programs for {} only\nhelp: `hypipe compile` "
        "writes a program for every count packing can give that the "
        "schedule runs: recompile the artifact with this hypipe, or set "
        "data.bin_count_multiple (and min_bin_count) to counts the schedule "
        "accepts",
        microbatches, schedule::scheduleName(a.schedule),
        fmt::join(held, ", ")));
  }
  return programOfRank(microbatches == a.microbatches ? a.programs
                                                      : packed->second,
                       ppRank, inSendOrder);
}

std::vector<ActionEntry> rankForwardProgram(const Artifact &a, int64_t ppRank,
                                            bool inSendOrder) {
  if (a.forwardPrograms.empty())
    throw RuntimeError(
        "error: the artifact holds no forward-only programs, which "
        "evaluation runs (--eval-interval)\nhelp: it was compiled by an "
        "older hypipe: recompile it with `hypipe compile SPEC -o DIR`");
  return programOfRank(a.forwardPrograms, ppRank, inSendOrder);
}

int64_t rankTensorBytes(const Artifact &a, int64_t ppRank,
                        int64_t microbatches) {
  std::vector<schedule::StageBuffers> stages;
  const int64_t replicas = expertReplicas(a);
  for (const StageEntry &s : a.stages)
    if (s.ppRank == ppRank) {
      stages.push_back({s.index, s.numParams, s.savedFloats, s.workspaceFloats,
                        s.program.recomputeBytes / dtypeBytes(DType::F32)});
      if (a.precision == TrainingPrecision::Bf16 && !a.savedFp32)
        stages.back().stashFloats = stashSlotBytes(s.program) / 4;
      const auto &layers = s.program.layers;
      stages.back().checkFloats = schedule::routerCheckFloats(
          std::any_of(
              layers.begin(), layers.end(),
              [](const ProgramLayer &l) { return l.kind == LayerKind::Moe; }),
          int64_t(layers.size()));
      // Sharded over an expert grid spread over replicas: its experts'
      // moments over fewer ranks, and the scratch (ExpertShardLayout).
      if (!a.distributedOptimizer || replicas == 1)
        continue;
      std::vector<std::pair<int64_t, int64_t>> slots;
      for (const ParamEntry &p : s.params)
        if (p.expertRank == 0)
          slots.push_back({p.offset, p.offset + p.numel});
      std::sort(slots.begin(), slots.end());
      const ExpertShardFloats x = expertShardFloats(
          s.numParams, slots, a.dp, replicas, kDefaultGradientBucketFloats);
      stages.back().optimizerFloats = x.moments;
      stages.back().scratchFloats = x.scratch;
    }
  return schedule::peakTensorBytes(
      stages,
      schedule::rankBuffers(
          rankProgram(a, ppRank, microbatches ? microbatches : a.microbatches),
          a.numStages),
      a.training.microBatchSize * a.training.seqLength * a.model.hidden,
      runtimeBytesPerParameter(a));
}

namespace {

TrainingConfig parseTraining(const json &tr, const std::string &path) {
  TrainingConfig t;
  t.seqLength = field<int64_t>(tr, "seq_length", path);
  t.microBatchSize = field<int64_t>(tr, "micro_batch_size", path);
  t.steps = field<int64_t>(tr, "steps", path);
  t.seed = field<int64_t>(tr, "seed", path);
  t.perTokenLoss =
      optionalField<bool>(tr, "calculate_per_token_loss", false, path);
  t.initFrom = optionalField<std::string>(tr, "init_from", "", path);
  t.tensorboardDir =
      optionalField<std::string>(tr, "tensorboard_dir", "", path);
  readOptimizerSettings(tr, path, t);
  return t;
}

PackingConfig parsePacking(const json &pk, const std::string &path) {
  PackingConfig p;
  p.enabled = field<bool>(pk, "enabled", path);
  p.maxTokens = field<int64_t>(pk, "max_tokens_per_microbatch", path);
  p.globalBatchSize = field<int64_t>(pk, "global_batch_size", path);
  p.minBins = field<int64_t>(pk, "min_bin_count", path);
  p.binMultiple = field<int64_t>(pk, "bin_count_multiple", path);
  p.scheduler = field<std::string>(pk, "scheduler", path);
  if (p.enabled && !packing::parseScheduler(p.scheduler))
    fail(fmt::format("{}: unknown packing scheduler '{}'", path, p.scheduler),
         fmt::format("the schedulers are {}; recompile the artifact",
                     packing::schedulerNames()));
  p.truncate = field<bool>(pk, "truncate", path);
  p.mock = field<std::string>(pk, "mock", path);
  p.costPerToken = field<double>(pk, "cost_per_token", path);
  p.costPerSquaredToken = field<double>(pk, "cost_per_squared_token", path);
  return p;
}

ParamEntry parseParam(const json &p, int64_t stageParams, int64_t tp,
                      const std::string &where) {
  ParamEntry pe;
  pe.name = field<std::string>(p, "name", where);
  pe.shape = field<std::vector<int64_t>>(p, "shape", where);
  pe.offset = field<int64_t>(p, "offset", where);
  const std::string split =
      optionalField<std::string>(p, "split", "none", where);
  std::optional<Split> parsedSplit = parseSplit(split);
  if (!parsedSplit)
    fail(fmt::format("{}: parameter '{}' has an unknown split '{}'", where,
                     pe.name, split),
         "the manifest is corrupt; recompile the artifact");
  pe.split = *parsedSplit;
  pe.sections = optionalField<std::vector<int64_t>>(p, "sections", {}, where);
  pe.expertRank = optionalField<int64_t>(p, "expert_rank", -1, where);
  pe.expertRanks = optionalField<int64_t>(p, "expert_ranks", 1, where);
  pe.expertTp = optionalField<int64_t>(p, "expert_tp", 1, where);
  pe.sharedByHeads = optionalField<bool>(p, "shared_by_heads", false, where);
  if (pe.expertRank < -1 || pe.expertRanks < 1 || pe.expertTp < 1 ||
      pe.expertTp > (int64_t(1) << 20) ||
      (pe.expertRank >= 0 && (pe.expertTp * pe.expertRanks) % tp != 0) ||
      pe.expertRank >= pe.expertRanks)
    fail(fmt::format("{}: parameter '{}' is expert-parallel rank {}'s of {} "
                     "(each {} ranks) over {} tensor-parallel ranks",
                     where, pe.name, pe.expertRank, pe.expertRanks, pe.expertTp,
                     tp),
         "the manifest is corrupt; recompile the artifact");
  for (int64_t n : pe.shape)
    if (n < 0 || n > (int64_t(1) << 40))
      fail(fmt::format("{}: parameter '{}' has a dimension of {}", where,
                       pe.name, n),
           "the manifest is corrupt; recompile the artifact");
  if (pe.shape.size() > 8 || pe.sections.size() > 8 ||
      !splitsEvenly(pe.shape, pe.split, pe.sections, shardRanksOf(pe, tp)))
    fail(fmt::format("{}: parameter '{}' does not split over {} "
                     "tensor-parallel ranks as its manifest says",
                     where, pe.name, tp),
         "the manifest is corrupt; recompile the artifact");
  pe.numel = paramNumel(pe, tp);
  pe.init = field<std::string>(p, "init", where);
  auto args = field<std::vector<double>>(p, "init_args", where);
  pe.initA = args.size() > 0 ? args[0] : 0;
  pe.initB = args.size() > 1 ? args[1] : 0;
  pe.weightDecay = field<bool>(p, "weight_decay", where);
  if (pe.offset < 0 || pe.offset + pe.numel > stageParams)
    fail(fmt::format("{}: parameter '{}' lies outside the stage's {} "
                     "parameters",
                     where, pe.name, stageParams),
         "the manifest is corrupt; recompile the artifact");
  return pe;
}

StageEntry parseStage(const json &s, Target target, int64_t tp,
                      bool sequenceParallel, const std::string &path) {
  StageEntry e;
  e.index = field<int64_t>(s, "index", path);
  std::string where = fmt::format("{} (stage {})", path, e.index);
  e.ppRank = field<int64_t>(s, "pp_rank", where);
  e.vpStage = field<int64_t>(s, "vp_stage", where);
  e.hasEmbedding = field<bool>(s, "has_embedding", where);
  e.hasHead = field<bool>(s, "has_head", where);
  e.batch = field<int64_t>(s, "batch", where);
  e.seq = field<int64_t>(s, "seq", where);
  e.hidden = field<int64_t>(s, "hidden", where);
  e.numParams = field<int64_t>(s, "num_params", where);
  e.savedFloats = field<int64_t>(s, "saved_floats", where);
  e.workspaceFloats = field<int64_t>(s, "workspace_floats", where);
  e.program = parseProgram(s, e, target, tp, sequenceParallel, where);
  for (const json &p : field<json>(s, "params", where))
    e.params.push_back(parseParam(p, e.numParams, tp, where));
  return e;
}

/// A rank's program for `microbatches`: actions naming existing stages and
/// microbatches.
std::vector<ActionEntry> parseActions(const json &prog, const Artifact &a,
                                      int64_t microbatches,
                                      const std::string &path) {
  std::vector<ActionEntry> actions;
  for (const json &act : field<json>(prog, "actions", path)) {
    std::string op = field<std::string>(act, "op", path);
    std::optional<schedule::Op> kind = schedule::parseOpName(op);
    if (!kind)
      fail(fmt::format("{}: unknown action '{}'", path, op),
           "recompile the artifact with this version of hypipe");
    ActionEntry e{*kind, field<int32_t>(act, "stage", path),
                  field<int32_t>(act, "mb", path),
                  optionalField<int32_t>(act, "peer", -1, path),
                  optionalField<bool>(act, "batched", false, path)};
    if (e.stage < 0 || e.stage >= a.numStages || e.microbatch < 0 ||
        e.microbatch >= microbatches)
      fail(fmt::format("{}: action '{}' names a stage or microbatch that "
                       "does not exist",
                       path, optionalField<std::string>(act, "text", "", path)),
           "the manifest is corrupt; recompile the artifact");
    actions.push_back(e);
  }
  return actions;
}

/// One program per pp rank for `microbatches`.
std::vector<std::vector<ActionEntry>> parsePrograms(const json &programs,
                                                    const Artifact &a,
                                                    int64_t microbatches,
                                                    const std::string &path) {
  std::vector<std::vector<ActionEntry>> out;
  for (const json &prog : programs)
    out.push_back(parseActions(prog, a, microbatches, path));
  if (int64_t(out.size()) != a.pp)
    fail(fmt::format("{}: {} programs for pp {} ({} microbatches)", path,
                     out.size(), a.pp, microbatches),
         "the manifest is corrupt; recompile the artifact");
  return out;
}

[[noreturn]] void corruptManifest(const std::string &path,
                                  const std::string &what) {
  fail(fmt::format("{}: {}", path, what),
       "the manifest was edited or is corrupt; recompile the artifact with "
       "`hypipe compile SPEC -o DIR`");
}

RunSizes runSizes(const Artifact &a) {
  RunSizes s;
  s.numLayers = a.model.numLayers;
  s.pp = a.pp;
  s.vpp = a.vpp;
  s.dp = a.dp;
  s.tp = a.tp;
  s.microbatches = a.microbatches;
  s.groupSize = a.groupSize;
  s.seqLength = a.training.seqLength;
  s.microBatchSize = a.training.microBatchSize;
  s.steps = a.training.steps;
  s.warmupSteps = a.training.warmupSteps;
  s.lrDecaySteps = a.training.lrDecaySteps;
  s.packing = a.packing.enabled;
  if (s.packing) {
    s.maxTokensPerMicrobatch = a.packing.maxTokens;
    s.globalBatchSize = a.packing.globalBatchSize;
    s.minBinCount = a.packing.minBins;
    s.binCountMultiple = a.packing.binMultiple;
  }
  return s;
}

/// The sizes a spec may have (SizeBounds.h), as the compiler checked them:
/// an edited manifest is refused before anything is sized from it.
void checkSizes(const Artifact &a, const std::string &path) {
  if (std::optional<SizeProblem> problem = checkRunSizes(runSizes(a)))
    corruptManifest(path, problem->message);
  if (std::optional<DimsProblem> problem = checkModelDims(dimsOf(a.model)))
    corruptManifest(path, "model." + problem->message);
}

/// Each rank's buffers (every stage's parameters with their gradients and
/// optimizer state, one microbatch's saved tensors, the workspace) within
/// what one rank may hold. Each count is at most 2^40 floats here, so no
/// sum overflows.
void checkRankBuffers(const Artifact &a, const std::string &path) {
  const double perParameter = runtimeBytesPerParameter(a);
  std::vector<double> bytes(size_t(a.pp), 0.0);
  for (const StageEntry &s : a.stages)
    bytes[size_t(s.ppRank)] += perParameter * double(s.numParams) +
                               4.0 * double(s.savedFloats + s.workspaceFloats);
  for (size_t rank = 0; rank < bytes.size(); ++rank)
    if (bytes[rank] > double(kMaxRankBytes))
      fail(fmt::format("{}: pipeline rank {} would hold {:.1f} GiB of "
                       "buffers, more than the {} GiB one rank may hold",
                       path, rank, bytes[rank] / double(1 << 30),
                       kMaxRankBytes >> 30),
           "the manifest was edited, or the model does not fit one rank: "
           "recompile with more pipeline ranks (`hypipe compile SPEC --pp N "
           "-o DIR`)");
}

} // namespace

Artifact artifactFromJson(const json &m, const std::string &path) {
  if (!m.is_object() ||
      optionalField<std::string>(m, "format", "", path) != "hypipe-artifact")
    fail(fmt::format("'{}' is not a hypipe artifact manifest", path),
         "pass the directory written by `hypipe compile SPEC -o DIR`");
  int version = field<int>(m, "version", path);
  if (version != kArtifactVersion)
    fail(fmt::format("'{}' has artifact version {}, this hypipe-run reads "
                     "version {}",
                     path, version, kArtifactVersion),
         "recompile the spec with the hypipe that ships with this "
         "hypipe-run");

  Artifact a;
  const auto target = field<std::string>(m, "target", path);
  a.target =
      knownName(parseTarget(target), path, "target", target, "cpu and cuda",
                "recompile the spec with the hypipe that ships with "
                "this hypipe-run");
  const auto precision =
      optionalField<std::string>(m, "precision", "fp32", path);
  a.precision = knownName(parsePrecision(precision), path, "precision",
                          precision, "fp32 and bf16", kCorruptOrOther);
  a.computeCapability = optionalField<int>(m, "compute_capability", 0, path);
  a.model = parseModelInfo(field<json>(m, "model", path), path);
  const json &par = field<json>(m, "parallel", path);
  a.pp = field<int64_t>(par, "pp", path);
  a.vpp = field<int64_t>(par, "vpp", path);
  a.dp = field<int64_t>(par, "dp", path);
  a.tp = optionalField<int64_t>(par, "tp", 1, path);
  a.sequenceParallel =
      optionalField<bool>(par, "sequence_parallel", false, path);
  const auto scheduleText = field<std::string>(par, "schedule", path);
  a.schedule =
      knownName(schedule::parseScheduleKind(scheduleText), path, "schedule",
                scheduleText, schedule::scheduleNameList(), kCorruptOrOther);
  a.microbatches = field<int64_t>(par, "microbatches", path);
  a.groupSize = field<int64_t>(par, "microbatch_group_size", path);
  a.distributedOptimizer =
      optionalField<bool>(par, "distributed_optimizer", false, path);
  const std::string comm =
      optionalField<std::string>(par, "comm", "auto", path);
  const std::optional<schedule::CommKind> commKind =
      schedule::parseCommKind(comm);
  if (!commKind)
    throw RuntimeError(fmt::format(
        "error: {}: parallel.comm is '{}'; it is one of {}\nhelp: the "
        "manifest was edited; recompile the artifact",
        path, comm, schedule::kCommKindList));
  a.comm = *commKind;
  a.training = parseTraining(field<json>(m, "training", path), path);
  const json &data = field<json>(m, "data", path);
  a.dataPath = field<std::string>(data, "path", path);
  const auto format = field<std::string>(data, "format", path);
  a.dataFormat = knownName(parseDataFormat(format), path, "data format", format,
                           "text, indexed, jsonl and mock", kCorruptOrOther);
  a.packing = parsePacking(field<json>(data, "packing", path), path);
  a.split = optionalField<std::string>(data, "split", "", path);
  if (!a.split.empty())
    if (auto split = hypipe::parseSplit(a.split); !split)
      fail(fmt::format("{}: data.split '{}': {}", path, a.split,
                       split.problem().message),
           kCorruptOrOther);
  // Manifests written before the field trained packed steps per token:
  // they keep doing so.
  if (!m["training"].contains("calculate_per_token_loss"))
    a.training.perTokenLoss = a.packing.enabled;
  const json &spec = field<json>(m, "spec", path);
  a.specFile = field<std::string>(spec, "file", path);
  a.specText = field<std::string>(spec, "text", path);
  checkSizes(a, path);

  for (const json &s : field<json>(m, "stages", path)) {
    StageEntry e = parseStage(s, a.target, a.tp, a.sequenceParallel, path);
    e.program.activations = activationDType(a.precision);
    if (e.index != int64_t(a.stages.size()))
      fail(fmt::format("{} (stage {}): stages are out of order", path, e.index),
           "the manifest is corrupt; recompile the artifact");
    a.stages.push_back(std::move(e));
  }
  a.numStages = int64_t(a.stages.size());
  if (a.numStages != a.pp * a.vpp)
    fail(fmt::format("{}: {} stages for pp {} x vpp {}", path, a.numStages,
                     a.pp, a.vpp),
         "the manifest is corrupt; recompile the artifact");
  a.programs =
      parsePrograms(field<json>(m, "programs", path), a, a.microbatches, path);
  // Absent in older manifests: a packed step of another count then asks
  // for a recompile (rankProgram).
  for (const json &packed :
       optionalField<json>(m, "packed_programs", json::array(), path)) {
    const int64_t count = field<int64_t>(packed, "microbatches", path);
    if (Error refused = schedule::checkScheduleSize(a.pp, a.vpp, count))
      fail(fmt::format("{}: packed programs for {} microbatches: {}", path,
                       count, toString(refused)),
           "the manifest is corrupt; recompile the artifact");
    a.packedPrograms[count] =
        parsePrograms(field<json>(packed, "programs", path), a, count, path);
  }
  // Absent in older manifests: evaluation then asks for a recompile.
  if (const json forward =
          optionalField<json>(m, "forward_programs", json::array(), path);
      !forward.empty())
    a.forwardPrograms = parsePrograms(forward, a, a.microbatches, path);
  return a;
}

/// The manifest's fields against each other, before the runtime sizes a
/// single buffer from them (every size is within its bound already,
/// artifactFromJson's checkSizes): every count positive, every product free of
/// overflow, every stage's shapes those of the training section, every layer
/// and parameter inside its stage's buffers, each rank's buffers within what a
/// rank may hold, the embedding and head the vocabulary's size, each (pp_rank,
/// vp_stage) once, and the programs a schedule the simulator completes.
void checkArtifactConsistency(const Artifact &a, const std::string &path) {
  auto corrupt = [&](const std::string &what) { corruptManifest(path, what); };
  // Buffers are indexed by int64 and sized in floats: 2^40 floats (4 TiB)
  // is past any one stage's buffer, and keeps every product below 2^63.
  constexpr int64_t kMax = int64_t(1) << 40;
  auto bounded = [&](int64_t v, int64_t lo, const std::string &what) {
    if (v < lo || v > kMax)
      corrupt(fmt::format("{} is {}, outside [{}, 2^40]", what, v, lo));
  };
  if (Error refused = schedule::checkScheduleSize(a.pp, a.vpp, a.microbatches))
    corrupt(toString(refused));
  bounded(a.dp, 1, "parallel.dp");
  bounded(a.tp, 1, "parallel.tp");
  bounded(a.dp * a.tp, 1, "parallel.dp x parallel.tp");
  if (a.sequenceParallel && a.tp < 2)
    corrupt("parallel.sequence_parallel is set with tp 1");
  const TrainingConfig &t = a.training;
  bounded(t.seqLength, 1, "training.seq_length");
  bounded(t.microBatchSize, 1, "training.micro_batch_size");
  bounded(t.steps, 1, "training.steps");
  bounded(a.model.hidden, 1, "model.hidden_size");
  bounded(a.model.vocab, 1, "model.vocab_size");
  bounded(t.seqLength * t.microBatchSize * a.model.hidden, 1,
          "seq_length x micro_batch_size x hidden_size");
  std::vector<std::vector<bool>> placed(a.pp, std::vector<bool>(a.vpp));
  for (const StageEntry &s : a.stages) {
    std::string where = fmt::format("stage {}", s.index);
    if (s.ppRank < 0 || s.ppRank >= a.pp || s.vpStage < 0 ||
        s.vpStage >= a.vpp || placed[s.ppRank][s.vpStage])
      corrupt(fmt::format("{} is placed on pp_rank {}, vp_stage {}, which "
                          "does not exist or holds another stage",
                          where, s.ppRank, s.vpStage));
    placed[s.ppRank][s.vpStage] = true;
    bounded(s.batch, 1, where + " batch");
    bounded(s.seq, 1, where + " seq");
    bounded(s.numParams, 0, where + " num_params");
    bounded(s.savedFloats, 0, where + " saved_floats");
    bounded(s.workspaceFloats, 0, where + " workspace_floats");
    bounded(s.batch * s.seq * s.hidden, 1, where + " batch x seq x hidden");
    const bool packed = a.packing.enabled;
    const int64_t batch = packed ? 1 : t.microBatchSize;
    const int64_t seq = packed ? a.packing.maxTokens : t.seqLength;
    if (s.hidden != a.model.hidden || s.batch != batch || s.seq != seq)
      corrupt(fmt::format("{} is [{} x {} x {}], but the training section "
                          "makes microbatches of [{} x {} x {}]",
                          where, s.batch, s.seq, s.hidden, batch, seq,
                          a.model.hidden));
    if (std::string why =
            checkStageProgram(s.program, s.hasEmbedding, s.hasHead);
        !why.empty())
      corruptProgram(fmt::format("{} (stage {})", path, s.index), why);
    for (const ParamEntry &p : s.params) {
      int64_t numel = 1;
      for (int64_t d : p.shape)
        if (d < 0 || __builtin_mul_overflow(numel, d, &numel) || numel > kMax)
          corrupt(fmt::format("{}: parameter '{}' has the shape [{}]", where,
                              p.name, fmt::join(p.shape, ", ")));
      if (p.name == "embedding.word_embeddings.weight" ||
          p.name == "output_layer.weight")
        if (p.shape.size() != 2 || p.shape[0] != a.model.vocab ||
            p.shape[1] != a.model.hidden)
          corrupt(fmt::format("{}: '{}' is [{}], but the model has a "
                              "vocabulary of {} and hidden size {}",
                              where, p.name, fmt::join(p.shape, ", "),
                              a.model.vocab, a.model.hidden));
    }
  }
  checkRankBuffers(a, path);
  // Every rank's program must run to the end with its peers': a dropped or
  // extra action would leave a rank waiting for ever.
  if (auto simulated = schedule::simulate(a.asSchedule()); !simulated)
    corrupt("its programs do not form a schedule that runs to the end:\n" +
            toString(simulated.takeError()));
  for (const auto &[count, programs] : a.packedPrograms)
    if (auto simulated = schedule::simulate(a.asSchedule(count)); !simulated)
      corrupt(fmt::format("its programs for {} microbatches do not form a "
                          "schedule that runs to the end:\n{}",
                          count, toString(simulated.takeError())));
  if (!a.forwardPrograms.empty())
    if (auto simulated = schedule::simulate(a.asForwardSchedule()); !simulated)
      corrupt("its forward-only programs do not form a schedule that runs "
              "to the end:\n" +
              toString(simulated.takeError()));
}

Artifact loadArtifact(const std::string &dir) {
  std::string path = dir + "/manifest.json";
  if (!pathExists(path))
    fail(fmt::format("cannot open '{}'", path),
         "pass the directory written by `hypipe compile SPEC -o DIR`");
  const std::string text = readFileBounded(path, files::kManifest);
  json m;
  try {
    m = json::parse(text);
  } catch (const json::parse_error &e) {
    fail(fmt::format("'{}' is not valid JSON (byte {}): the manifest is "
                     "truncated or corrupt",
                     path, e.byte),
         "recompile the artifact with `hypipe compile SPEC -o DIR`");
  }
  Artifact a = artifactFromJson(m, path);
  checkArtifactConsistency(a, path);
  a.dir = dir;
  return a;
}

} // namespace hypipe::rt
