//===- Interop.cpp - checkpoints to and from Hugging Face and Megatron-LM -===//

#include "runtime/formats/Interop.h"

#include "core/io/Files.h"
#include "core/model/LayerShapes.h"
#include "core/model/ModelDims.h"
#include "core/numeric/Bf16.h"
#include "runtime/formats/Checkpoint.h"
#include "runtime/formats/FileCheck.h"
#include "runtime/formats/HfArchitectures.h"
#include "runtime/formats/SafeTensors.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

namespace hypipe::rt {
namespace {

using json = nlohmann::json;
using hf::configInt;
using hf::configOr;

int64_t numel(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// The layer symbols of a pattern: stage boundaries dropped. MTP ('/') and
/// symbols NemotronH has no block for are refused by the caller.
std::string layerSymbols(const std::string &pattern) {
  std::string out;
  for (char c : pattern)
    if (c != '|')
      out += c;
  return out;
}

/// Why NemotronH cannot express `m`, or "" when it can.
std::string inexpressible(const ModelInfo &m, const std::string &layers) {
  if (layers.find('/') != std::string::npos)
    return "the pattern has multi-token prediction ('/'), and hypipe exports "
           "the main model only (NemotronH checkpoints carry no MTP depths "
           "in the mapping hypipe follows)";
  for (size_t i = 0; i < layers.size(); ++i) {
    const char c = layers[i];
    if (c == 'E')
      return fmt::format(
          "layer {} is a mixture of experts ('E'): Hugging Face's NemotronH "
          "MoE blocks (Nemotron 3) route with a sigmoid, a score-correction "
          "bias and shared experts, which hypipe's softmax top-k MoE does "
          "not have",
          i + 1);
    if (c == '*' && m.positionEmbedding == "rope")
      return fmt::format(
          "layer {} is attention with RoPE, and NemotronH's attention has no "
          "position embedding",
          i + 1);
    if (c == '-' && m.activation == "swiglu")
      return fmt::format("layer {} is an MLP with swiglu, and NemotronH's MLP "
                         "is up_proj, an activation and down_proj (no gate)",
                         i + 1);
    if (c != 'M' && c != '*' && c != '-' && c != 'E')
      return fmt::format("layer {} is '{}', which NemotronH has no block for",
                         i + 1, c);
  }
  return "";
}

const char *hfActivation(const std::string &act) {
  return act == "gelu" ? "gelu" : "relu2";
}

/// Rows of Megatron's linear_qkv for query group g: its heads' q rows, then
/// its k rows, then its v rows (docs/model.md), each `d` rows.
struct QkvLayout {
  int64_t heads, groups, d;
  int64_t perGroup() const { return (heads / groups + 2) * d; }
  int64_t qRows() const { return heads / groups * d; }
};

/// An integer of NemotronH's config.json: the spec key it is (what hypipe's
/// rules and messages call it) and the ModelInfo member it fills. The one
/// table the export writes and the import reads.
struct ConfigInt {
  const char *key, *specKey;
  int64_t ModelInfo::*member;
};

constexpr ConfigInt kConfigInts[] = {
    {"vocab_size", "vocab_size", &ModelInfo::vocab},
    {"hidden_size", "hidden_size", &ModelInfo::hidden},
    {"intermediate_size", "ffn_hidden_size", &ModelInfo::ffnHidden},
    {"num_attention_heads", "num_attention_heads", &ModelInfo::numHeads},
    {"num_key_value_heads", "num_query_groups", &ModelInfo::numQueryGroups},
    {"mamba_num_heads", "mamba_num_heads", &ModelInfo::mambaNumHeads},
    {"mamba_head_dim", "mamba_head_dim", &ModelInfo::mambaHeadDim},
    {"ssm_state_size", "mamba_state_dim", &ModelInfo::mambaState},
    {"n_groups", "mamba_num_groups", &ModelInfo::mambaNumGroups},
    {"conv_kernel", "mamba_conv_width", &ModelInfo::mambaConvWidth},
};

/// transformers' NemotronH layer names (with the legacy ones it remaps) and
/// the pattern symbols they are.
constexpr std::pair<const char *, char> kBlockTypes[] = {
    {"linear_attention", 'M'}, {"mamba", 'M'}, {"full_attention", '*'},
    {"attention", '*'},        {"mlp", '-'},   {"moe", 'E'}};

json nemotronHConfig(const ModelInfo &m, const std::string &layers) {
  json c;
  c["architectures"] = {"NemotronHForCausalLM"};
  c["model_type"] = "nemotron_h";
  for (const ConfigInt &f : kConfigInts)
    c[f.key] = m.*f.member;
  c["tie_word_embeddings"] = m.tieEmbeddings;
  c["num_hidden_layers"] = int64_t(layers.size());
  c["hybrid_override_pattern"] = layers; // transformers 4, Megatron
  json blockTypes = json::array();       // transformers 5
  for (char symbol : layers)
    for (const auto &[name, s] : kBlockTypes)
      if (s == symbol) {
        blockTypes.push_back(name);
        break;
      }
  c["layers_block_type"] = blockTypes;
  c["head_dim"] = m.kvChannels;
  c["attention_bias"] = false;
  c["attention_dropout"] = 0.0;
  c["hidden_dropout"] = 0.0;
  c["mlp_bias"] = false;
  c["use_bias"] = false;
  c["mlp_hidden_act"] = hfActivation(m.activation);
  // transformers 5 types `expand` as an int (a float fails its config's
  // validation) and takes the Mamba inner width from mamba_num_heads x
  // mamba_head_dim: the nearest whole ratio, for readers that want one.
  c["expand"] =
      m.hidden
          ? std::max<int64_t>(
                1, (m.mambaNumHeads * m.mambaHeadDim + m.hidden / 2) / m.hidden)
          : int64_t(1);
  c["mamba_hidden_act"] = "silu";
  c["use_conv_bias"] = true;
  c["mamba_proj_bias"] = false;
  // transformers clamps the Mamba step size from below at time_step_min
  // (default 0.001: its mixer's time_step_limit); Megatron-LM, mamba_ssm and
  // hypipe do not clamp, and a trained model's steps fall below 0.001. At 0
  // the clamp is a no-op (softplus is positive); transformers' initialiser,
  // the field's only other reader, floors at time_step_floor.
  c["time_step_min"] = 0.0;
  c["chunk_size"] = 128;
  c["layer_norm_epsilon"] = 1e-5;
  c["residual_in_fp32"] = false;
  c["initializer_range"] = 0.02;
  c["use_cache"] = true;
  c["torch_dtype"] = "float32";
  return c;
}

/// Every tensor of a NemotronH model: hypipe's names and NemotronH's, the
/// attention's linear_qkv cut into q, k and v (Megatron-Bridge's NemotronH
/// mapping).
std::vector<hf::TensorMap> nemotronHTensors(const ModelInfo &m,
                                            const std::string &layers) {
  std::vector<hf::TensorMap> out = {
      {"embedding.word_embeddings.weight", {{"backbone.embeddings.weight"}}}};
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string ours = fmt::format("decoder.layers.{}.", i);
    const std::string hf = fmt::format("backbone.layers.{}.", i);
    auto add = [&](const std::string &a, const std::string &b) {
      out.push_back({ours + a, {{hf + b}}});
    };
    switch (layers[i]) {
    case 'M':
      add("mixer.in_proj.layer_norm_weight", "norm.weight");
      add("mixer.conv1d_weight", "mixer.conv1d.weight");
      add("mixer.conv1d_bias", "mixer.conv1d.bias");
      for (const char *p : {"in_proj.weight", "dt_bias", "A_log", "D",
                            "norm.weight", "out_proj.weight"})
        add(std::string("mixer.") + p, std::string("mixer.") + p);
      break;
    case '*': {
      add("self_attention.linear_qkv.layer_norm_weight", "norm.weight");
      // Megatron's rows per query group [q of its heads | k | v], gathered
      // group by group into q_proj, k_proj and v_proj.
      const QkvLayout q{m.numHeads, m.numQueryGroups, m.kvChannels};
      auto rows = [&](int64_t first, int64_t count) {
        std::vector<int64_t> picked;
        for (int64_t g = 0; g < q.groups; ++g)
          for (int64_t r = 0; r < count; ++r)
            picked.push_back(g * q.perGroup() + first + r);
        return picked;
      };
      out.push_back(
          {ours + "self_attention.linear_qkv.weight",
           {{hf + "mixer.q_proj.weight", rows(0, q.qRows())},
            {hf + "mixer.k_proj.weight", rows(q.qRows(), q.d)},
            {hf + "mixer.v_proj.weight", rows(q.qRows() + q.d, q.d)}}});
      add("self_attention.linear_proj.weight", "mixer.o_proj.weight");
      break;
    }
    case '-':
      add("mlp.linear_fc1.layer_norm_weight", "norm.weight");
      add("mlp.linear_fc1.weight", "mixer.up_proj.weight");
      add("mlp.linear_fc2.weight", "mixer.down_proj.weight");
      break;
    }
  }
  out.push_back({"decoder.final_norm.weight", {{"backbone.norm_f.weight"}}});
  if (!m.tieEmbeddings)
    out.push_back({"output_layer.weight", {{"lm_head.weight"}}});
  return out;
}

/// The shape of `piece` of a hypipe tensor of `shape`: its rows of it.
std::vector<int64_t> pieceShape(const hf::Piece &piece,
                                std::vector<int64_t> shape) {
  if (!piece.rows.empty())
    shape[0] = int64_t(piece.rows.size());
  return shape;
}

/// One tensor of the exported model: its Hugging Face name and shape and
/// how to fill it from the checkpoint.
struct Planned {
  std::string name;
  std::vector<int64_t> shape;
  std::function<void(float *)> fill;
};

std::vector<Planned> planExport(const CheckpointReader &ckpt,
                                const hf::Architecture &arch,
                                const ModelInfo &m, const std::string &layers) {
  std::vector<Planned> out;
  std::vector<hf::TensorMap> tensors = arch.tensors(m, layers);
  // A tied model's output layer is its embedding; written out as well, so
  // a loader that does not tie (NemotronH's _tied_weights_keys is empty in
  // some transformers versions) reads it instead of initialising it.
  if (m.tieEmbeddings)
    tensors.push_back(
        {"embedding.word_embeddings.weight", {{"lm_head.weight"}}});
  for (const hf::TensorMap &t : tensors) {
    const std::vector<int64_t> shape = ckpt.shape(t.ours);
    for (const hf::Piece &piece : t.pieces)
      out.push_back({piece.name, pieceShape(piece, shape),
                     [&ckpt, ours = t.ours, shape, piece](float *dst) {
                       if (piece.rows.empty() && piece.offset == 0) {
                         ckpt.read(ours, shape, dst);
                         return;
                       }
                       std::vector<float> all(size_t(numel(shape)));
                       ckpt.read(ours, shape, all.data());
                       const int64_t width = numel(shape) / shape[0];
                       const int64_t rows = pieceShape(piece, shape)[0];
                       for (int64_t r = 0; r < rows; ++r) {
                         const float *src =
                             all.data() +
                             (piece.rows.empty() ? r : piece.rows[r]) * width;
                         for (int64_t j = 0; j < width; ++j)
                           dst[r * width + j] = src[j] + piece.offset;
                       }
                     }});
  }
  return out;
}

ModelInfo nemotronHModel(const json &c, const std::string &path); // below

const hf::Architecture kNemotronH = {
    "NemotronH",
    "NemotronHForCausalLM",
    "nemotron_h",
    "export a model of M, * (without RoPE) and - layers (squared_relu or "
    "gelu)",
    "backbone.embeddings.weight",
    inexpressible,
    nemotronHConfig,
    nemotronHTensors,
    nemotronHModel};

const hf::Architecture *const kArchitectures[] = {&kNemotronH, &hf::kQwen3Next,
                                                  &hf::kDeepseekV3};

/// What a model of `layers` exports as: Qwen3-Next when it has Gated
/// DeltaNet layers, DeepSeek-V3 when it has multi-latent attention, else
/// NemotronH (whose refusals name any other kind).
const hf::Architecture &exportArchitecture(const std::string &layers) {
  if (layers.find('G') != std::string::npos)
    return hf::kQwen3Next;
  if (layers.find('+') != std::string::npos)
    return hf::kDeepseekV3;
  return kNemotronH;
}

void writeText(const std::string &path, const std::string &text) {
  throwIfError(files::writeAtomically(path, "the exported model's file", text));
}

json readJson(const std::string &path, files::ReadBound bound) {
  const std::string text = readFileBounded(path, bound);
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    throw RuntimeError(fmt::format(
        "error: '{}' is not a JSON object\nhelp: the file is truncated or "
        "is not what it is named",
        path));
  return j;
}

} // namespace

ModelInfo checkpointModel(const std::string &checkpoint,
                          const std::string &artifactDir) {
  if (!artifactDir.empty())
    return loadArtifact(artifactDir).model;
  CheckpointInfo info = readCheckpointInfo(checkpoint);
  if (info.modelConfig.empty())
    throw RuntimeError(fmt::format(
        "error: checkpoint '{}' does not record its model's dimensions (it "
        "predates model_config)\nhelp: pass --artifact with the artifact that "
        "trained it (RUN/artifact for hypipe train)",
        checkpoint));
  json j = json::parse(info.modelConfig, nullptr, false);
  if (j.is_discarded())
    throw RuntimeError(fmt::format(
        "error: checkpoint '{}' has a corrupt model_config\nhelp: pass "
        "--artifact with the artifact that trained it",
        checkpoint));
  return parseModelInfo(j, checkpoint + " (model_config)");
}

namespace {

/// The planned tensors in shards of at most `maxShardBytes` each (a larger
/// tensor alone), in order, and their bytes in all.
std::pair<std::vector<std::vector<size_t>>, int64_t>
shardsOf(const std::vector<Planned> &plan, int64_t elementBytes,
         int64_t maxShardBytes) {
  std::vector<std::vector<size_t>> shards(1);
  int64_t bytes = 0, total = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    const int64_t b = elementBytes * numel(plan[i].shape);
    if (!shards.back().empty() && bytes + b > maxShardBytes) {
      shards.emplace_back();
      bytes = 0;
    }
    shards.back().push_back(i);
    bytes += b;
    total += b;
  }
  return {shards, total};
}

/// Writes the planned tensors `indices` to `path` in `dtype` (bf16: each
/// float rounded to the nearest, ties to even).
void writeShard(const std::string &path, const std::vector<Planned> &plan,
                const std::vector<size_t> &indices, DType dtype) {
  SafeTensorsWriter w;
  std::vector<std::vector<float>> data; // alive until write()
  std::vector<std::vector<uint16_t>> halves;
  data.reserve(indices.size());
  halves.reserve(indices.size());
  for (size_t i : indices) {
    data.emplace_back(size_t(numel(plan[i].shape)));
    plan[i].fill(data.back().data());
    if (dtype == DType::F32) {
      w.add(plan[i].name, plan[i].shape, data.back().data());
      continue;
    }
    halves.emplace_back(data.back().size());
    std::transform(data.back().begin(), data.back().end(),
                   halves.back().begin(), bf16::fromFloat);
    w.addBf16(plan[i].name, plan[i].shape, halves.back().data());
    data.back() = std::vector<float>(); // the bf16 copy is what is written
  }
  w.metadata("format", "pt"); // what transformers requires
  w.write(path);
}

/// True for a file of `dir` that an earlier export wrote, which a new one
/// replaces: its shards and index, and a config.json beside that index (a
/// user's config.json alone is not an export's).
bool isExportFile(const std::string &dir, const std::string &name) {
  const char *index = "model.safetensors.index.json";
  if (name == index)
    return true;
  if (name == "config.json")
    return std::filesystem::exists(dir + "/" + index);
  unsigned a = 0, b = 0;
  char end = 0;
  return name.size() == 32 &&
         std::sscanf(name.c_str(), "model-%5u-of-%5u.safetensor%c", &a, &b,
                     &end) == 3 &&
         end == 's';
}

/// Writes the shards, the index and config.json into `dir`.
void writeExport(const std::string &dir, const std::vector<Planned> &plan,
                 const std::vector<std::vector<size_t>> &shards, int64_t total,
                 const hf::Architecture &arch, const ModelInfo &m,
                 const std::string &layers, DType dtype) {
  json weightMap = json::object();
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string file =
        fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, shards.size());
    writeShard(dir + "/" + file, plan, shards[s], dtype);
    for (size_t i : shards[s])
      weightMap[plan[i].name] = file;
  }
  json index = {{"metadata", {{"total_size", total}}},
                {"weight_map", weightMap}};
  writeText(dir + "/model.safetensors.index.json", index.dump(2) + "\n");
  json config = arch.config(m, layers);
  config["torch_dtype"] = dtype == DType::BF16 ? "bfloat16" : "float32";
  writeText(dir + "/config.json", config.dump(2) + "\n");
}

} // namespace

