//===- Interop.cpp - checkpoints to and from Hugging Face and Megatron-LM -===//

#include "runtime/formats/Interop.h"

#include "runtime/formats/Checkpoint.h"
#include "runtime/formats/FileCheck.h"
#include "runtime/formats/SafeTensors.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

namespace hypipe::rt {
namespace {

using json = nlohmann::json;

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
/// its k rows, then its v rows (docs/model.md), each `d` rows of `hidden`.
struct QkvLayout {
  int64_t heads, groups, d, hidden;
  int64_t perGroup() const { return (heads / groups + 2) * d; }
  int64_t qRows() const { return heads / groups * d; }
};

json nemotronHConfig(const ModelInfo &m, const std::string &layers) {
  json c;
  c["architectures"] = {"NemotronHForCausalLM"};
  c["model_type"] = "nemotron_h";
  c["vocab_size"] = m.vocab;
  c["tie_word_embeddings"] = m.tieEmbeddings;
  c["hidden_size"] = m.hidden;
  c["intermediate_size"] = m.ffnHidden;
  c["num_hidden_layers"] = int64_t(layers.size());
  c["hybrid_override_pattern"] = layers;
  c["num_attention_heads"] = m.numHeads;
  c["num_key_value_heads"] = m.numQueryGroups;
  c["head_dim"] = m.kvChannels;
  c["attention_bias"] = false;
  c["attention_dropout"] = 0.0;
  c["hidden_dropout"] = 0.0;
  c["mlp_bias"] = false;
  c["use_bias"] = false;
  c["mlp_hidden_act"] = hfActivation(m.activation);
  c["mamba_num_heads"] = m.mambaNumHeads;
  c["mamba_head_dim"] = m.mambaHeadDim;
  c["ssm_state_size"] = m.mambaState;
  c["n_groups"] = m.mambaNumGroups;
  c["conv_kernel"] = m.mambaConvWidth;
  c["expand"] =
      m.hidden ? double(m.mambaNumHeads * m.mambaHeadDim) / double(m.hidden)
               : 0.0;
  c["mamba_hidden_act"] = "silu";
  c["use_conv_bias"] = true;
  c["mamba_proj_bias"] = false;
  c["chunk_size"] = 128;
  c["layer_norm_epsilon"] = 1e-5;
  c["residual_in_fp32"] = false;
  c["initializer_range"] = 0.02;
  c["use_cache"] = true;
  c["torch_dtype"] = "float32";
  return c;
}

/// (hypipe name, NemotronH name) of every tensor that maps one to one:
/// all but attention's linear_qkv, which NemotronH splits into q/k/v.
/// Megatron-Bridge's NemotronH mapping; the one table both directions use.
std::vector<std::pair<std::string, std::string>>
oneToOneTensors(const std::string &layers, bool tied) {
  std::vector<std::pair<std::string, std::string>> out = {
      {"embedding.word_embeddings.weight", "backbone.embeddings.weight"}};
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string ours = fmt::format("decoder.layers.{}.", i);
    const std::string hf = fmt::format("backbone.layers.{}.", i);
    auto add = [&](const std::string &a, const std::string &b) {
      out.push_back({ours + a, hf + b});
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
    case '*':
      add("self_attention.linear_qkv.layer_norm_weight", "norm.weight");
      add("self_attention.linear_proj.weight", "mixer.o_proj.weight");
      break;
    case '-':
      add("mlp.linear_fc1.layer_norm_weight", "norm.weight");
      add("mlp.linear_fc1.weight", "mixer.up_proj.weight");
      add("mlp.linear_fc2.weight", "mixer.down_proj.weight");
      break;
    }
  }
  out.push_back({"decoder.final_norm.weight", "backbone.norm_f.weight"});
  if (!tied)
    out.push_back({"output_layer.weight", "lm_head.weight"});
  return out;
}

/// One tensor of the exported model: its Hugging Face name and shape and
/// how to fill it from the checkpoint.
struct Planned {
  std::string name;
  std::vector<int64_t> shape;
  std::function<void(float *)> fill;
};

std::vector<Planned> planExport(const CheckpointReader &ckpt,
                                const ModelInfo &m, const std::string &layers) {
  std::vector<Planned> out;
  auto copy = [&](const std::string &hf, const std::string &ours) {
    const std::vector<int64_t> shape = ckpt.shape(ours);
    out.push_back({hf, shape, [&ckpt, ours, shape](float *dst) {
                     ckpt.read(ours, shape, dst);
                   }});
  };
  for (const auto &[ours, hf] : oneToOneTensors(layers, m.tieEmbeddings))
    copy(hf, ours);
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i] != '*')
      continue;
    const QkvLayout q{m.numHeads, m.numQueryGroups, m.kvChannels, m.hidden};
    const std::string qkv =
        fmt::format("decoder.layers.{}.self_attention.linear_qkv.weight", i);
    const std::string hf = fmt::format("backbone.layers.{}.mixer.", i);
    const std::vector<int64_t> shape = ckpt.shape(qkv);
    // Rows [first, first + rows) of every group, stacked group by group.
    auto part = [&](const std::string &name, int64_t first, int64_t rows) {
      out.push_back({name,
                     {q.groups * rows, q.hidden},
                     [&ckpt, qkv, shape, q, first, rows](float *dst) {
                       std::vector<float> all(size_t(numel(shape)));
                       ckpt.read(qkv, shape, all.data());
                       for (int64_t g = 0; g < q.groups; ++g)
                         std::copy_n(
                             all.data() + (g * q.perGroup() + first) * q.hidden,
                             rows * q.hidden, dst + g * rows * q.hidden);
                     }});
    };
    part(hf + "q_proj.weight", 0, q.qRows());
    part(hf + "k_proj.weight", q.qRows(), q.d);
    part(hf + "v_proj.weight", q.qRows() + q.d, q.d);
  }
  return out;
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

