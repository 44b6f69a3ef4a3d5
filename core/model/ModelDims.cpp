//===- ModelDims.cpp ------------------------------------------------------===//
#include "core/model/ModelDims.h"

#include "core/model/SizeBounds.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <tuple>
#include <utility>
#include <vector>

namespace hypipe {

namespace {

std::optional<DimsProblem> problem(std::string field, std::string message,
                                   std::string help, const char *label = "") {
  return DimsProblem{std::move(field), std::move(message), std::move(help),
                     label};
}

using SizeField = std::pair<const char *, int64_t>;

/// The Gated DeltaNet sizes, as the spec names them.
std::array<SizeField, 5> gdnSizes(const ModelDims &d) {
  return {SizeField{"linear_num_key_heads", d.gdnNumKeyHeads},
          SizeField{"linear_num_value_heads", d.gdnNumValueHeads},
          SizeField{"linear_key_head_dim", d.gdnKeyHeadDim},
          SizeField{"linear_value_head_dim", d.gdnValueHeadDim},
          SizeField{"linear_conv_kernel_dim", d.gdnConvWidth}};
}

/// DeepSeek sparse attention's indexer sizes, as the spec names them.
std::array<SizeField, 3> dsaSizes(const ModelDims &d) {
  return {SizeField{"dsa_indexer_n_heads", d.dsaIndexerNHeads},
          SizeField{"dsa_indexer_head_dim", d.dsaIndexerHeadDim},
          SizeField{"dsa_indexer_topk", d.dsaIndexerTopk}};
}

/// dims_c0: sizes a machine can hold, and products that cannot overflow.
std::optional<DimsProblem> checkBounds(const ModelDims &d) {
  // Each size within its bound of the table (SizeBounds.h), so every
  // product below fits an int64.
  std::vector<SizeField> dims = {{"hidden_size", d.hidden},
                                 {"ffn_hidden_size", d.ffnHidden},
                                 {"num_attention_heads", d.numHeads},
                                 {"num_query_groups", d.numQueryGroups},
                                 {"mamba_state_dim", d.mambaState},
                                 {"mamba_num_heads", d.mambaNumHeads},
                                 {"mamba_head_dim", d.mambaHeadDim},
                                 {"mamba_num_groups", d.mambaNumGroups},
                                 {"mamba_conv_width", d.mambaConvWidth},
                                 {"num_experts", d.numExperts},
                                 {"moe_router_topk", d.moeTopK},
                                 {"moe_ffn_hidden_size", d.moeFfnHidden},
                                 {"vocab_size", d.vocab},
                                 {"q_lora_rank", d.qLoraRank},
                                 {"kv_lora_rank", d.kvLoraRank},
                                 {"qk_head_dim", d.qkHeadDim},
                                 {"qk_pos_emb_head_dim", d.qkPosEmbHeadDim},
                                 {"v_head_dim", d.vHeadDim}};
  for (SizeField size : gdnSizes(d))
    dims.push_back(size);
  for (SizeField size : dsaSizes(d))
    dims.push_back(size);
  for (auto [field, value] : dims) {
    const SizeBound &bound = sizeBound(std::string("model.") + field);
    if (value > bound.max)
      return problem(field, tooLarge(field, value, bound.max),
                     std::string(bound.help), "dims_c0");
  }
  if (d.mambaNumHeads > 0 && d.mambaHeadDim > 0 &&
      d.mambaInner() > kMaxMambaInner)
    return problem("mamba_num_heads",
                   tooLarge(fmt::format("the Mamba inner width "
                                        "mamba_num_heads x mamba_head_dim = "
                                        "{} x {}",
                                        d.mambaNumHeads, d.mambaHeadDim),
                            d.mambaInner(), kMaxMambaInner),
                   "Mamba-2 models are at most a few times hidden_size "
                   "wide; use fewer or narrower heads",
                   "dims_c0");
  // Each product below is under 2^48 (negative sizes, refused later, count
  // as 0), and is compared with 2^36 / hidden.
  auto size = [](int64_t v) { return std::max<int64_t>(v, 0); };
  const std::pair<const char *, int64_t> perHidden[] = {
      {"vocab_size", d.vocab},
      {"ffn_hidden_size", d.ffnHidden},
      {"mamba_num_heads", size(d.mambaNumHeads) * size(d.mambaHeadDim)},
      {"mamba_state_dim", size(d.mambaState) * size(d.mambaNumGroups)},
      {"num_experts", size(d.numExperts) * size(d.expertFfnHidden())}};
  for (auto [field, elements] : perHidden)
    if (d.hidden > 0 && elements > kMaxWeightElements / d.hidden)
      return problem(field,
                     fmt::format("{} makes a weight of more than 2^36 "
                                 "elements with hidden_size {}",
                                 field, d.hidden),
                     "its weight, gradient and optimizer state would fill "
                     "the 1 TiB one rank may hold; use smaller dimensions",
                     "dims_c0");
  return std::nullopt;
}

/// dims_c1: the residual width, vocabulary and MLP width are positive.
std::optional<DimsProblem> checkWidths(const ModelDims &d) {
  if (d.hidden <= 0)
    return problem(
        "hidden_size",
        fmt::format("hidden_size must be positive, got {}", d.hidden),
        "set model.hidden_size to the width of the residual stream, e.g. 256",
        "dims_c1");
  if (d.vocab <= 0)
    return problem("vocab_size",
                   fmt::format("vocab_size must be positive, got {}", d.vocab),
                   "use 256 for byte-level data", "dims_c1");
  if (d.ffnHidden <= 0)
    return problem(
        "ffn_hidden_size",
        fmt::format("ffn_hidden_size must be positive, got {}", d.ffnHidden),
        "a common choice is 4 * hidden_size", "dims_c1");
  return std::nullopt;
}

/// dims_c2, dims_c3: attention heads divide the width, groups the heads.
std::optional<DimsProblem> checkAttention(const ModelDims &d) {
  if (d.numHeads < 0 || d.numQueryGroups < 0)
    return problem("num_attention_heads",
                   "attention head counts cannot be negative",
                   "use 0 for a model without attention", "dims_c2");
  if (d.numHeads > 0 && d.hidden % d.numHeads != 0)
    return problem(
        "num_attention_heads",
        fmt::format("num_attention_heads ({}) does not divide hidden_size ({})",
                    d.numHeads, d.hidden),
        "choose a head count that divides hidden_size", "dims_c2");
  if (d.numHeads > 0 &&
      (d.numQueryGroups <= 0 || d.numHeads % d.numQueryGroups != 0))
    return problem(
        "num_query_groups",
        fmt::format("num_query_groups ({}) must be positive and divide "
                    "num_attention_heads ({})",
                    d.numQueryGroups, d.numHeads),
        "use num_query_groups = num_attention_heads for plain multi-head "
        "attention",
        "dims_c3");
  return std::nullopt;
}

/// dims_c4: a model with Mamba heads has every Mamba size.
std::optional<DimsProblem> checkMamba(const ModelDims &d) {
  if (d.mambaNumHeads < 0)
    return problem("mamba_num_heads", "mamba_num_heads cannot be negative",
                   "use 0 for a model without Mamba layers", "dims_c4");
  if (d.mambaNumHeads > 0) {
    if (d.mambaHeadDim <= 0)
      return problem("mamba_head_dim",
                     fmt::format("mamba_head_dim must be positive, got {}",
                                 d.mambaHeadDim),
                     "Megatron's default is 64", "dims_c4");
    if (d.mambaState <= 0)
      return problem(
          "mamba_state_dim",
          fmt::format("mamba_state_dim must be positive, got {}", d.mambaState),
          "Megatron's default is 128", "dims_c4");
    if (d.mambaConvWidth <= 0)
      return problem("mamba_conv_width",
                     fmt::format("mamba_conv_width must be positive, got {}",
                                 d.mambaConvWidth),
                     "the usual width is 4", "dims_c4");
    if (d.mambaNumGroups <= 0 || d.mambaNumHeads % d.mambaNumGroups != 0)
      return problem(
          "mamba_num_groups",
          fmt::format("mamba_num_groups ({}) must be positive and divide "
                      "mamba_num_heads ({})",
                      d.mambaNumGroups, d.mambaNumHeads),
          "use 1, or a divisor of mamba_num_heads", "dims_c4");
  }
  return std::nullopt;
}

/// dims_c5: experts, top-k within them, and their width.
std::optional<DimsProblem> checkMoe(const ModelDims &d) {
  if (d.numExperts < 0)
    return problem("num_experts", "num_experts cannot be negative",
                   "use 0 for a model without MoE layers", "dims_c5");
  if (d.numExperts > 0 && (d.moeTopK < 1 || d.moeTopK > d.numExperts))
    return problem(
        "moe_router_topk",
        fmt::format(
            "moe_router_topk ({}) must be between 1 and num_experts ({})",
            d.moeTopK, d.numExperts),
        "top-2 routing is a common choice", "dims_c5");
  if (d.moeFfnHidden < 0)
    return problem("moe_ffn_hidden_size",
                   "moe_ffn_hidden_size cannot be negative",
                   "leave it out to use ffn_hidden_size", "dims_c5");
  return std::nullopt;
}

/// dims_c6: a known activation.
std::optional<DimsProblem> checkActivation(const ModelDims &d) {
  if (d.activation != "squared_relu" && d.activation != "gelu" &&
      d.activation != "swiglu")
    return problem("activation",
                   fmt::format("unknown activation '{}'", d.activation),
                   "use one of squared_relu, gelu, swiglu", "dims_c6");
  return std::nullopt;
}

/// dims_c7: multi-latent attention's sizes (Megatron-LM's MLA arguments).
std::optional<DimsProblem> checkLatentAttention(const ModelDims &d) {
  if (d.qLoraRank < 0)
    return problem(
        "q_lora_rank",
        fmt::format("q_lora_rank cannot be negative, got {}", d.qLoraRank),
        "use null (or leave it out) for queries without a "
        "down-projection, or a rank such as 1536",
        "dims_c7");
  const std::pair<const char *, int64_t> sizes[] = {
      {"kv_lora_rank", d.kvLoraRank},
      {"qk_head_dim", d.qkHeadDim},
      {"qk_pos_emb_head_dim", d.qkPosEmbHeadDim},
      {"v_head_dim", d.vHeadDim}};
  for (auto [field, value] : sizes)
    if (value <= 0)
      return problem(field,
                     fmt::format("{} must be positive, got {}", field, value),
                     "Megatron's defaults are kv_lora_rank 32, qk_head_dim "
                     "128, qk_pos_emb_head_dim 64 and v_head_dim 128",
                     "dims_c7");
  if (d.qkPosEmbHeadDim % 2 != 0)
    return problem("qk_pos_emb_head_dim",
                   fmt::format("qk_pos_emb_head_dim must be even (RoPE "
                               "rotates pairs of channels), got {}",
                               d.qkPosEmbHeadDim),
                   "DeepSeek-V3 uses 64", "dims_c7");
  return std::nullopt;
}

/// An MLA layer's weights within 2^36 elements each, as dims_c0 holds the
/// other kinds' (only for models that have MLA layers: the sizes have
/// defaults every model carries).
std::optional<DimsProblem> checkLatentAttentionWeights(const ModelDims &d) {
  const int64_t heads = d.numHeads;
  const int64_t queryIn = d.qLoraRank > 0 ? d.qLoraRank : d.hidden;
  const std::tuple<const char *, int64_t, int64_t> weights[] = {
      {"num_attention_heads", heads * d.mlaQkDim(), queryIn},
      {"kv_lora_rank", heads * (d.qkHeadDim + d.vHeadDim), d.kvLoraRank},
      {"v_head_dim", heads * d.vHeadDim, d.hidden},
      {"kv_lora_rank", d.kvLoraRank + d.qkPosEmbHeadDim, d.hidden},
      {"q_lora_rank", d.qLoraRank, d.hidden}};
  for (auto [field, rows, columns] : weights)
    if (columns > 0 && rows > kMaxWeightElements / columns)
      return problem(field,
                     fmt::format("{} makes an MLA weight of more than 2^36 "
                                 "elements",
                                 field),
                     "its weight, gradient and optimizer state would fill "
                     "the 1 TiB one rank may hold; use smaller dimensions");
  return std::nullopt;
}

/// The first of a layer kind's `sizes` below 1 (dims_c0 bounds them
/// above), as a problem of `layers` ("gated delta net layers ('G')").
template <size_t N>
std::optional<DimsProblem> needPositive(const std::array<SizeField, N> &sizes,
                                        const char *layers, const char *help) {
  for (auto [field, value] : sizes)
    if (value < 1)
      return problem(
          field,
          fmt::format("{} need a positive {}, got {}", layers, field, value),
          help);
  return std::nullopt;
}

/// What a DeepSeek sparse attention layer needs beyond MLA's (Megatron's
/// DSAIndexer): the three indexer sizes set (Megatron has no default for
/// them), and an indexer head wide enough for the rotary part it shares
/// with MLA (the indexer splits each head into [nope | pe] of
/// qk_pos_emb_head_dim).
std::optional<DimsProblem> checkDsa(const ModelDims &d) {
  if (std::optional<DimsProblem> found = checkLatentAttentionWeights(d))
    return found;
  if (auto found = needPositive(dsaSizes(d), "sparse attention layers ('D')",
                                "Megatron-LM has no default for it; "
                                "DeepSeek-V3.2 uses dsa_indexer_n_heads 64, "
                                "dsa_indexer_head_dim 128 and "
                                "dsa_indexer_topk 2048"))
    return found;
  if (d.dsaIndexerHeadDim < d.qkPosEmbHeadDim)
    return problem("dsa_indexer_head_dim",
                   fmt::format("dsa_indexer_head_dim ({}) must be at least "
                               "qk_pos_emb_head_dim ({}): the indexer's "
                               "queries and keys carry the rotary part in "
                               "their last qk_pos_emb_head_dim channels",
                               d.dsaIndexerHeadDim, d.qkPosEmbHeadDim),
                   "DeepSeek-V3.2 uses 128 with qk_pos_emb_head_dim 64");
  const int64_t queryIn = d.qLoraRank > 0 ? d.qLoraRank : d.hidden;
  if (d.dsaIndexerNHeads * d.dsaIndexerHeadDim > kMaxWeightElements / queryIn)
    return problem("dsa_indexer_n_heads",
                   "dsa_indexer_n_heads x dsa_indexer_head_dim makes an "
                   "indexer weight of more than 2^36 elements",
                   "its weight, gradient and optimizer state would fill "
                   "the 1 TiB one rank may hold; use smaller dimensions");
  return std::nullopt;
}

/// What a Gated DeltaNet layer needs (Megatron-LM's GatedDeltaNet): sizes
/// within their bounds, value heads in whole groups of the key heads (each
/// key head serves nv / nk value heads) and the SiLU its gate and conv use,
/// which Megatron takes from the model's activation (--swiglu).
std::optional<DimsProblem> checkGdn(const ModelDims &d) {
  if (auto found = needPositive(gdnSizes(d), "gated delta net layers ('G')",
                                "Megatron-LM's defaults are 16 key and 32 "
                                "value heads of 128 channels, and a "
                                "convolution of 4"))
    return found;
  if (d.gdnNumValueHeads % d.gdnNumKeyHeads != 0)
    return problem(
        "linear_num_value_heads",
        fmt::format("linear_num_value_heads ({}) must be a multiple of "
                    "linear_num_key_heads ({}): each key head serves "
                    "linear_num_value_heads / linear_num_key_heads value heads",
                    d.gdnNumValueHeads, d.gdnNumKeyHeads),
        "Megatron-LM's defaults are 32 value heads over 16 key heads");
  if (d.activation != "swiglu")
    return problem(
        "activation",
        fmt::format("gated delta net layers ('G') need activation: swiglu "
                    "(Megatron-LM's --swiglu, whose SiLU their conv and "
                    "output gate use), got '{}'",
                    d.activation),
        "set model.activation: swiglu");
  return std::nullopt;
}

} // namespace

std::optional<DimsProblem> checkModelDims(const ModelDims &d) {
  for (auto check : {checkBounds, checkWidths, checkAttention, checkMamba,
                     checkMoe, checkActivation, checkLatentAttention})
    if (std::optional<DimsProblem> found = check(d))
      return found;
  return std::nullopt;
}

std::optional<DimsProblem> checkLayerKindDims(char symbol, const ModelDims &d) {
  switch (symbol) {
  case 'M':
    if (d.mambaNumHeads <= 0)
      return problem(
          "mamba_num_heads", "Mamba layers ('M') need mamba_num_heads > 0",
          "set model.mamba_num_heads (and mamba_head_dim, mamba_state_dim)");
    return std::nullopt;
  case '+':
  case 'D':
    if (d.numHeads <= 0)
      return problem(
          "num_attention_heads",
          fmt::format("'{}' layers need num_attention_heads > 0", symbol),
          "set model.num_attention_heads");
    return symbol == 'D' ? checkDsa(d) : checkLatentAttentionWeights(d);
  case 'G':
    return checkGdn(d);
  case '*':
    if (d.numHeads <= 0)
      return problem(
          "num_attention_heads",
          fmt::format("'{}' layers need num_attention_heads > 0", symbol),
          "set model.num_attention_heads");
    return std::nullopt;
  case '-':
    return std::nullopt; // ffn_hidden_size > 0 is dims_c1.
  case 'E':
    if (d.numExperts <= 0)
      return problem("num_experts", "MoE layers ('E') need num_experts > 0",
                     "set model.num_experts and model.moe_router_topk");
    return std::nullopt;
  default:
    return problem("pattern", fmt::format("'{}' is not a layer symbol", symbol),
                   "use one of M * - E G D +");
  }
}

} // namespace hypipe