ExportResult exportHuggingFace(const std::string &checkpoint,
                               const ModelInfo &m, const std::string &outDir,
                               int64_t maxShardBytes, DType dtype) {
  const char *what = "the export directory";
  requireOutputDirectory(outDir, what, {checkpoint});
  // The export replaces an earlier one whole (no stale shard of it stays
  // beside the new ones) and never a directory of other files.
  throwIfError(files::checkOutputDirectoryHoldsOnly(
      outDir, what,
      [&](const std::string &name) { return isExportFile(outDir, name); },
      "give -o a new or empty directory, or an earlier export (which is "
      "replaced whole)"));
  const std::string layers = layerSymbols(m.pattern);
  const hf::Architecture &arch = exportArchitecture(layers);
  if (std::string why = arch.inexpressible(m, layers); !why.empty())
    throw RuntimeError(fmt::format(
        "error: model '{}' ({}) cannot be a Hugging Face {} model: {}\nhelp: "
        "{}; its checkpoint stays usable with hypipe and `hypipe ckpt merge`",
        m.name, layers, arch.displayName, why, arch.exportable));
  CheckpointReader ckpt(checkpoint);
  std::vector<Planned> plan = planExport(ckpt, arch, m, layers);
  auto [shards, total] = shardsOf(plan, dtypeBytes(dtype), maxShardBytes);
  const std::string built = files::siblingTemporary(outDir);
  std::error_code ec;
  std::filesystem::create_directories(built, ec);
  if (ec)
    throw RuntimeError(
        fmt::format("error: cannot create '{}': {}\nhelp: check that the "
                    "directory of '{}' exists and is writable",
                    built, ec.message(), outDir));
  try {
    writeExport(built, plan, shards, total, arch, m, layers, dtype);
  } catch (...) {
    std::filesystem::remove_all(built, ec);
    throw;
  }
  throwIfError(files::replaceDirectory(built, outDir, "the export"));
  return {arch.displayName, int64_t(plan.size()), int64_t(shards.size()),
          total};
}

