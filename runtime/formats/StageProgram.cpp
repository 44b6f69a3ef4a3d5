//===- StageProgram.cpp - names, JSON and checks of a kernel program ------===//

#include "runtime/formats/StageProgram.h"

#include "core/model/BufferLayouts.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace hypipe::rt {
namespace {

/// The kernels' buffers are f32 (the only dtype checkStageProgram admits).
constexpr int64_t kF32 = sizeof(float);

constexpr std::array<const char *, 2> kDTypeNames = {"f32", "bf16"};
constexpr std::array<const char *, 9> kSlotNames = {
    "none", "input", "output", "grad_output", "grad_input",
    "act0", "act1",  "rc0",    "rc1"};
constexpr std::array<const char *, 4> kCallOpNames = {"run", "save", "load",
                                                      "recompute"};

template <typename Enum, size_t N>
std::optional<Enum> parseName(const std::array<const char *, N> &names,
                              std::string_view name) {
  for (size_t i = 0; i < N; ++i)
    if (name == names[i])
      return static_cast<Enum>(i);
  return std::nullopt;
}

/// Every dimension of a shape: positive and small enough that no size the
/// shapes compute from them overflows.
constexpr int64_t kMaxDim = int64_t(1) << 24;
constexpr int64_t kMaxBytes = int64_t(1) << 46;
/// A MoE layer's routed rows (tokens x top-k): its kernels index them with
/// int32 (BufferLayouts.h, MoeSaved).
constexpr int64_t kMaxRoutedRows = std::numeric_limits<int32_t>::max();

struct ShapeFacts {
  std::vector<int64_t> dims; ///< each must lie in [1, kMaxDim]
  int64_t hidden = 0;        ///< the activation width the layer reads/writes
  int64_t savedFloats = 0, workspaceFloats = 0;
  int64_t vocab = 0; ///< embedding, head and MTP layers: the vocabulary
};

/// The dimensions of `shape`, and, once they are known to be bounded, the
/// sizes it needs.
ShapeFacts factsOf(const LayerShape &shape, const TokenShape &tokens,
                   Target target, bool sized) {
  ShapeFacts f;
  std::visit(
      [&](const auto &s) {
        using S = std::decay_t<decltype(s)>;
        if constexpr (std::is_same_v<S, EmbeddingShape> ||
                      std::is_same_v<S, HeadShape>)
          f.dims = {s.vocab, s.hidden};
        else if constexpr (std::is_same_v<S, MtpInputShape> ||
                           std::is_same_v<S, MtpOutputShape>)
          f.dims = {s.vocab, s.hidden, s.depth};
        else if constexpr (std::is_same_v<S, MambaShape>)
          f.dims = {s.hidden, s.heads,  s.headDim,
                    s.state,  s.groups, s.convWidth};
        else if constexpr (std::is_same_v<S, AttentionShape>)
          f.dims = {s.hidden, s.heads, s.groups, s.headDim};
        else if constexpr (std::is_same_v<S, MlpShape>)
          f.dims = {s.hidden, s.ffn};
        else if constexpr (std::is_same_v<S, GdnShape>)
          f.dims = {s.hidden,     s.keyHeads,     s.valueHeads,
                    s.keyHeadDim, s.valueHeadDim, s.convWidth};
        else if constexpr (std::is_same_v<S, MlaShape>) {
          f.dims = {s.hidden,    s.heads,     s.kvLoraRank,
                    s.qkHeadDim, s.posEmbDim, s.vHeadDim};
          if (s.qLoraRank != 0) // 0: no query down-projection
            f.dims.push_back(s.qLoraRank);
        } else if constexpr (std::is_same_v<S, DsaShape>) {
          f.dims = {s.hidden,       s.heads,          s.kvLoraRank,
                    s.qkHeadDim,    s.posEmbDim,      s.vHeadDim,
                    s.indexerHeads, s.indexerHeadDim, s.topk};
          if (s.qLoraRank != 0)
            f.dims.push_back(s.qLoraRank);
        } else
          f.dims = {s.hidden, s.ffn, s.experts, s.topk};
        f.hidden = s.hidden;
        if constexpr (std::is_same_v<S, EmbeddingShape> ||
                      std::is_same_v<S, HeadShape> ||
                      std::is_same_v<S, MtpInputShape> ||
                      std::is_same_v<S, MtpOutputShape>)
          f.vocab = s.vocab;
        // A chunked loss's rows a chunk (0: the native loss).
        if constexpr (std::is_same_v<S, HeadShape> ||
                      std::is_same_v<S, MtpOutputShape>)
          if (s.lossChunk != 0)
            f.dims.push_back(s.lossChunk);
        if (!sized)
          return;
        f.savedFloats = s.savedFloats(tokens, target);
        f.workspaceFloats = s.workspaceFloats(tokens, target);
      },
      shape);
  return f;
}

/// Which slots a call of `kind` reads and writes in `pass` (0: forward, 1:
/// input gradient): whether `in` and `out` must be set.
std::pair<bool, bool> slotUse(LayerKind kind, int pass) {
  if (pass == 0) {
    switch (kind) {
    case LayerKind::Embedding:
    case LayerKind::MtpInput:
      return {false, true};
    case LayerKind::Head:
    case LayerKind::MtpOutput:
      return {true, false};
    default:
      return {true, true};
    }
  }
  switch (kind) {
  case LayerKind::Embedding:
    return {true, false};
  case LayerKind::Head:
  case LayerKind::MtpOutput:
    return {false, true};
  default:
    return {true, true};
  }
}

} // namespace

