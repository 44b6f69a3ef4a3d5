//===- Recompute.h - activation recompute, as Megatron-LM configures it ---===//
//
// `training.recompute` of the spec and Megatron-LM's flags
// (--recompute-granularity, --recompute-method, --recompute-num-layers,
// --recompute-modules; megatron/core/transformer/transformer_config.py):
// parsed once where they are read, carried as this struct by the compiler,
// which turns it into a change of every stage's kernel program
// (pipe-recompute, docs/recompute.md). LLVM-free.
//
// Full recompute checkpoints a stage's main layers -- every pattern symbol
// counts one, as in Megatron's MambaStack and TransformerBlock -- in chunks:
// `uniform` cuts the stage's layers into chunks of num_layers (the last may
// be shorter), `block` checkpoints the first num_layers layers one by one
// and keeps the rest. Only a chunk's input is kept between the forward and
// the backward; the chunk's forward runs again, from it, just before its
// input gradient. An MTP depth (its input projection and its layers) is one
// chunk whatever the method, as Megatron checkpoints it whole.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_MODEL_RECOMPUTE_H
#define HYPIPE_CORE_MODEL_RECOMPUTE_H

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hypipe {

/// --recompute-granularity; None: the flag's absence.
enum class RecomputeGranularity { None, Full, Selective };
/// --recompute-method (full recompute only).
enum class RecomputeMethod { Uniform, Block };
/// --recompute-modules, Megatron's names (selective recompute only).
enum class RecomputeModule {
  CoreAttn,
  Mlp,
  Moe,
  MoeAct,
  LayerNorm,
  SharedExperts,
  MlaUpProj,
  GdnNormOut
};

inline const char *recomputeGranularityName(RecomputeGranularity g) {
  switch (g) {
  case RecomputeGranularity::Full:
    return "full";
  case RecomputeGranularity::Selective:
    return "selective";
  case RecomputeGranularity::None:
    break;
  }
  return "none";
}

inline constexpr RecomputeGranularity kRecomputeGranularities[] = {
    RecomputeGranularity::None, RecomputeGranularity::Full,
    RecomputeGranularity::Selective};

inline std::optional<RecomputeGranularity>
parseRecomputeGranularity(std::string_view name) {
  for (RecomputeGranularity g : kRecomputeGranularities)
    if (name == recomputeGranularityName(g))
      return g;
  return std::nullopt;
}

inline const char *recomputeMethodName(RecomputeMethod m) {
  return m == RecomputeMethod::Block ? "block" : "uniform";
}

inline constexpr RecomputeMethod kRecomputeMethods[] = {
    RecomputeMethod::Uniform, RecomputeMethod::Block};

inline std::optional<RecomputeMethod>
parseRecomputeMethod(std::string_view name) {
  for (RecomputeMethod m : kRecomputeMethods)
    if (name == recomputeMethodName(m))
      return m;
  return std::nullopt;
}

inline const char *recomputeModuleName(RecomputeModule m) {
  switch (m) {
  case RecomputeModule::CoreAttn:
    return "core_attn";
  case RecomputeModule::Mlp:
    return "mlp";
  case RecomputeModule::Moe:
    return "moe";
  case RecomputeModule::MoeAct:
    return "moe_act";
  case RecomputeModule::LayerNorm:
    return "layernorm";
  case RecomputeModule::SharedExperts:
    return "shared_experts";
  case RecomputeModule::MlaUpProj:
    return "mla_up_proj";
  case RecomputeModule::GdnNormOut:
    return "gdn_norm_out";
  }
  return "?";
}

inline constexpr RecomputeModule kRecomputeModules[] = {
    RecomputeModule::CoreAttn,  RecomputeModule::Mlp,
    RecomputeModule::Moe,       RecomputeModule::MoeAct,
    RecomputeModule::LayerNorm, RecomputeModule::SharedExperts,
    RecomputeModule::MlaUpProj, RecomputeModule::GdnNormOut};

inline std::optional<RecomputeModule>
parseRecomputeModule(std::string_view name) {
  for (RecomputeModule m : kRecomputeModules)
    if (name == recomputeModuleName(m))
      return m;
  return std::nullopt;
}

/// The layer symbols of the layers that hold `m` (any one will do): what a
/// model needs for selective recompute to find the module. Empty for
/// shared_experts: hypipe's MoE layers have no shared experts. Mamba
/// layers (`M`) hold no module; only full recompute recomputes them.
inline std::string_view recomputeModuleLayers(RecomputeModule m) {
  switch (m) {
  case RecomputeModule::CoreAttn:
    return "*";
  case RecomputeModule::Mlp:
    return "-";
  case RecomputeModule::Moe:
  case RecomputeModule::MoeAct:
    return "E";
  case RecomputeModule::LayerNorm:
    return "*-E";
  case RecomputeModule::SharedExperts:
    return "";
  case RecomputeModule::MlaUpProj:
    return "+";
  case RecomputeModule::GdnNormOut:
    return "G";
  }
  return "";
}

/// A set of modules, one bit each (moduleBit): what selective recompute
/// drops of one layer.
using RecomputeModuleSet = uint32_t;
inline RecomputeModuleSet moduleBit(RecomputeModule m) {
  return RecomputeModuleSet(1) << unsigned(m);
}

struct RecomputeSpec {
  RecomputeGranularity granularity = RecomputeGranularity::None;
  RecomputeMethod method = RecomputeMethod::Uniform;
  int64_t numLayers = 0; ///< full: the chunk size (uniform) or count (block)
  /// selective: what is recomputed (Megatron's default: core_attn).
  std::vector<RecomputeModule> modules;

  bool full() const { return granularity == RecomputeGranularity::Full; }
  bool operator==(const RecomputeSpec &o) const {
    return granularity == o.granularity && method == o.method &&
           numLayers == o.numLayers && modules == o.modules;
  }
  bool operator!=(const RecomputeSpec &o) const { return !(*this == o); }
};

/// The modules selective recompute drops under `spec` (none for another
/// granularity); the moe module holds the experts' activations, so moe_act
/// comes with it.
inline RecomputeModuleSet selectiveModuleSet(const RecomputeSpec &spec) {
  RecomputeModuleSet set = 0;
  if (spec.granularity == RecomputeGranularity::Selective)
    for (RecomputeModule m : spec.modules)
      set |= moduleBit(m);
  if (set & moduleBit(RecomputeModule::Moe))
    set |= moduleBit(RecomputeModule::MoeAct);
  return set;
}

/// Full recompute by `method` of `numLayers`.
inline RecomputeSpec fullRecompute(RecomputeMethod method, int64_t numLayers) {
  RecomputeSpec r;
  r.granularity = RecomputeGranularity::Full;
  r.method = method;
  r.numLayers = numLayers;
  return r;
}

/// Selective recompute of `modules`.
inline RecomputeSpec selectiveRecompute(std::vector<RecomputeModule> modules) {
  RecomputeSpec r;
  r.granularity = RecomputeGranularity::Selective;
  r.modules = std::move(modules);
  return r;
}

/// Full recompute's chunks of a stage with `layers` main layers: [begin,
/// end) layer positions within the stage, in order; empty when `spec` is
/// not full recompute.
inline std::vector<std::pair<int64_t, int64_t>>
recomputeChunks(const RecomputeSpec &spec, int64_t layers) {
  std::vector<std::pair<int64_t, int64_t>> chunks;
  if (!spec.full() || spec.numLayers < 1)
    return chunks;
  if (spec.method == RecomputeMethod::Block) {
    for (int64_t i = 0; i < std::min(spec.numLayers, layers); ++i)
      chunks.push_back({i, i + 1});
    return chunks;
  }
  for (int64_t i = 0; i < layers; i += spec.numLayers)
    chunks.push_back({i, std::min(i + spec.numLayers, layers)});
  return chunks;
}

/// The Megatron-LM flags of `spec` (empty for none), as `hypipe plan`
/// prints them.
inline std::string recomputeFlags(const RecomputeSpec &spec) {
  std::string out;
  if (spec.granularity == RecomputeGranularity::None)
    return out;
  out = std::string("--recompute-granularity ") +
        recomputeGranularityName(spec.granularity);
  if (spec.full())
    out += std::string(" --recompute-method ") +
           recomputeMethodName(spec.method) + " --recompute-num-layers " +
           std::to_string(spec.numLayers);
  if (spec.granularity == RecomputeGranularity::Selective &&
      !spec.modules.empty()) {
    out += " --recompute-modules";
    for (RecomputeModule m : spec.modules)
      out += std::string(" ") + recomputeModuleName(m);
  }
  return out;
}

} // namespace hypipe

#endif