namespace {

/// config.json's layers_block_type as a pattern: a list of known names
/// (an MoE one is kept, for the import's own refusal of it to name).
std::string patternOfBlockTypes(const json &list, const std::string &path) {
  auto refuse = [&](const std::string &why) {
    return RuntimeError(fmt::format(
        "error: '{}' has layers_block_type {}\nhelp: a list of \"{}\", "
        "\"{}\", \"{}\" or \"{}\", one per layer, as transformers writes it",
        path, why, kBlockTypes[0].first, kBlockTypes[2].first,
        kBlockTypes[4].first, kBlockTypes[5].first));
  };
  if (!list.is_array())
    throw refuse(fmt::format("{}, which is not a list",
                             files::excerpt(list.dump(), 80)));
  std::string pattern;
  for (const json &name : list) {
    char symbol = 0;
    if (name.is_string())
      for (const auto &[known, s] : kBlockTypes)
        if (name.get<std::string>() == known)
          symbol = s;
    if (!symbol)
      throw refuse(fmt::format("with {} (layer {})",
                               files::excerpt(name.dump(), 80),
                               pattern.size()));
    pattern += symbol;
  }
  return pattern;
}

/// A NemotronH config.json as written, unchecked: the fields hypipe reads.
ModelInfo readNemotronConfig(const json &c, const std::string &path) {
  ModelInfo m;
  m.name = "imported";
  m.positionEmbedding = "none";
  // The layers: transformers 5 writes layers_block_type (a list of names,
  // and no num_hidden_layers), earlier versions and Megatron's converter
  // hybrid_override_pattern (a symbol per layer).
  if (c.contains("layers_block_type")) {
    m.pattern = patternOfBlockTypes(c["layers_block_type"], path);
    // transformers 5 takes layers_block_type and ignores the other; an
    // older reader takes hybrid_override_pattern: both must say the same.
    if (c.contains("hybrid_override_pattern")) {
      const auto other =
          configOr<std::string>(c, "hybrid_override_pattern", "", path);
      if (other != m.pattern)
        throw RuntimeError(fmt::format(
            "error: '{}' cannot be imported: its layers_block_type is the "
            "pattern '{}' and its hybrid_override_pattern is '{}'\nhelp: "
            "transformers 5 reads the first, earlier versions the second; "
            "make them the same model (or keep one)",
            path, files::excerpt(m.pattern, 200), files::excerpt(other, 200)));
    }
  } else if (c.contains("hybrid_override_pattern"))
    m.pattern = configOr<std::string>(c, "hybrid_override_pattern", "", path);
  else
    throw RuntimeError(fmt::format(
        "error: '{}' lacks layers_block_type and hybrid_override_pattern\n"
        "help: hypipe reads the model's layers from one of them, as "
        "transformers does",
        path));
  m.numLayers = c.contains("num_hidden_layers")
                    ? configInt(c, "num_hidden_layers", path)
                    : int64_t(m.pattern.size());
  for (const ConfigInt &f : kConfigInts)
    m.*f.member = configInt(c, f.key, path);
  m.tieEmbeddings = configOr(c, "tie_word_embeddings", false, path);
  m.kvChannels = c.contains("head_dim")
                     ? configInt(c, "head_dim", path)
                     : m.hidden / std::max<int64_t>(1, m.numHeads);
  const std::string act =
      configOr<std::string>(c, "mlp_hidden_act", "relu2", path);
  if (act != "relu2" && act != "gelu")
    throw RuntimeError(fmt::format(
        "error: '{}' has mlp_hidden_act '{}'; hypipe's MLP has relu2 "
        "(squared_relu) and gelu\nhelp: only those NemotronH models import",
        path, files::excerpt(act, 80)));
  m.activation = act == "gelu" ? "gelu" : "squared_relu";
  return m;
}

/// The first of hypipe's rules for model dimensions (the spec's) that `m`
/// breaks, in config.json's words; "" when it breaks none.
std::string brokenDimsRule(const ModelInfo &m) {
  const ModelDims d = dimsOf(m);
  std::optional<DimsProblem> problem = checkModelDims(d);
  for (size_t i = 0; !problem && i < m.pattern.size(); ++i)
    problem = checkLayerKindDims(m.pattern[i], d);
  if (!problem)
    return "";
  for (const ConfigInt &f : kConfigInts)
    if (problem->field == f.specKey && std::string(f.key) != f.specKey)
      return fmt::format("{} (config.json's {}, hypipe's {})", problem->message,
                         f.key, f.specKey);
  return problem->message;
}

/// config.json against itself: a pattern of as many layers as
/// num_hidden_layers says, each one hypipe can train, and the dimensions
/// hypipe's rules accept (all positive, heads that divide, ...).
void checkNemotronConfig(const ModelInfo &m, const std::string &path) {
  auto refuse = [&](const std::string &why, const std::string &help) {
    return RuntimeError(fmt::format(
        "error: '{}' cannot be imported: {}\nhelp: {}", path, why, help));
  };
  const std::string fix = "config.json must describe the model its tensors "
                          "hold; use the config.json that came with them";
  if (m.pattern.empty())
    throw refuse("it lists no layers (layers_block_type or "
                 "hybrid_override_pattern), a model of no layers",
                 "hybrid_override_pattern has a symbol per layer: M (Mamba), "
                 "* (attention), - (MLP); layers_block_type a name per layer");
  if (m.numLayers != int64_t(m.pattern.size()))
    throw refuse(fmt::format("num_hidden_layers is {}, and its layers "
                             "'{}' (layers_block_type or "
                             "hybrid_override_pattern) are {}",
                             m.numLayers, m.pattern.substr(0, 200),
                             m.pattern.size()),
                 "the two must agree (transformers' NemotronH requires it); "
                 "correct the one that is wrong");
  if (std::string why = inexpressible(m, m.pattern); !why.empty())
    throw refuse(why, "hypipe imports NemotronH models of M, * and - layers");
  if (std::string why = brokenDimsRule(m); !why.empty())
    throw refuse(why, fix);
  const int64_t headDim = dimsOf(m).kvChannels();
  if (m.pattern.find('*') != std::string::npos && m.kvChannels != headDim)
    throw refuse(fmt::format("head_dim is {}, and hypipe's attention has "
                             "hidden_size / num_attention_heads = {} channels "
                             "a head",
                             m.kvChannels, headDim),
                 "only NemotronH models whose head_dim is hidden_size / "
                 "num_attention_heads import");
}

/// config.json's fields that change what the model computes, refused when
/// they say other than what hypipe computes: such a checkpoint would import
/// and then train as another model. (chunk_size only cuts the scan's work:
/// any positive value computes the same; residual_in_fp32 keeps the residual
/// stream in fp32, as hypipe's fp32 main stream does.)
void checkNemotronMath(const json &c, const std::string &path) {
  auto refuse = [&](const std::string &key, const std::string &says,
                    const std::string &computes) {
    return RuntimeError(fmt::format(
        "error: '{}' cannot be imported: its {} is {}, and hypipe computes "
        "{}\nhelp: hypipe imports the NemotronH models it computes exactly; "
        "this one would train as another model",
        path, key, says, computes));
  };
  if (c.contains("architectures")) {
    const json &a = c["architectures"];
    const bool ours =
        a.is_array() && std::any_of(a.begin(), a.end(), [](const json &x) {
          return x == "NemotronHForCausalLM";
        });
    if (!ours)
      throw refuse("architectures", files::excerpt(a.dump(), 120),
                   "NemotronHForCausalLM");
  }
  const auto act = configOr<std::string>(c, "mamba_hidden_act", "silu", path);
  if (act != "silu")
    throw refuse("mamba_hidden_act", "'" + files::excerpt(act, 60) + "'",
                 "silu after the Mamba conv (Mamba-2's)");
  if (c.contains("layer_norm_epsilon")) {
    const json &eps = c["layer_norm_epsilon"];
    if (!eps.is_number() || !(std::abs(eps.get<double>() - 1e-5) <= 1e-12))
      throw refuse("layer_norm_epsilon", files::excerpt(eps.dump(), 60),
                   "RMSNorm with epsilon 1e-5 (Megatron's)");
  }
  if (c.contains("chunk_size") &&
      !(c["chunk_size"].is_number_integer() && c["chunk_size"] > 0))
    throw refuse("chunk_size", files::excerpt(c["chunk_size"].dump(), 60),
                 "the SSD scan in chunks of a positive length");
  for (const char *bias :
       {"attention_bias", "mlp_bias", "use_bias", "mamba_proj_bias"})
    if (configOr(c, bias, false, path))
      throw refuse(bias, "true",
                   "no bias on the linear layers (Megatron's "
                   "--disable-bias-linear)");
  if (!configOr(c, "use_conv_bias", true, path))
    throw refuse("use_conv_bias", "false",
                 "the Mamba conv with its bias (conv1d.bias)");
}

/// A NemotronH config.json as the model hypipe trains; refuses what hypipe
/// cannot express and what contradicts itself.
ModelInfo nemotronHModel(const json &c, const std::string &path) {
  checkNemotronMath(c, path);
  ModelInfo m = readNemotronConfig(c, path);
  checkNemotronConfig(m, path);
  return m;
}

/// A Hugging Face directory's architecture (its config.json's model_type)
/// and the model hypipe trains for it.
std::pair<const hf::Architecture *, ModelInfo>
huggingFaceModel(const std::string &input) {
  const std::string configPath = input + "/config.json";
  if (!pathExists(configPath))
    throw RuntimeError(fmt::format(
        "error: '{}' has no config.json, so it is not a Hugging Face model "
        "directory\nhelp: pass a NemotronH, Qwen3-Next or DeepSeek-V3 "
        "directory, or a .safetensors file of a Megatron-LM state dict",
        input));
  const json c = readJson(configPath, files::kConfigJson);
  const std::string type =
      configOr<std::string>(c, "model_type", "", configPath);
  for (const hf::Architecture *arch : kArchitectures) {
    if (type != arch->modelType)
      continue;
    ModelInfo m = arch->model(c, configPath);
    // The architectures' own readers refuse what they cannot say; hypipe's
    // rules for the dimensions, and its layer kinds, hold for all.
    if (std::string why = arch->inexpressible(m, m.pattern); !why.empty())
      throw RuntimeError(
          fmt::format("error: '{}' cannot be imported: {}", configPath, why));
    if (std::string why = brokenDimsRule(m); !why.empty())
      throw RuntimeError(fmt::format(
          "error: '{}' cannot be imported: {}\nhelp: config.json must "
          "describe the model its tensors hold",
          configPath, why));
    return {arch, m};
  }
  throw RuntimeError(fmt::format(
      "error: '{}' is model_type '{}', and hypipe imports NemotronH "
      "('nemotron_h'), Qwen3-Next ('qwen3_next') and DeepSeek-V3 "
      "('deepseek_v3') models\nhelp: hypipe trains Megatron's hybrid "
      "models; other architectures have no hypipe spec",
      configPath, files::excerpt(type, 80)));
}

/// Every parameter's shape under hypipe's name, as a run of `m` allocates
/// it (LayerShapes.h): what each imported tensor must have.
std::map<std::string, std::vector<int64_t>>
parameterShapes(const ModelInfo &m) {
  const ModelDims d = dimsOf(m);
  std::map<std::string, std::vector<int64_t>> out;
  auto add = [&](const std::string &prefix,
                 const std::vector<ParamSpec> &params) {
    for (const ParamSpec &p : params)
      out[prefix + p.name] = p.shape;
  };
  add("", embeddingShape(d).params());
  for (size_t i = 0; i < m.pattern.size(); ++i) {
    const std::string prefix = fmt::format("decoder.layers.{}.", i);
    if (m.pattern[i] == 'M')
      add(prefix, mambaShape(d).params(m.numLayers));
    else if (m.pattern[i] == '*')
      add(prefix, attentionShape(d).params(m.numLayers));
    else if (m.pattern[i] == '-')
      add(prefix, mlpShape(d).params(m.numLayers));
    else if (m.pattern[i] == 'G')
      add(prefix, gdnShape(d).params(m.numLayers));
    else if (m.pattern[i] == '+')
      add(prefix, mlaShape(d).params(m.numLayers));
  }
  add("", headShape(d).params());
  return out;
}

/// Which file of a Hugging Face directory holds each tensor: its index, or
/// its one model.safetensors. Every file stays inside the directory.
std::map<std::string, std::string> tensorFiles(const std::string &input) {
  std::map<std::string, std::string> where;
  const std::string indexPath = input + "/model.safetensors.index.json";
  if (pathExists(indexPath)) {
    const json index = readJson(indexPath, files::kIndexJson);
    if (!index.contains("weight_map") || !index["weight_map"].is_object())
      throw RuntimeError(
          fmt::format("error: '{}' lacks a weight_map object", indexPath));
    for (const auto &[name, file] : index["weight_map"].items()) {
      if (!file.is_string())
        throw RuntimeError(fmt::format("error: '{}' maps '{}' to a non-string",
                                       indexPath, name));
      where[name] = confinedPath(input, file.get<std::string>(),
                                 "the tensor file", indexPath);
    }
  } else {
    const std::string single = input + "/model.safetensors";
    if (!pathExists(single))
      throw RuntimeError(fmt::format(
          "error: '{}' has neither model.safetensors.index.json nor "
          "model.safetensors\nhelp: the directory is incomplete",
          input));
    for (const std::string &name : SafeTensorsFile(single).names())
      where[name] = single;
  }
  return where;
}

/// The tensors of one import, collected and written as one safetensors file.
class Importer {
public:
  ImportResult result;
  CheckpointInfo info;
  std::string source; ///< what is imported, for the messages