const char *dtypeName(DType d) { return kDTypeNames[size_t(d)]; }
std::optional<DType> parseDType(std::string_view name) {
  return parseName<DType>(kDTypeNames, name);
}
int64_t dtypeBytes(DType d) { return d == DType::BF16 ? 2 : 4; }

std::optional<LayerKind> parseLayerKind(std::string_view name) {
  for (int i = 0; i < int(std::size(kLayerKindNames)); ++i)
    if (name == kLayerKindNames[i])
      return LayerKind(i);
  return std::nullopt;
}

const char *slotName(Slot s) { return kSlotNames[size_t(s)]; }
const char *callOpName(CallOp op) { return kCallOpNames[size_t(op)]; }
std::optional<CallOp> parseCallOp(std::string_view name) {
  return parseName<CallOp>(kCallOpNames, name);
}
std::optional<Slot> parseSlot(std::string_view name) {
  return parseName<Slot>(kSlotNames, name);
}

/// One activation slot's bytes: [tokens, hidden] whole (a row-parallel
/// layer's partial output of every token lands there).
int64_t activationBytes(const StageProgram &p) {
  return p.tokens.batch * p.tokens.seq * p.hidden * dtypeBytes(DType::F32);
}

/// One checkpoint's bytes: the rank's rows (its sequence shard's with
/// sequence parallelism).
int64_t keptActivationBytes(const StageProgram &p) {
  return rankActivationFloats(p.tokens.batch * p.tokens.seq, p.hidden,
                              p.tensorParallel, p.sequenceParallel) *
         dtypeBytes(DType::F32);
}

