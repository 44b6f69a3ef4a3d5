//===- HfArchitectures.cpp - Qwen3-Next and DeepSeek-V3 layouts -----------===//

#include "runtime/formats/HfArchitectures.h"

#include "core/io/Files.h"
#include "core/model/LayerShapes.h"

#include <fmt/format.h>

#include <cmath>
#include <numeric>

namespace hypipe::rt::hf {

using json = nlohmann::json;

void throwWrongType(const std::string &path, const char *key,
                    const std::string &value, const char *type) {
  throw RuntimeError(fmt::format(
      "error: '{}' has {} {}, which is not a {}\nhelp: a config.json has it "
      "as transformers writes it (docs/interop.md lists what hypipe reads)",
      path, key, files::excerpt(value, 80), type));
}

int64_t configInt(const json &c, const char *key, const std::string &path) {
  if (!c.contains(key) || !c[key].is_number_integer())
    throw RuntimeError(fmt::format(
        "error: '{}' lacks the integer '{}'\nhelp: a config.json of this "
        "architecture has it (docs/interop.md lists what hypipe reads)",
        path, key));
  return c[key].get<int64_t>();
}

namespace {

/// hypipe's RMSNorm epsilon (kNormEps) as config.json says it.
constexpr double kNormEpsilon = 1e-5;

/// Rows [first, first + count) in order.
std::vector<int64_t> rowRange(int64_t first, int64_t count) {
  std::vector<int64_t> rows(static_cast<size_t>(count));
  std::iota(rows.begin(), rows.end(), first);
  return rows;
}

/// The pattern `layers` as (mixer, MLP) pairs of `mixer` and '-', which
/// both architectures' decoder layers are; why not, or "".
std::string pairsOf(const std::string &layers, char mixer,
                    const char *architecture) {
  if (layers.find('/') != std::string::npos)
    return "the pattern has multi-token prediction ('/'), and hypipe exports "
           "the main model only";
  if (layers.empty() || layers.size() % 2)
    return fmt::format("{}'s decoder layers are a mixer then an MLP, and the "
                       "pattern has {} layers",
                       architecture, layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    const char want = i % 2 ? '-' : mixer;
    if (layers[i] == want)
      continue;
    if (layers[i] == 'E')
      return fmt::format(
          "layer {} is a mixture of experts ('E'): hypipe's MoE is "
          "Megatron's softmax top-k router without shared experts, and {}'s "
          "MoE {}",
          i + 1, architecture,
          mixer == 'G' ? "adds a shared expert with a sigmoid gate"
                       : "routes with a sigmoid and a score-correction bias "
                         "over expert groups, with shared experts");
    if (layers[i] == '*' && mixer == 'G')
      return fmt::format(
          "layer {} is attention ('*'), and Qwen3-Next's full attention is "
          "gated (q_proj doubled), with q and k norms and partial RoPE: not "
          "hypipe's",
          i + 1);
    return fmt::format("layer {} is '{}' where '{}' belongs: {}'s decoder "
                       "layers are a '{}' mixer then an MLP ('-'), a pattern "
                       "'{}-{}-...'",
                       i + 1, layers[i], want, architecture, mixer, mixer,
                       mixer);
  }
  return "";
}

/// Why the MLPs of `m` are not those of Qwen3-Next and DeepSeek-V3
/// (down_proj(silu(gate_proj(x)) * up_proj(x))), or "".
std::string swigluOnly(const ModelInfo &m) {
  if (m.activation != "swiglu")
    return fmt::format("its MLPs use {}, and the architecture's MLP is "
                       "swiglu (gate_proj, up_proj, down_proj)",
                       m.activation);
  return "";
}

/// A model of the architecture's fields hypipe does not read: Megatron's
/// defaults, so hypipe's rules for the dimensions hold.
ModelInfo importedModel(const json &c, const std::string &path, char mixer) {
  const ModelDims defaults;
  ModelInfo m;
  m.name = "imported";
  m.positionEmbedding = "none";
  m.activation = "swiglu";
  m.vocab = configInt(c, "vocab_size", path);
  m.hidden = configInt(c, "hidden_size", path);
  m.ffnHidden = configInt(c, "intermediate_size", path);
  const int64_t decoderLayers = configInt(c, "num_hidden_layers", path);
  if (decoderLayers <= 0 || decoderLayers > 100000)
    throw RuntimeError(fmt::format(
        "error: '{}' cannot be imported: num_hidden_layers is {}\nhelp: a "
        "model of 1 to 100000 decoder layers",
        path, decoderLayers));
  for (int64_t i = 0; i < decoderLayers; ++i)
    m.pattern += std::string{mixer, '-'};
  m.numLayers = int64_t(m.pattern.size());
  m.tieEmbeddings = configOr(c, "tie_word_embeddings", false, path);
  m.numHeads = defaults.numHeads;
  m.numQueryGroups = defaults.numQueryGroups;
  m.mambaNumHeads = defaults.mambaNumHeads;
  m.mambaHeadDim = defaults.mambaHeadDim;
  m.mambaState = defaults.mambaState;
  m.mambaNumGroups = defaults.mambaNumGroups;
  m.mambaConvWidth = defaults.mambaConvWidth;
  return m;
}

/// Refuses config.json's `key` when it is present and says other than
/// `expected` (what hypipe computes, in words: `computes`).
void require(const json &c, const char *key, const json &expected,
             const std::string &path, const std::string &computes,
             bool absentIsFine = true) {
  auto it = c.find(key);
  if (it == c.end() && absentIsFine)
    return;
  const bool same =
      it != c.end() &&
      (expected.is_number_float() && it->is_number()
           ? std::abs(it->get<double>() - expected.get<double>()) <=
                 1e-12 * std::max(1.0, std::abs(expected.get<double>()))
           : *it == expected);
  if (!same)
    throw RuntimeError(fmt::format(
        "error: '{}' cannot be imported: its {} is {}, and hypipe computes "
        "{}\nhelp: hypipe imports the models it computes exactly; this one "
        "would train as another model",
        path, key, it == c.end() ? "absent" : files::excerpt(it->dump(), 120),
        computes));
}

void requireArchitecture(const json &c, const char *className,
                         const std::string &path) {
  if (!c.contains("architectures"))
    return;
  const json &a = c["architectures"];
  if (!a.is_array() || std::none_of(a.begin(), a.end(), [&](const json &x) {
        return x == className;
      }))
    require(c, "architectures", json::array({className}), path, className);
}

/// The config.json fields both architectures share: `n` decoder layers of
/// a swiglu MLP, hypipe's norm epsilon, no biases.
json decoderConfig(const ModelInfo &m, int64_t n, const char *className,
                   const char *modelType) {
  json c;
  c["architectures"] = {className};
  c["model_type"] = modelType;
  c["vocab_size"] = m.vocab;
  c["hidden_size"] = m.hidden;
  c["intermediate_size"] = m.ffnHidden;
  c["num_hidden_layers"] = n;
  c["hidden_act"] = "silu";
  // Every norm takes this epsilon: hypipe's kNormEps, as NemotronH's
  // export writes it.
  c["rms_norm_eps"] = kNormEpsilon;
  c["tie_word_embeddings"] = m.tieEmbeddings;
  c["attention_bias"] = false;
  c["attention_dropout"] = 0.0;
  c["initializer_range"] = 0.02;
  return c;
}

/// Decoder layer `i` of a (mixer, MLP) architecture: hypipe's prefixes of
/// its mixer and its MLP, and its Hugging Face prefix.
struct DecoderLayer {
  std::string mixer, mlp, hf;
  explicit DecoderLayer(size_t i)
      : mixer(fmt::format("decoder.layers.{}.", 2 * i)),
        mlp(fmt::format("decoder.layers.{}.", 2 * i + 1)),
        hf(fmt::format("model.layers.{}.", i)) {}
};

/// The MLP of a decoder layer: Megatron's fc1 rows [gate; up] cut in two.
void addSwiglu(std::vector<TensorMap> &out, const DecoderLayer &l, int64_t ffn,
               float normOffset) {
  out.push_back({l.mlp + "mlp.linear_fc1.layer_norm_weight",
                 {{l.hf + "post_attention_layernorm.weight", {}, normOffset}}});
  out.push_back({l.mlp + "mlp.linear_fc1.weight",
                 {{l.hf + "mlp.gate_proj.weight", rowRange(0, ffn)},
                  {l.hf + "mlp.up_proj.weight", rowRange(ffn, ffn)}}});
  out.push_back(
      {l.mlp + "mlp.linear_fc2.weight", {{l.hf + "mlp.down_proj.weight"}}});
}

/// Embedding, final norm and (untied) head.
void addEnds(std::vector<TensorMap> &out, const ModelInfo &m,
             float normOffset) {
  out.push_back(
      {"embedding.word_embeddings.weight", {{"model.embed_tokens.weight"}}});
  out.push_back(
      {"decoder.final_norm.weight", {{"model.norm.weight", {}, normOffset}}});
  if (!m.tieEmbeddings)
    out.push_back({"output_layer.weight", {{"lm_head.weight"}}});
}

//===----------------------------------------------------------------------===//
// Qwen3-Next: Gated DeltaNet then an MLP in every decoder layer.
//===----------------------------------------------------------------------===//

/// Qwen3-Next's decoder norms (input_layernorm, post_attention_layernorm,
/// the final norm) are zero-centred: weight w computes x / rms(x) (1 + w).
/// Its gated norm in the mixer is not.
constexpr float kZeroCentred = -1.0f;

std::string qwen3NextInexpressible(const ModelInfo &m,
                                   const std::string &layers) {
  if (std::string why = pairsOf(layers, 'G', "Qwen3-Next"); !why.empty())
    return why;
  if (!m.gdn)
    return "the checkpoint does not record its Gated DeltaNet sizes (it "
           "predates them in model_config): pass --artifact";
  return swigluOnly(m);
}

json qwen3NextConfig(const ModelInfo &m, const std::string &layers) {
  const GdnShape &g = *m.gdn;
  const int64_t n = int64_t(layers.size()) / 2;
  json c = decoderConfig(m, n, "Qwen3NextForCausalLM", "qwen3_next");
  c["layer_types"] = json::array();
  json mlpOnly = json::array();
  for (int64_t i = 0; i < n; ++i) {
    c["layer_types"].push_back("linear_attention");
    mlpOnly.push_back(i);
  }
  // Dense MLPs everywhere: no experts, and every layer an MLP-only one.
  c["num_experts"] = 0;
  c["mlp_only_layers"] = mlpOnly;
  c["decoder_sparse_step"] = 1;
  c["linear_num_key_heads"] = g.keyHeads;
  c["linear_num_value_heads"] = g.valueHeads;
  c["linear_key_head_dim"] = g.keyHeadDim;
  c["linear_value_head_dim"] = g.valueHeadDim;
  c["linear_conv_kernel_dim"] = g.convWidth;
  // No full-attention layer: its sizes are transformers' defaults' shape.
  c["num_attention_heads"] = m.numHeads;
  c["num_key_value_heads"] = m.numQueryGroups;
  c["head_dim"] = m.kvChannels;
  // transformers 5.24's cache for Qwen3-Next asks an attention layer for
  // the sequence length, and a model of Gated DeltaNet layers alone has
  // none: with a cache its forward fails.
  c["use_cache"] = false;
  return c;
}

std::vector<TensorMap> qwen3NextTensors(const ModelInfo &m,
                                        const std::string &layers) {
  const GdnShape &g = *m.gdn;
  const int64_t nk = g.keyHeads, dk = g.keyHeadDim, dv = g.valueHeadDim,
                r = g.headsPerKey();
  // Megatron's in_proj rows are blocked [q k v z beta alpha]; Qwen3-Next
  // groups them per key head i: in_proj_qkvz [q_i k_i v_i z_i] and
  // in_proj_ba [b_i a_i], v_i, z_i, b_i and a_i those of i's r value heads.
  const int64_t k0 = g.keyWidth(), v0 = 2 * k0, z0 = v0 + g.valueWidth(),
                b0 = z0 + g.valueWidth(), a0 = b0 + g.valueHeads;
  std::vector<int64_t> qkvz, ba;
  for (int64_t i = 0; i < nk; ++i) {
    for (int64_t first : {i * dk, k0 + i * dk})
      for (int64_t row : rowRange(first, dk))
        qkvz.push_back(row);
    for (int64_t first : {v0 + i * r * dv, z0 + i * r * dv})
      for (int64_t row : rowRange(first, r * dv))
        qkvz.push_back(row);
    for (int64_t first : {b0 + i * r, a0 + i * r})
      for (int64_t row : rowRange(first, r))
        ba.push_back(row);
  }
  std::vector<TensorMap> out;
  for (size_t i = 0; i < layers.size() / 2; ++i) {
    const DecoderLayer l(i);
    const std::string ours = l.mixer + "self_attention.";
    const std::string hf = l.hf + "linear_attn.";
    out.push_back({ours + "in_proj.layer_norm_weight",
                   {{l.hf + "input_layernorm.weight", {}, kZeroCentred}}});
    out.push_back(
        {ours + "in_proj.weight",
         {{hf + "in_proj_qkvz.weight", qkvz}, {hf + "in_proj_ba.weight", ba}}});
    // The conv's channels are [q k v], blocked, in both.
    for (const char *same :
         {"conv1d.weight", "dt_bias", "A_log", "out_proj.weight"})
      out.push_back({ours + same, {{hf + same}}});
    out.push_back({ours + "out_norm.weight", {{hf + "norm.weight"}}});
    addSwiglu(out, l, m.ffnHidden, kZeroCentred);
  }
  addEnds(out, m, kZeroCentred);
  return out;
}

ModelInfo qwen3NextModel(const json &c, const std::string &path) {
  requireArchitecture(c, "Qwen3NextForCausalLM", path);
  ModelInfo m = importedModel(c, path, 'G');
  const int64_t n = m.numLayers / 2;
  GdnShape g{m.hidden,
             configInt(c, "linear_num_key_heads", path),
             configInt(c, "linear_num_value_heads", path),
             configInt(c, "linear_key_head_dim", path),
             configInt(c, "linear_value_head_dim", path),
             configInt(c, "linear_conv_kernel_dim", path)};
  m.gdn = g;
  require(c, "hidden_act", "silu", path, "a swiglu MLP (silu)");
  require(c, "rms_norm_eps", kNormEpsilon, path,
          "RMSNorm with epsilon 1e-5 (Megatron's)", false);
  json linear = json::array();
  for (int64_t i = 0; i < n; ++i)
    linear.push_back("linear_attention");
  require(c, "layer_types", linear, path,
          "a Gated DeltaNet in every decoder layer (its gated full attention "
          "with q/k norms and partial RoPE is not hypipe's '*')",
          false);
  // Dense MLPs: no experts, or every layer MLP-only.
  const bool experts =
      c.contains("num_experts") && !(c["num_experts"].is_number_integer() &&
                                     c["num_experts"].get<int64_t>() == 0);
  if (experts) {
    json all = json::array();
    for (int64_t i = 0; i < n; ++i)
      all.push_back(i);
    require(c, "mlp_only_layers", all, path,
            "a dense MLP in every decoder layer (num_experts 0, or every "
            "layer in mlp_only_layers): Qwen3-Next's MoE is not hypipe's",
            false);
  }
  m.kvChannels = m.hidden / m.numHeads;
  return m;
}

//===----------------------------------------------------------------------===//
// DeepSeek-V3: multi-latent attention then a dense MLP in every layer.
//===----------------------------------------------------------------------===//

/// The angles' factor YaRN gives and the softmax scale's: Megatron's (and
/// DeepSeek-V3's) original context, and beta_fast and beta_slow.
json ropeParameters(const MlaShape &a) {
  if (!a.yarn)
    return {{"rope_type", "default"}, {"rope_theta", a.rotaryBase}};
  return {{"rope_type", "yarn"},
          {"rope_theta", a.rotaryBase},
          {"factor", a.scalingFactor},
          {"original_max_position_embeddings",
           int64_t(MlaShape::kOriginalMaxPositions)},
          {"beta_fast", MlaShape::kBetaFast},
          {"beta_slow", MlaShape::kBetaSlow},
          {"mscale", a.mscale},
          {"mscale_all_dim", a.mscaleAllDim},
          // Given, since transformers infers it as mscale(f) alone when
          // mscale_all_dim is 0, and hypipe (Megatron) as
          // mscale(f, mscale) / mscale(f, mscale_all_dim) always.
          {"attention_factor", a.ropeFactor()}};
}

std::string deepseekV3Inexpressible(const ModelInfo &m,
                                    const std::string &layers) {
  if (std::string why = pairsOf(layers, '+', "DeepSeek-V3"); !why.empty())
    return why;
  if (!m.mla)
    return "the checkpoint does not record its multi-latent attention's "
           "sizes (it predates them in model_config): pass --artifact";
  if (!m.mla->qkLayernorm)
    return "its '+' layers have no qk_layernorm, and DeepSeek-V3 always "
           "normalises the latents (q_a_layernorm, kv_a_layernorm): ones "
           "there would still divide by the latents' RMS";
  if (!m.mla->yarn &&
      MlaShape::yarnMscale(m.mla->scalingFactor, m.mla->mscaleAllDim) != 1.0)
    return "its RoPE (rope_type rope) scales the scores by mscale_all_dim's "
           "factor, as Megatron does for either rope type, and DeepSeek-V3 "
           "does that only with YaRN";
  if (m.mla->rotaryBase != 10000.0)
    return "its rotary base is not 10000";
  return swigluOnly(m);
}

json deepseekV3Config(const ModelInfo &m, const std::string &layers) {
  const MlaShape &a = *m.mla;
  const int64_t n = int64_t(layers.size()) / 2;
  json c = decoderConfig(m, n, "DeepseekV3ForCausalLM", "deepseek_v3");
  c["num_attention_heads"] = a.heads;
  c["num_key_value_heads"] = a.heads;
  c["q_lora_rank"] = a.qLoraRank > 0 ? json(a.qLoraRank) : json(nullptr);
  c["kv_lora_rank"] = a.kvLoraRank;
  c["qk_nope_head_dim"] = a.qkHeadDim;
  c["qk_rope_head_dim"] = a.posEmbDim;
  c["v_head_dim"] = a.vHeadDim;
  // Every layer dense (its MoE, sigmoid-routed with a correction bias, is
  // not hypipe's); the expert fields, unused, kept small.
  c["first_k_dense_replace"] = n;
  c["moe_intermediate_size"] = m.ffnHidden;
  c["n_routed_experts"] = 1;
  c["n_shared_experts"] = 1;
  c["num_experts_per_tok"] = 1;
  c["n_group"] = 1;
  c["topk_group"] = 1;
  c["num_mtp_layers"] = 0;
  // Megatron's MLA rotates the rotary channels de-interleaved (even, then
  // odd), which is DeepSeek-V3's rope_interleave.
  c["rope_interleave"] = true;
  c["rope_parameters"] = ropeParameters(a);
  c["rope_theta"] = a.rotaryBase;
  c["max_position_embeddings"] =
      int64_t(MlaShape::kOriginalMaxPositions *
              (a.yarn ? std::max(1.0, a.scalingFactor) : 1.0));
  c["use_cache"] = true;
  return c;
}

std::vector<TensorMap> deepseekV3Tensors(const ModelInfo &m,
                                         const std::string &layers) {
  const MlaShape &a = *m.mla;
  std::vector<TensorMap> out;
  for (size_t i = 0; i < layers.size() / 2; ++i) {
    const DecoderLayer l(i);
    const std::string ours = l.mixer + "self_attention.";
    const std::string hf = l.hf + "self_attn.";
    auto add = [&](const std::string &o, const std::string &h) {
      out.push_back({ours + o, {{hf + h}}});
    };
    out.push_back({l.mixer + "input_layernorm.weight",
                   {{l.hf + "input_layernorm.weight"}}});
    if (a.qLoraRank > 0) {
      add("linear_q_down_proj.weight", "q_a_proj.weight");
      add("linear_q_up_proj.layer_norm_weight", "q_a_layernorm.weight");
      add("linear_q_up_proj.weight", "q_b_proj.weight");
    } else {
      add("linear_q_proj.weight", "q_proj.weight");
    }
    // [c_kv | k_pe], and per head [k_nope; v]: the same rows in both.
    add("linear_kv_down_proj.weight", "kv_a_proj_with_mqa.weight");
    add("linear_kv_up_proj.layer_norm_weight", "kv_a_layernorm.weight");
    add("linear_kv_up_proj.weight", "kv_b_proj.weight");
    add("linear_proj.weight", "o_proj.weight");
    addSwiglu(out, l, m.ffnHidden, 0.0f);
  }
  addEnds(out, m, 0.0f);
  return out;
}

ModelInfo deepseekV3Model(const json &c, const std::string &path) {
  requireArchitecture(c, "DeepseekV3ForCausalLM", path);
  ModelInfo m = importedModel(c, path, '+');
  const int64_t n = m.numLayers / 2;
  require(c, "hidden_act", "silu", path, "a swiglu MLP (silu)");
  require(c, "rms_norm_eps", kNormEpsilon, path,
          "RMSNorm with epsilon 1e-5 (Megatron's)", false);
  require(c, "rope_interleave", true, path,
          "Megatron's MLA rotary embedding (the channels de-interleaved)");
  require(c, "attention_bias", false, path, "no bias on the projections");
  if (configInt(c, "first_k_dense_replace", path) < n)
    require(c, "first_k_dense_replace", n, path,
            "a dense MLP in every decoder layer (DeepSeek-V3's MoE is not "
            "hypipe's)",
            false);
  MlaShape a{m.hidden,
             configInt(c, "num_attention_heads", path),
             0,
             configInt(c, "kv_lora_rank", path),
             configInt(c, "qk_nope_head_dim", path),
             configInt(c, "qk_rope_head_dim", path),
             configInt(c, "v_head_dim", path),
             /*qkLayernorm=*/true};
  if (c.contains("q_lora_rank") && !c["q_lora_rank"].is_null())
    a.qLoraRank = configInt(c, "q_lora_rank", path);
  if (c.contains("num_key_value_heads"))
    require(c, "num_key_value_heads", a.heads, path,
            "one key and value head per query head (MLA's)");
  const json rope = c.contains("rope_parameters") ? c["rope_parameters"]
                    : c.contains("rope_scaling")  ? c["rope_scaling"]
                                                  : json::object();
  const std::string ropePath = path + " (rope_parameters)";
  if (!rope.is_object())
    throw RuntimeError(fmt::format(
        "error: '{}' has rope_parameters that are not an object", path));
  const std::string type =
      configOr<std::string>(rope, "rope_type", "default", ropePath);
  if (type != "default" && type != "yarn")
    require(rope, "rope_type", "yarn", ropePath,
            "RoPE or YaRN (Megatron's rope_type rope or yarn)");
  a.yarn = type == "yarn";
  const double theta =
      rope.contains("rope_theta") && rope["rope_theta"].is_number()
          ? rope["rope_theta"].get<double>()
          : 10000.0;
  require(json{{"rope_theta", theta}}, "rope_theta", 10000.0, ropePath,
          "a rotary base of 10000", false);
  if (a.yarn) {
    auto number = [&](const char *key) {
      if (!rope.contains(key) || !rope[key].is_number())
        throw RuntimeError(fmt::format(
            "error: '{}' lacks the number '{}'\nhelp: YaRN's settings: "
            "factor, mscale, mscale_all_dim",
            ropePath, key));
      return rope[key].get<double>();
    };
    a.scalingFactor = number("factor");
    if (!(a.scalingFactor > 0))
      require(rope, "factor", 1.0, ropePath,
              "YaRN with a positive scaling factor");
    a.mscale = number("mscale");
    a.mscaleAllDim = number("mscale_all_dim");
    require(rope, "original_max_position_embeddings",
            int64_t(MlaShape::kOriginalMaxPositions), ropePath,
            "YaRN from an original context of 4096 (Megatron's)", false);
    require(rope, "beta_fast", MlaShape::kBetaFast, ropePath,
            "YaRN's beta_fast 32");
    require(rope, "beta_slow", MlaShape::kBetaSlow, ropePath,
            "YaRN's beta_slow 1");
    const bool inferred = !rope.contains("attention_factor");
    // transformers' inference without attention_factor: mscale(f, mscale)
    // over mscale(f, mscale_all_dim) when both are non-zero, else
    // mscale(f).
    const double theirs =
        inferred ? (a.mscale != 0 && a.mscaleAllDim != 0
                        ? a.ropeFactor()
                        : MlaShape::yarnMscale(a.scalingFactor, 1.0))
                 : number("attention_factor");
    require(json{{"attention_factor", theirs}}, "attention_factor",
            a.ropeFactor(), ropePath,
            "mscale(factor, mscale) / mscale(factor, mscale_all_dim) on cos "
            "and sin (Megatron's YaRN)",
            false);
  }
  m.mla = a;
  m.numHeads = a.heads;
  m.numQueryGroups = a.heads;
  // A head count of 0 is refused by hypipe's rules for the dimensions,
  // which the caller applies next.
  m.kvChannels = a.heads > 0 ? m.hidden / a.heads : 0;
  return m;
}

} // namespace

const Architecture kQwen3Next = {
    "Qwen3-Next",
    "Qwen3NextForCausalLM",
    "qwen3_next",
    "export a model of Gated DeltaNet layers each followed by a swiglu MLP "
    "('G-G-...')",
    "model.embed_tokens.weight",
    qwen3NextInexpressible,
    qwen3NextConfig,
    qwen3NextTensors,
    qwen3NextModel};

const Architecture kDeepseekV3 = {
    "DeepSeek-V3",
    "DeepseekV3ForCausalLM",
    "deepseek_v3",
    "export a model of multi-latent attention layers with qk_layernorm, "
    "each followed by a swiglu MLP ('+-+-...')",
    "model.embed_tokens.weight",
    deepseekV3Inexpressible,
    deepseekV3Config,
    deepseekV3Tensors,
    deepseekV3Model};

} // namespace hypipe::rt::hf