int64_t configInt(const json &c, const char *key, const std::string &path) {
  if (!c.contains(key) || !c[key].is_number_integer())
    throw RuntimeError(fmt::format(
        "error: '{}' lacks the integer '{}'\nhelp: a NemotronH config.json "
        "has it (docs/interop.md lists what hypipe reads)",
        path, key));
  return c[key].get<int64_t>();
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

ExportResult exportHuggingFace(const std::string &checkpoint,
                               const ModelInfo &m, const std::string &outDir,
                               int64_t maxShardBytes) {
  requireOutputDirectory(outDir, "the export directory", {checkpoint});
  const std::string layers = layerSymbols(m.pattern);
  if (std::string why = inexpressible(m, layers); !why.empty())
    throw RuntimeError(fmt::format(
        "error: model '{}' ({}) cannot be a Hugging Face NemotronH model: "
        "{}\nhelp: export a model of M, * (without RoPE) and - layers "
        "(squared_relu or gelu); its checkpoint stays usable with hypipe and "
        "`hypipe ckpt merge`",
        m.name, layers, why));
  CheckpointReader ckpt(checkpoint);
  std::vector<Planned> plan = planExport(ckpt, m, layers);

  // Shards in order, each up to maxShardBytes (a larger tensor alone).
  std::vector<std::vector<size_t>> shards(1);
  int64_t bytes = 0, total = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    const int64_t b = 4 * numel(plan[i].shape);
    if (!shards.back().empty() && bytes + b > maxShardBytes) {
      shards.emplace_back();
      bytes = 0;
    }
    shards.back().push_back(i);
    bytes += b;
    total += b;
  }
  std::error_code ec;
  std::filesystem::create_directories(outDir, ec);
  if (ec)
    throw RuntimeError(
        fmt::format("error: cannot create '{}': {}", outDir, ec.message()));
  json weightMap = json::object();
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string file =
        fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, shards.size());
    SafeTensorsWriter w;
    std::vector<std::vector<float>> data; // alive until write()
    data.reserve(shards[s].size());
    for (size_t i : shards[s]) {
      data.emplace_back(size_t(numel(plan[i].shape)));
      plan[i].fill(data.back().data());
      w.add(plan[i].name, plan[i].shape, data.back().data());
      weightMap[plan[i].name] = file;
    }
    w.metadata("format", "pt"); // what transformers requires
    w.write(outDir + "/" + file);
  }
  json index = {{"metadata", {{"total_size", total}}},
                {"weight_map", weightMap}};
  writeText(outDir + "/model.safetensors.index.json", index.dump(2) + "\n");
  writeText(outDir + "/config.json", nemotronHConfig(m, layers).dump(2) + "\n");
  return {int64_t(plan.size()), int64_t(shards.size()), total};
}