  Importer() { info.globalBatch = 1; } // step 0: no data order to keep

  void keep(const std::string &name, const std::vector<int64_t> &shape,
            std::vector<float> values) {
    // A NaN or an infinity trains into NaN at the first step.
    auto bad = std::find_if(values.begin(), values.end(),
                            [](float v) { return !std::isfinite(v); });
    if (bad != values.end())
      throw RuntimeError(fmt::format(
          "error: '{}' cannot be imported: {} holds {} at element {}\nhelp: "
          "a checkpoint to start from must hold finite weights; export it "
          "again from a run that had not diverged",
          source, name, *bad, bad - values.begin()));
    data.push_back(std::move(values));
    w.add(name, shape, data.back().data());
    ++result.tensors;
  }

  /// A Megatron-LM state dict (or a merged hypipe checkpoint): parameters
  /// by name; names hypipe used before resolve when the file is read.
  void megatron(const std::string &input) {
    result.kind = "megatron";
    source = input;
    files.push_back(std::make_unique<SafeTensorsFile>(input));
    const SafeTensorsFile &f = *files.back();
    for (const std::string &name : f.names()) {
      if (name.rfind("optimizer.", 0) == 0 ||
          name.find("_extra_state") != std::string::npos)
        continue;
      const std::vector<int64_t> &shape = f.shape(name);
      std::vector<float> values(size_t(numel(shape)));
      f.read(name, shape, values.data());
      keep(name, shape, std::move(values));
    }
    const auto &meta = f.metadata();
    for (const char *k : {"model", "pattern", "model_config"})
      if (meta.count(k))
        (k == std::string("model")     ? info.model
         : k == std::string("pattern") ? info.pattern
                                       : info.modelConfig) = meta.at(k);
  }