std::vector<StashRun> stashRuns(const StageProgram &p, const TokenShape &t) {
  const bool bf16 = p.activations == DType::BF16;
  std::vector<StashRun> runs;
  auto add = [&](int64_t offset, int64_t floats, SavedType type) {
    runs.push_back({offset, floats, 0, bf16 && type == SavedType::Activation});
  };
  for (const ProgramLayer &l : p.layers) {
    if (l.recomputed)
      continue; // its tensors lie in the recompute buffer
    for (const SavedSpan &s : savedSpansOf(l.shard, t, l.modules))
      if (!s.again)
        add(l.saved.elementOffset() + s.offset, s.floats, s.type);
  }
  // A fully recomputed layer's input (the interpreter's activationFloats).
  const int64_t rows =
      p.sequenceParallel ? t.tokens() / p.tensorParallel : t.tokens();
  for (const KernelCall &c : p.forward)
    if (c.op == CallOp::Save)
      add(c.range.elementOffset(), rows * p.hidden, SavedType::Activation);
  std::sort(runs.begin(), runs.end(), [](const StashRun &a, const StashRun &b) {
    return a.offset < b.offset;
  });
  std::vector<StashRun> joined;
  int64_t at = 0;
  for (const StashRun &r : runs) {
    if (!joined.empty() && joined.back().bf16 == r.bf16 &&
        joined.back().offset + joined.back().floats == r.offset) {
      joined.back().floats += r.floats;
      continue;
    }
    if (!joined.empty())
      at += packedBytes(joined.back().floats, joined.back().bf16);
    joined.push_back(r);
    joined.back().at = at;
  }
  return joined;
}

int64_t stashBytes(const std::vector<StashRun> &runs) {
  if (runs.empty())
    return 0;
  const StashRun &last = runs.back();
  return last.at + packedBytes(last.floats, last.bf16);
}

int64_t stashSlotBytes(const StageProgram &p) {
  return stashBytes(stashRuns(p, p.tokens));
}