namespace {

/// A NemotronH config.json as the model hypipe trains; refuses what hypipe
/// cannot express.
ModelInfo nemotronModel(const std::string &input) {
  const std::string configPath = input + "/config.json";
  if (!pathExists(configPath))
    throw RuntimeError(fmt::format(
        "error: '{}' has no config.json, so it is not a Hugging Face model "
        "directory\nhelp: pass a NemotronH directory, or a .safetensors "
        "file of a Megatron-LM state dict",
        input));
  const json c = readJson(configPath, files::kConfigJson);
  if (c.value("model_type", "") != "nemotron_h")
    throw RuntimeError(fmt::format(
        "error: '{}' is model_type '{}', and hypipe imports NemotronH "
        "('nemotron_h') models\nhelp: hypipe trains Megatron's hybrid "
        "models; other architectures have no hypipe spec",
        configPath, c.value("model_type", "")));
  if (!c.contains("hybrid_override_pattern") ||
      !c["hybrid_override_pattern"].is_string())
    throw RuntimeError(fmt::format(
        "error: '{}' lacks hybrid_override_pattern\nhelp: hypipe reads the "
        "layer pattern from it",
        configPath));
  ModelInfo m;
  m.pattern = c["hybrid_override_pattern"].get<std::string>();
  m.name = "imported";
  m.numLayers = int64_t(m.pattern.size());
  m.hidden = configInt(c, "hidden_size", configPath);
  m.vocab = configInt(c, "vocab_size", configPath);
  m.tieEmbeddings = c.value("tie_word_embeddings", false);
  m.positionEmbedding = "none";
  m.ffnHidden = configInt(c, "intermediate_size", configPath);
  m.numHeads = configInt(c, "num_attention_heads", configPath);
  m.numQueryGroups = configInt(c, "num_key_value_heads", configPath);
  m.kvChannels = c.contains("head_dim") && c["head_dim"].is_number_integer()
                     ? c["head_dim"].get<int64_t>()
                     : m.hidden / std::max<int64_t>(1, m.numHeads);
  m.mambaNumHeads = configInt(c, "mamba_num_heads", configPath);
  m.mambaHeadDim = configInt(c, "mamba_head_dim", configPath);
  m.mambaState = configInt(c, "ssm_state_size", configPath);
  m.mambaNumGroups = configInt(c, "n_groups", configPath);
  m.mambaConvWidth = configInt(c, "conv_kernel", configPath);
  const std::string act = c.value("mlp_hidden_act", "relu2");
  m.activation = act == "gelu" ? "gelu" : "squared_relu";
  if (act != "relu2" && act != "gelu")
    throw RuntimeError(fmt::format(
        "error: '{}' has mlp_hidden_act '{}'; hypipe's MLP has relu2 "
        "(squared_relu) and gelu\nhelp: only those NemotronH models import",
        configPath, act));
  if (std::string why = inexpressible(m, m.pattern); !why.empty())
    throw RuntimeError(
        fmt::format("error: '{}' cannot be imported: {}", configPath, why));
  if (m.numQueryGroups < 1 || m.numHeads % m.numQueryGroups != 0)
    throw RuntimeError(fmt::format(
        "error: '{}' has {} attention heads in {} key-value groups; they "
        "must divide",
        configPath, m.numHeads, m.numQueryGroups));

  return m;
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

  Importer() { info.globalBatch = 1; } // step 0: no data order to keep

  void keep(const std::string &name, const std::vector<int64_t> &shape,
            std::vector<float> values) {
    data.push_back(std::move(values));
    w.add(name, shape, data.back().data());
    ++result.tensors;
  }

  /// A Megatron-LM state dict (or a merged hypipe checkpoint): parameters
  /// by name; names hypipe used before resolve when the file is read.
  void megatron(const std::string &input) {
    result.kind = "megatron";
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

  /// A Hugging Face NemotronH directory: Megatron's names, the attention's
  /// q, k and v projections joined into linear_qkv.
  void nemotron(const std::string &input) {
    result.kind = "hf-nemotron-h";
    const ModelInfo m = nemotronModel(input);
    where = tensorFiles(input);
    this->input = input;
    for (const auto &[ours, hf] : oneToOneTensors(m.pattern, m.tieEmbeddings))
      moveTensor(ours, hf);
    for (size_t i = 0; i < m.pattern.size(); ++i) {
      if (m.pattern[i] != '*')
        continue;
      const std::string hf = fmt::format("backbone.layers.{}.mixer.", i);
      const QkvLayout q{m.numHeads, m.numQueryGroups, m.kvChannels, m.hidden};
      auto [qs, qv] = read(hf + "q_proj.weight");
      auto [ks, kv] = read(hf + "k_proj.weight");
      auto [vs, vv] = read(hf + "v_proj.weight");
      if (qs != std::vector<int64_t>{q.groups * q.qRows(), q.hidden} ||
          ks != std::vector<int64_t>{q.groups * q.d, q.hidden} || vs != ks)
        throw RuntimeError(fmt::format(
            "error: layer {}'s q/k/v projections do not have the shapes its "
            "config gives ({} heads, {} groups, head_dim {}, hidden {})\n"
            "help: the checkpoint and its config.json disagree",
            i, q.heads, q.groups, q.d, q.hidden));
      // Megatron's linear_qkv: per group its q rows, then k, then v.
      std::vector<float> qkv(size_t(q.groups * q.perGroup() * q.hidden));
      for (int64_t g = 0; g < q.groups; ++g) {
        float *dst = qkv.data() + g * q.perGroup() * q.hidden;
        std::copy_n(qv.data() + g * q.qRows() * q.hidden, q.qRows() * q.hidden,
                    dst);
        std::copy_n(kv.data() + g * q.d * q.hidden, q.d * q.hidden,
                    dst + q.qRows() * q.hidden);
        std::copy_n(vv.data() + g * q.d * q.hidden, q.d * q.hidden,
                    dst + (q.qRows() + q.d) * q.hidden);
      }
      keep(fmt::format("decoder.layers.{}.self_attention.linear_qkv.weight", i),
           {q.groups * q.perGroup(), q.hidden}, std::move(qkv));
    }
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
  std::pair<std::vector<int64_t>, std::vector<float>>
  read(const std::string &name) {
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
    const std::vector<int64_t> shape = f.shape(name);
    std::vector<float> values(size_t(numel(shape)));
    f.read(name, shape, values.data());
    return std::make_pair(shape, values);
  }

  void moveTensor(const std::string &ours, const std::string &hf) {
    auto [shape, values] = read(hf);
    keep(ours, shape, std::move(values));
  }

  SafeTensorsWriter w;
  std::vector<std::vector<float>> data; // alive until write()
  std::vector<std::unique_ptr<SafeTensorsFile>> files;
  std::map<std::string, std::string> where;
  std::map<std::string, const SafeTensorsFile *> opened;
  std::string input;
};

} // namespace

ImportResult importCheckpoint(const std::string &input,
                              const std::string &outFile) {
  requireOutputFile(outFile, "the imported checkpoint", {input});
  Importer importer;
  if (isDirectory(input))
    importer.nemotron(input);
  else
    importer.megatron(input);
  importer.write(outFile);
  return importer.result;
}

} // namespace hypipe::rt