  /// A Hugging Face directory (NemotronH, Qwen3-Next or DeepSeek-V3):
  /// each hypipe tensor made of the rows of the tensors its architecture's
  /// table names.
  void huggingFace(const std::string &input) {
    source = input;
    const auto [arch, m] = huggingFaceModel(input);
    result.kind = std::string("hf-") + arch->modelType;
    std::replace(result.kind.begin(), result.kind.end(), '_', '-');
    where = tensorFiles(input);
    this->input = input;
    const auto shapes = parameterShapes(m);
    for (const hf::TensorMap &t : arch->tensors(m, m.pattern)) {
      const std::vector<int64_t> &shape = shapes.at(t.ours);
      std::vector<float> values(size_t(numel(shape)));
      const int64_t width = numel(shape) / shape[0];
      for (const hf::Piece &piece : t.pieces) {
        const std::vector<float> part =
            read(piece.name, pieceShape(piece, shape));
        const int64_t rows = int64_t(part.size()) / width;
        for (int64_t r = 0; r < rows; ++r) {
          float *dst =
              values.data() + (piece.rows.empty() ? r : piece.rows[r]) * width;
          for (int64_t j = 0; j < width; ++j)
            dst[j] = part[r * width + j] - piece.offset;
        }
      }
      keep(t.ours, shape, std::move(values));
    }
    if (m.tieEmbeddings && where.count("lm_head.weight"))
      checkTiedHead(arch->embedding,
                    shapes.at("embedding.word_embeddings.weight"));
    refuseUnread(m);
    info.model = m.name;
    info.pattern = m.pattern;
    info.modelConfig = modelJson(m).dump();
  }