namespace {

bool inside(const TensorRange &r, int64_t size) {
  return r.offset >= 0 && r.bytes >= 0 && r.offset <= size - r.bytes &&
         r.offset % dtypeBytes(r.dtype) == 0;
}

std::string rangeText(const TensorRange &r) {
  return fmt::format("[{}, +{}) {}", r.offset, r.bytes, dtypeName(r.dtype));
}

/// Buffer sizes and the token shape: bounded, so no size overflows.
std::string checkSizes(const StageProgram &p) {
  for (int64_t n :
       {p.paramBytes, p.savedBytes, p.workspaceBytes, p.recomputeBytes})
    if (n < 0 || n > kMaxBytes)
      return fmt::format("a buffer of {} bytes", n);
  if (p.tokens.batch < 1 || p.tokens.seq < 1 || p.hidden < 1 ||
      p.tokens.batch > kMaxDim || p.tokens.seq > kMaxDim ||
      p.hidden > kMaxDim || activationBytes(p) > kMaxBytes)
    return fmt::format("tokens [{} x {}] of width {}", p.tokens.batch,
                       p.tokens.seq, p.hidden);

  return "";
}

/// Why a shape's real-valued settings are not ones a layer computes with
/// ("" when they are): finite, a rotary base and YaRN's factor above 0, the
/// loss coefficients and a capacity factor 0 or more.
std::string settingsProblem(const LayerShape &shape) {
  auto bad = [](const char *name, double value, const char *must) {
    return fmt::format("{} {} ({})", name, value, must);
  };
  return std::visit(
      [&](const auto &s) -> std::string {
        using S = std::decay_t<decltype(s)>;
        if constexpr (std::is_same_v<S, AttentionShape>) {
          if (!(s.ropeBase > 0 && std::isfinite(s.ropeBase)))
            return bad("rope_base", s.ropeBase, "a rotary base is above 0");
        } else if constexpr (std::is_same_v<S, MlaShape> ||
                             std::is_same_v<S, DsaShape>) {
          if (!(s.rotaryBase > 0 && std::isfinite(s.rotaryBase)))
            return bad("rotary_base", s.rotaryBase, "a rotary base is above 0");
          if (!(s.scalingFactor > 0 && std::isfinite(s.scalingFactor)))
            return bad("rotary_scaling_factor", s.scalingFactor,
                       "YaRN's factor is above 0");
          if (!std::isfinite(s.mscale) || !std::isfinite(s.mscaleAllDim))
            return bad("mscale", s.mscale, "finite");
          if constexpr (std::is_same_v<S, DsaShape>)
            if (!(s.lossCoeff >= 0 && std::isfinite(s.lossCoeff)))
              return bad("dsa_indexer_loss_coeff", s.lossCoeff, "0 or more");
        } else if constexpr (std::is_same_v<S, MoeShape>) {
          if (!(s.auxLossCoeff >= 0 && std::isfinite(s.auxLossCoeff)))
            return bad("aux_loss_coeff", s.auxLossCoeff, "0 or more");
          if (!(s.capacityFactor >= 0 && std::isfinite(s.capacityFactor)))
            return bad("capacity_factor", s.capacityFactor, "0 or more");
        } else if constexpr (std::is_same_v<S, MtpOutputShape>) {
          if (!(s.lossWeight >= 0 && std::isfinite(s.lossWeight)))
            return bad("loss_weight", s.lossWeight, "0 or more");
        }
        return "";
      },
      shape);
}

/// Every layer: a bounded shape of its kind and width, real-valued settings
/// it computes with, f32 ranges exactly the sizes its shape needs inside the
/// buffers, the shared MTP tensors. `scratchNeeded`: the largest scratch a
/// layer needs.
std::string checkLayers(const StageProgram &p, int64_t &scratchNeeded) {
  scratchNeeded = 0;
  bool mtp = false;
  for (size_t i = 0; i < p.layers.size(); ++i) {
    const ProgramLayer &l = p.layers[i];
    std::string what =
        fmt::format("layer {} ({} {})", i, layerKindName(l.kind), l.layer);
    if (l.shape.index() != size_t(l.kind) || l.shard.index() != size_t(l.kind))
      return what + ": its shape is of another kind";
    ShapeFacts f = factsOf(l.shard, p.tokens, p.target, false);
    std::vector<int64_t> dims = f.dims;
    for (int64_t d : factsOf(l.shape, p.tokens, p.target, false).dims)
      dims.push_back(d);
    for (int64_t d : dims)
      if (d < 1 || d > kMaxDim)
        return fmt::format("{}: a dimension of {}", what, d);
    if (l.layer < 0)
      return fmt::format("{}: the layer number {}", what, l.layer);
    if (std::string why = settingsProblem(l.shape); !why.empty())
      return fmt::format("{}: {}", what, why);
    const int64_t tokens = p.tokens.batch * p.tokens.seq;
    if (const auto *moe = std::get_if<MoeShape>(&l.shard);
        moe && moe->topk > kMaxRoutedRows / tokens)
      return fmt::format("{}: {} tokens routed to {} experts each, more "
                         "routed rows than its int32 row map holds",
                         what, tokens, moe->topk);
    if (const auto *gdn = std::get_if<GdnShape>(&l.shard);
        gdn && gdn->valueHeads % gdn->keyHeads != 0)
      return fmt::format("{}: {} value heads, not whole groups of its {} key "
                         "heads",
                         what, gdn->valueHeads, gdn->keyHeads);
    f = factsOf(l.shard, p.tokens, p.target, true);
    if (f.hidden != p.hidden)
      return fmt::format("{}: width {}, but the stage's activations are {}",
                         what, f.hidden, p.hidden);
    for (const TensorRange *r : {&l.params, &l.saved})
      if (r->dtype != DType::F32)
        return fmt::format("{}: a {} tensor, and the kernels take f32 only "
                           "for now",
                           what, dtypeName(r->dtype));
    // This rank's shard of each (whole) parameter.
    const int64_t paramFloats =
        rankNumel(paramsOf(l.shape, 1), p.tensorParallel);
    if (l.params.bytes != kF32 * paramFloats || !inside(l.params, p.paramBytes))
      return fmt::format("{}: parameters {}, but its shape has {} bytes of "
                         "them in a buffer of {}",
                         what, rangeText(l.params), kF32 * paramFloats,
                         p.paramBytes);
    // A recomputed layer keeps its tensors in the recompute buffer; the
    // layers that end in a loss are never recomputed (their forward adds
    // to the stage's outputs). A selective one keeps the tensors of the
    // modules it drops there, the rest in the saved buffer.
    const int64_t savedIn = l.recomputed ? p.recomputeBytes : p.savedBytes;
    if ((l.modules & ~selectiveModulesOf(l.kind)) ||
        (l.modules && l.recomputed))
      return what + ": recomputes modules selective recompute does not drop "
                    "of its kind, or is both recomputed and selective";
    const int64_t dropped =
        kF32 * recomputedFloatsOf(l.shard, p.tokens, l.modules);
    if (l.modules && (l.again.dtype != DType::F32 || l.again.bytes != dropped ||
                      !inside(l.again, p.recomputeBytes)))
      return fmt::format("{}: recomputed modules {}, but they hold {} bytes "
                         "in a recompute buffer of {}",
                         what, rangeText(l.again), dropped, p.recomputeBytes);
    if (l.saved.bytes != kF32 * f.savedFloats - dropped ||
        !inside(l.saved, savedIn))
      return fmt::format("{}: {} tensors {}, but its shape keeps {} bytes "
                         "in a buffer of {}",
                         what, l.recomputed ? "recomputed" : "saved",
                         rangeText(l.saved), kF32 * f.savedFloats - dropped,
                         savedIn);
    if (l.recomputed &&
        (l.kind == LayerKind::Head || l.kind == LayerKind::MtpOutput ||
         l.kind == LayerKind::Embedding))
      return what + ": recomputed, but its forward ends in a loss or reads "
                    "the tokens: only a stage's layers and MTP depths' "
                    "inputs recompute";
    // A recomputed MTP input reads the normed hidden states the head or
    // the depth before it keeps: the layer before it.
    if (l.recomputed && l.kind == LayerKind::MtpInput &&
        (i == 0 || p.layers[i - 1].recomputed ||
         (p.layers[i - 1].kind != LayerKind::Head &&
          p.layers[i - 1].kind != LayerKind::MtpOutput)))
      return what + ": a recomputed MTP input whose layer before is not "
                    "the head or an MTP depth's output";
    scratchNeeded = std::max(scratchNeeded, kF32 * f.workspaceFloats);
    if (l.kind == LayerKind::MtpInput || l.kind == LayerKind::MtpOutput) {
      mtp = true;
      const int64_t table = kF32 * f.vocab * p.hidden;
      for (const TensorRange *r : {&p.sharedOutput, &p.sharedTable})
        if (r->bytes != table || !inside(*r, p.paramBytes))
          return fmt::format("{}: the shared output layer or embedding "
                             "table {} is not [{} x {}] inside the "
                             "parameters",
                             what, rangeText(*r), f.vocab, p.hidden);
    }
  }
  if (!mtp && (!p.sharedOutput.empty() || !p.sharedTable.empty()))
    return "shared MTP tensors in a stage without an MTP depth";

  return "";
}

/// The workspace: both activation slots and the scratch inside it, large
/// enough, not overlapping.
std::string checkWorkspace(const StageProgram &p, int64_t scratchNeeded) {
  const int64_t act = activationBytes(p);
  for (const TensorRange *r : {&p.act0, &p.act1})
    if (r->bytes < act || !inside(*r, p.workspaceBytes))
      return fmt::format("an activation slot {} in a workspace of {} bytes "
                         "(an activation is {} bytes)",
                         rangeText(*r), p.workspaceBytes, act);
  if (p.scratch.bytes < scratchNeeded || !inside(p.scratch, p.workspaceBytes))
    return fmt::format("scratch {} in a workspace of {} bytes; the layers "
                       "need {}",
                       rangeText(p.scratch), p.workspaceBytes, scratchNeeded);
  auto overlap = [](const TensorRange &a, const TensorRange &b) {
    return a.offset < b.end() && b.offset < a.end();
  };
  if (overlap(p.act0, p.act1) || overlap(p.act0, p.scratch) ||
      overlap(p.act1, p.scratch))
    return "the activation slots and the scratch overlap";
  if (p.rc0.empty() && p.rc1.empty())
    return "";
  for (const TensorRange *r : {&p.rc0, &p.rc1})
    if (r->bytes < act || !inside(*r, p.workspaceBytes))
      return fmt::format("a recompute slot {} in a workspace of {} bytes "
                         "(an activation is {} bytes)",
                         rangeText(*r), p.workspaceBytes, act);
  for (const TensorRange *r : {&p.act0, &p.act1, &p.scratch, &p.rc1})
    if (overlap(p.rc0, *r) || (r != &p.rc1 && overlap(p.rc1, *r)))
      return "the recompute slots overlap the workspace's other parts";

  return "";
}

/// What the saves, loads and recomputes of a program have done so far.
struct RecomputeSteps {
  std::vector<TensorRange> saves; ///< the forward's checkpoints
  bool rcWritten[2] = {false, false};
  std::vector<int> recomputes; ///< per layer, in the input-gradient pass
};

/// One save (forward), load or recompute (input gradient): checkpoints of
/// one activation inside the saved buffer, loads of a checkpoint the
/// forward kept into a recompute slot, recomputes of a recomputed layer
/// before its input gradient, reading and writing the recompute slots in
/// order. `runs`: the pass's calls of each layer so far.
std::string checkRecomputeStep(const StageProgram &p, const KernelCall &c,
                               int pass, bool actWritten[2],
                               RecomputeSteps &steps,
                               const std::vector<int> &runs) {
  auto isRc = [](Slot s) { return s == Slot::Rc0 || s == Slot::Rc1; };
  auto rcReadable = [&](Slot s) {
    return isRc(s) && steps.rcWritten[s == Slot::Rc1];
  };
  const Slot stageIn = Slot::Input;
  switch (c.op) {
  case CallOp::Save:
    if (pass != 0)
      return "only the forward keeps a checkpoint";
    if (c.range.dtype != DType::F32 ||
        c.range.bytes != keptActivationBytes(p) ||
        !inside(c.range, p.savedBytes))
      return fmt::format("checkpoint {} is not one activation ({} bytes) "
                         "inside the {}-byte saved buffer",
                         rangeText(c.range), keptActivationBytes(p),
                         p.savedBytes);
    if (c.in != stageIn && !((c.in == Slot::Act0 && actWritten[0]) ||
                             (c.in == Slot::Act1 && actWritten[1])))
      return fmt::format("keeps '{}', which holds no activation yet",
                         slotName(c.in));
    steps.saves.push_back(c.range);
    return "";
  case CallOp::Load:
    if (pass != 1)
      return "only the input-gradient pass loads a checkpoint";
    if (std::find(steps.saves.begin(), steps.saves.end(), c.range) ==
        steps.saves.end())
      return fmt::format("loads {}, which the forward did not keep",
                         rangeText(c.range));
    if (!isRc(c.out) || p.rc0.empty())
      return fmt::format("loads into '{}', not a recompute slot",
                         slotName(c.out));
    steps.rcWritten[c.out == Slot::Rc1] = true;
    return "";
  case CallOp::Recompute: {
    if (pass != 1)
      return "only the input-gradient pass recomputes";
    if (c.layer < 0 || c.layer >= int64_t(p.layers.size()) ||
        !(p.layers[size_t(c.layer)].recomputed ||
          p.layers[size_t(c.layer)].modules))
      return fmt::format("layer {} is not a recomputed layer", c.layer);
    if (p.layers[size_t(c.layer)].modules) {
      // Selective: from the layer's kept tensors, no slot; the moe module
      // runs the layer's forward again into rc0 through rc1.
      const bool wholeMoe =
          p.layers[size_t(c.layer)].modules & moduleBit(RecomputeModule::Moe);
      const Slot out = wholeMoe ? Slot::Rc0 : Slot::None;
      if (c.in != Slot::None || c.out != out || (wholeMoe && p.rc0.empty()) ||
          runs[size_t(c.layer)] > 0 || steps.recomputes[size_t(c.layer)]++ > 0)
        return fmt::format("layer {} is recomputed twice, after its input "
                           "gradient, or through a slot",
                           c.layer);
      return "";
    }
    if (runs[size_t(c.layer)] > 0 || steps.recomputes[size_t(c.layer)]++ > 0)
      return fmt::format("layer {} is recomputed twice or after its input "
                         "gradient",
                         c.layer);
    if (p.rc0.empty())
      return fmt::format("layer {} runs again with no recompute slots",
                         c.layer);
    auto [needIn, needOut] = slotUse(p.layers[size_t(c.layer)].kind, 0);
    if (needIn != rcReadable(c.in) || (!needIn && c.in != Slot::None) ||
        needOut != isRc(c.out) || (!needOut && c.out != Slot::None) ||
        (needIn && c.in == c.out))
      return fmt::format("layer {} reads '{}' and writes '{}'", c.layer,
                         slotName(c.in), slotName(c.out));
    if (needOut)
      steps.rcWritten[c.out == Slot::Rc1] = true;
    return "";
  }
  case CallOp::Run:
    break;
  }
  return "not a save, load or recompute";
}

/// The three passes' calls: existing layers, each once, slots their pass
/// has, nothing read before it is written, the stage's ends used once;
/// recomputed layers recomputed once before their input gradient.
std::string checkCalls(const StageProgram &p, bool hasEmbedding, bool hasHead) {
  const std::vector<KernelCall> *passes[] = {&p.forward, &p.backwardInput,
                                             &p.backwardWeight};
  const char *passNames[] = {"forward", "backward_input", "backward_weight"};
  RecomputeSteps steps;
  steps.recomputes.assign(p.layers.size(), 0);
  for (int pass = 0; pass < 3; ++pass) {
    std::vector<int> runs(p.layers.size(), 0);
    bool written[2] = {false, false};
    int outputs = 0, inputs = 0;
    const Slot stageIn = pass == 0 ? Slot::Input : Slot::GradOutput;
    const Slot stageOut = pass == 0 ? Slot::Output : Slot::GradInput;
    for (const KernelCall &c : *passes[pass]) {
      // Every collective a layer's kernels run is the program's.
      const bool ofLayer = (c.op == CallOp::Run || c.op == CallOp::Recompute) &&
                           c.layer >= 0 && c.layer < int64_t(p.layers.size());
      const std::vector<Collective> listed =
          ofLayer ? collectivesOfCall(p.layers[size_t(c.layer)], c.op,
                                      StagePass(pass), p.tensorParallel,
                                      p.sequenceParallel)
                  : std::vector<Collective>{};
      if (c.collectives != listed)
        return fmt::format("{} {} of layer {}: {} tensor-parallel "
                           "collectives, where its layer runs {}",
                           passNames[pass], callOpName(c.op), c.layer,
                           c.collectives.size(), listed.size());
      if (c.op != CallOp::Run) {
        std::string why = checkRecomputeStep(p, c, pass, written, steps, runs);
        if (!why.empty())
          return fmt::format("{} {}: {}", passNames[pass], callOpName(c.op),
                             why);
        continue;
      }
      std::string what =
          fmt::format("{} call of layer {}", passNames[pass], c.layer);
      if (pass == 1 && c.layer >= 0 && c.layer < int64_t(p.layers.size()) &&
          (p.layers[size_t(c.layer)].recomputed ||
           p.layers[size_t(c.layer)].modules) &&
          steps.recomputes[size_t(c.layer)] != 1)
        return what + ": a recomputed layer's input gradient before its "
                      "forward ran again";
      if (c.layer < -1 || c.layer >= int64_t(p.layers.size()) ||
          (c.layer == -1 && pass == 2))
        return what + ": no such layer";
      bool needIn = true, needOut = true;
      if (pass == 2)
        needIn = needOut = false;
      else if (c.layer >= 0)
        std::tie(needIn, needOut) = slotUse(p.layers[c.layer].kind, pass);
      if (c.layer >= 0)
        ++runs[size_t(c.layer)];
      auto readable = [&](Slot s) {
        return s == stageIn || s == Slot::Act0 || s == Slot::Act1;
      };
      auto writable = [&](Slot s) {
        return s == stageOut || s == Slot::Act0 || s == Slot::Act1;
      };
      if (needIn != (c.in != Slot::None) || needOut != (c.out != Slot::None) ||
          (needIn && !readable(c.in)) || (needOut && !writable(c.out)) ||
          (needIn && needOut && c.in == c.out))
        return fmt::format("{}: reads '{}' and writes '{}'", what,
                           slotName(c.in), slotName(c.out));
      if ((c.in == Slot::Act0 && !written[0]) ||
          (c.in == Slot::Act1 && !written[1]))
        return fmt::format("{}: reads '{}' before anything wrote it", what,
                           slotName(c.in));
      inputs += c.in == stageIn;
      if (c.out == Slot::Act0 || c.out == Slot::Act1)
        written[c.out == Slot::Act1] = true;
      outputs += c.out == stageOut;
    }
    for (size_t i = 0; i < runs.size(); ++i)
      if (runs[i] != 1)
        return fmt::format("{} runs layer {} {} times", passNames[pass], i,
                           runs[i]);
    if (pass == 2)
      continue;
    // The stage's input exists unless it starts the model (forward) or ends
    // it (input gradient); its output likewise, and is written once.
    const bool noIn = pass == 0 ? hasEmbedding : hasHead;
    const bool noOut = pass == 0 ? hasHead : hasEmbedding;
    if ((noIn && inputs > 0) || (noOut ? outputs != 0 : outputs != 1))
      return fmt::format("{} reads the stage's '{}' {} times and writes its "
                         "'{}' {} times",
                         passNames[pass], slotName(stageIn), inputs,
                         slotName(stageOut), outputs);
  }
  return "";
}

} // namespace