  void write(const std::string &outFile) {
    for (auto &[k, v] : info.metadata())
      w.metadata(k, v);
    w.write(outFile);
  }

private:
  /// Tensor `name` of the directory, which config.json says has `expected`
  /// shape: checked before its data is read.
  std::vector<float> read(const std::string &name,
                          const std::vector<int64_t> &expected) {
    auto it = where.find(name);
    if (it == where.end())
      throw RuntimeError(fmt::format(
          "error: '{}' has no tensor '{}', which its config needs\nhelp: "
          "the checkpoint is incomplete or its config.json describes "
          "another model",
          input, name));
    if (!opened.count(it->second)) {
      files.push_back(std::make_unique<SafeTensorsFile>(it->second));
      opened[it->second] = files.back().get();
    }
    const SafeTensorsFile &f = *opened[it->second];
    if (!f.has(name))
      throw RuntimeError(fmt::format(
          "error: '{}' lacks tensor '{}' that the index places there",
          it->second, name));
    if (f.shape(name) != expected)
      throw RuntimeError(fmt::format(
          "error: '{}' holds '{}' as [{}], and '{}/config.json' makes it "
          "[{}]\nhelp: the tensors and config.json describe different "
          "models (a transposed or renamed tensor, or a size such as "
          "vocab_size or hidden_size that is not the tensors'); use the "
          "config.json that came with the tensors",
          it->second, name, fmt::join(f.shape(name), ", "), input,
          fmt::join(expected, ", ")));
    taken.insert(name);
    std::vector<float> values(size_t(numel(expected)));
    f.read(name, expected, values.data());
    return values;
  }

  /// A tied model's lm_head.weight (hypipe's export writes it, as some
  /// loaders do not tie): taken when it is the embedding, bit for bit.
  void checkTiedHead(const std::string &embedding,
                     const std::vector<int64_t> &shape) {
    const std::vector<float> head = read("lm_head.weight", shape);
    const std::vector<float> table = read(embedding, shape);
    if (std::memcmp(head.data(), table.data(), head.size() * sizeof(float)))
      throw RuntimeError(fmt::format(
          "error: '{}' holds 'lm_head.weight', and '{}/config.json' ties it "
          "to the embedding (tie_word_embeddings), but the two differ\n"
          "help: transformers 5 does not tie NemotronH's lm_head (a model it "
          "makes with tie_word_embeddings saves its own lm_head, and computes "
          "with it): set tie_word_embeddings: false in config.json to import "
          "the model it computes, and train it with tie_embeddings: false; or "
          "remove lm_head.weight if the embedding is meant",
          where.at("lm_head.weight"), input));
  }

  /// A tensor config.json has no place for: its layers or its head are not
  /// the tensors' (num_hidden_layers, the pattern, tie_word_embeddings).
  void refuseUnread(const ModelInfo &m) const {
    for (const auto &[name, file] : where)
      if (!taken.count(name))
        throw RuntimeError(fmt::format(
            "error: '{}' holds '{}', which '{}/config.json' ({} layers "
            "'{}', {} embeddings) has no place for\nhelp: config.json "
            "describes another model than the tensors; use the config.json "
            "that came with them",
            file, name.substr(0, 200), input, m.pattern.size(),
            m.pattern.substr(0, 200), m.tieEmbeddings ? "tied" : "untied"));
  }

  SafeTensorsWriter w;
  std::vector<std::vector<float>> data; // alive until write()
  std::vector<std::unique_ptr<SafeTensorsFile>> files;
  std::map<std::string, std::string> where;
  std::map<std::string, const SafeTensorsFile *> opened;
  std::set<std::string> taken; ///< the tensors taken, so far
  std::string input;
};

} // namespace

ImportResult importCheckpoint(const std::string &input,
                              const std::string &outFile) {
  requireOutputFile(outFile, "the imported checkpoint", {input});
  Importer importer;
  if (isDirectory(input))
    importer.huggingFace(input);
  else
    importer.megatron(input);
  importer.write(outFile);
  return importer.result;
}

} // namespace hypipe::rt