std::string shardLayers(StageProgram &p) {
  if (p.tensorParallel < 1 || p.tensorParallel > kMaxDim)
    return fmt::format("a tensor-parallel size of {}", p.tensorParallel);
  for (ProgramLayer &l : p.layers) {
    if (std::string why = tensorParallelProblem(l.shape, p.tensorParallel);
        !why.empty())
      return fmt::format("layer {} ({}): {}", l.layer, layerKindName(l.kind),
                         why);
    l.shard =
        tensorParallelShard(l.shape, p.tensorParallel, p.sequenceParallel);
  }
  return "";
}

std::vector<Collective> collectivesOfCall(const ProgramLayer &layer, CallOp op,
                                          StagePass pass, int64_t tp,
                                          bool sequenceParallel) {
  if (op != CallOp::Run && op != CallOp::Recompute)
    return {};
  return rt::collectivesOfCall(layer.shape, tp, sequenceParallel, pass,
                               op == CallOp::Recompute, layer.recomputed,
                               layer.modules);
}

std::string checkStageProgram(const StageProgram &p, bool hasEmbedding,
                              bool hasHead) {
  // In order: each check relies on the bounds the ones before it hold.
  int64_t scratchNeeded = 0;
  if (std::string why = checkSizes(p); !why.empty())
    return why;
  if (std::string why = checkLayers(p, scratchNeeded); !why.empty())
    return why;
  if (std::string why = checkWorkspace(p, scratchNeeded); !why.empty())
    return why;
  return checkCalls(p, hasEmbedding, hasHead);
}

} // namespace hypipe::rt
