//===- SizeBounds.cpp -----------------------------------------------------===//
#include "core/model/SizeBounds.h"

#include "core/Saturating.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>

namespace hypipe {

namespace {

constexpr int64_t pow2(int k) { return int64_t(1) << k; }

} // namespace

const std::vector<SizeBound> &sizeBounds() {
  // Each bound is at or above the largest trained model's size, most of
  // them many times it (Megatron's 1T GPT, Llama 3.1 405B, DeepSeek-V3,
  // Kimi K2, Nemotron-H, Jamba): docs/security.md lists them side by side.
  static const std::vector<SizeBound> bounds = {
      {"model.num_layers", kMaxLayers,
       "use fewer layers; the deepest trained models have a few hundred"},
      {"model.hidden_size", pow2(16),
       "use a narrower model; the widest trained ones are 16384 to 25600 wide"},
      {"model.ffn_hidden_size", pow2(18),
       "use a narrower MLP; the widest trained ones have about 100000 "
       "channels"},
      {"model.num_attention_heads", pow2(16),
       "use fewer heads; trained models use 8 to 160"},
      {"model.num_query_groups", pow2(16),
       "use fewer groups; trained models use 1 to 128"},
      {"model.mamba_state_dim", pow2(10),
       "use a smaller state; Mamba-2 models use 64 to 256"},
      {"model.mamba_num_heads", pow2(16),
       "use fewer heads; Mamba-2 models use up to 256"},
      {"model.mamba_head_dim", pow2(12),
       "use narrower heads; Mamba-2 models use 64"},
      {"model.mamba_num_groups", pow2(16),
       "use fewer groups; Mamba-2 models use 1 to 8"},
      {"model.mamba_conv_width", pow2(6),
       "use a narrower convolution; Mamba models use 4"},
      {"model.linear_num_key_heads", pow2(16),
       "use fewer key heads; Qwen3-Next uses 16"},
      {"model.linear_num_value_heads", pow2(16),
       "use fewer value heads; Qwen3-Next uses 32"},
      {"model.linear_key_head_dim", pow2(12),
       "use narrower key heads; Qwen3-Next uses 128"},
      {"model.linear_value_head_dim", pow2(12),
       "use narrower value heads; Qwen3-Next uses 128"},
      {"model.linear_conv_kernel_dim", pow2(6),
       "use a narrower convolution; Qwen3-Next uses 4"},
      {"model.num_experts", pow2(12),
       "use fewer experts; trained MoE models have at most a few hundred"},
      {"model.moe_router_topk", pow2(12),
       "route each token to fewer experts; trained MoE models use 1 to 8"},
      {"model.moe_ffn_hidden_size", pow2(18),
       "use narrower experts; trained ones are a few thousand channels wide"},
      {"model.q_lora_rank", pow2(16),
       "use a smaller query latent; DeepSeek-V3 uses 1536"},
      {"model.kv_lora_rank", pow2(16),
       "use a smaller key-value latent; DeepSeek-V3 uses 512"},
      {"model.qk_head_dim", pow2(12),
       "use narrower heads; DeepSeek-V3 uses 128"},
      {"model.qk_pos_emb_head_dim", pow2(12),
       "use a narrower rotary part; DeepSeek-V3 uses 64"},
      {"model.v_head_dim", pow2(12),
       "use narrower value heads; DeepSeek-V3 uses 128"},
      {"model.dsa_indexer_n_heads", pow2(12),
       "use fewer indexer heads; DeepSeek-V3.2 uses 64"},
      {"model.dsa_indexer_head_dim", pow2(12),
       "use narrower indexer heads; DeepSeek-V3.2 uses 128"},
      {"model.dsa_indexer_topk", pow2(24),
       "select fewer keys per query; DeepSeek-V3.2 uses 2048"},
      {"model.vocab_size", pow2(24),
       "use a smaller vocabulary; the largest trained ones have about 256000 "
       "tokens"},
      {"parallel.pp", kMaxRanks,
       "use fewer pipeline ranks; hypipe starts one process per rank"},
      {"parallel.vpp", kMaxStages,
       "use fewer virtual stages; each holds at least one layer"},
      {"parallel.dp", kMaxRanks,
       "use fewer data-parallel ranks; hypipe starts one process per rank"},
      {"parallel.tp", kMaxRanks,
       "use fewer tensor-parallel ranks; hypipe starts one process per rank"},
      {"parallel.ep", kMaxRanks,
       "use fewer expert-parallel ranks; hypipe starts one process per rank"},
      {"parallel.etp", kMaxRanks,
       "use fewer expert tensor-parallel ranks; hypipe starts one process per "
       "rank"},
      {"parallel.microbatches", pow2(16),
       "use fewer, larger microbatches (training.micro_batch_size)"},
      {"parallel.microbatch_group_size_per_vp_stage", pow2(16),
       "use a group size between pp and microbatches"},
      {"parallel.first_stage_layers", kMaxLayers,
       "count the model's layers, at most 4096"},
      {"parallel.last_stage_layers", kMaxLayers,
       "count the model's layers, at most 4096"},
      {"training.seq_length", pow2(20),
       "use shorter samples; the longest trained contexts are about a million "
       "tokens"},
      {"training.micro_batch_size", pow2(16),
       "use more microbatches (parallel.microbatches) of fewer samples"},
      {"training.steps", pow2(30),
       "use fewer steps; the longest trained runs take a few million"},
      {"training.warmup_steps", pow2(30), "use at most training.steps"},
      {"training.lr_decay_steps", pow2(30), "use at most training.steps"},
      {"data.max_tokens_per_microbatch", pow2(20),
       "use shorter samples; the longest trained contexts are about a million "
       "tokens"},
      {"data.global_batch_size", pow2(20),
       "use fewer samples a step; trained models take at most tens of "
       "thousands"},
      {"data.min_bin_count", pow2(20), "use at most data.global_batch_size"},
      {"data.bin_count_multiple", pow2(20),
       "use at most data.global_batch_size"},
  };
  return bounds;
}

const SizeBound &sizeBound(std::string_view field) {
  const std::vector<SizeBound> &bounds = sizeBounds();
  auto it = std::find_if(bounds.begin(), bounds.end(),
                         [&](const SizeBound &b) { return b.field == field; });
  if (it == bounds.end())
    std::abort(); // a caller names a field the table lacks: a bug here
  return *it;
}

namespace {

/// "65536 (2^16)", or the bare number for one that is not a power of two.
std::string limitText(int64_t max) {
  int power = 0;
  while (power < 62 && pow2(power) < max)
    ++power;
  return pow2(power) == max ? fmt::format("{} (2^{})", max, power)
                            : std::to_string(max);
}

} // namespace

std::string tooLarge(std::string_view name, int64_t value, int64_t max) {
  return fmt::format("{} is {}, more than the {} hypipe accepts", name, value,
                     limitText(max));
}

namespace {

/// `names` (e.g. "pp x dp") = `values` = their product, if over `max`.
std::optional<SizeProblem> product(std::string field, std::string_view names,
                                   std::string_view what,
                                   std::initializer_list<int64_t> values,
                                   int64_t max, std::string help) {
  if (std::any_of(values.begin(), values.end(),
                  [](int64_t v) { return v < 1; }))
    return std::nullopt;
  std::optional<int64_t> total = checkedProduct(values);
  if (total && *total <= max)
    return std::nullopt;
  return SizeProblem{
      std::move(field),
      fmt::format("{} = {} = {} {}, more than the {} hypipe accepts", names,
                  fmt::join(values, " x "),
                  total ? std::to_string(*total) : "more than 2^63", what,
                  limitText(max)),
      std::move(help)};
}

std::optional<SizeProblem> checkFields(const RunSizes &s) {
  const std::pair<std::string_view, int64_t> fields[] = {
      {"model.num_layers", s.numLayers},
      {"parallel.pp", s.pp},
      {"parallel.vpp", s.vpp},
      {"parallel.dp", s.dp},
      {"parallel.tp", s.tp},
      {"parallel.ep", s.ep},
      {"parallel.etp", s.etp},
      {"parallel.microbatches", s.microbatches},
      {"parallel.microbatch_group_size_per_vp_stage", s.groupSize},
      {"parallel.first_stage_layers", s.firstStageLayers},
      {"parallel.last_stage_layers", s.lastStageLayers},
      {"training.seq_length", s.seqLength},
      {"training.micro_batch_size", s.microBatchSize},
      {"training.steps", s.steps},
      {"training.warmup_steps", s.warmupSteps},
      {"training.lr_decay_steps", s.lrDecaySteps},
      {"data.max_tokens_per_microbatch", s.maxTokensPerMicrobatch},
      {"data.global_batch_size", s.globalBatchSize},
      {"data.min_bin_count", s.minBinCount},
      {"data.bin_count_multiple", s.binCountMultiple}};
  for (auto [field, value] : fields) {
    const SizeBound &bound = sizeBound(field);
    if (value > bound.max)
      return SizeProblem{std::string(field), tooLarge(field, value, bound.max),
                         std::string(bound.help)};
  }
  return std::nullopt;
}

std::optional<SizeProblem> checkStepTokens(const RunSizes &s) {
  const int64_t microbatches = s.microbatches > 0 ? s.microbatches : s.pp;
  if (!s.packing)
    return product(
        "parallel.microbatches",
        "dp x microbatches x micro_batch_size x seq_length", "tokens a step",
        {s.dp, microbatches, s.microBatchSize, s.seqLength}, kMaxStepTokens,
        "use fewer microbatches, smaller ones or fewer "
        "data-parallel ranks; trained models take at most about "
        "64 million tokens a step");
  const int64_t budget =
      s.maxTokensPerMicrobatch > 0 ? s.maxTokensPerMicrobatch : s.seqLength;
  // Each factor is within its bound here (checkFields), so the default
  // batch cannot overflow; 0 (skipped) when one is not positive.
  const int64_t samples = s.globalBatchSize > 0 ? s.globalBatchSize
                          : std::min({s.dp, microbatches, s.microBatchSize}) < 1
                              ? 0
                              : s.dp * microbatches * s.microBatchSize;
  return product("data.global_batch_size",
                 "global_batch_size x max_tokens_per_microbatch",
                 "tokens a step (at most)", {samples, budget}, kMaxStepTokens,
                 "lower data.global_batch_size or max_tokens_per_microbatch; "
                 "trained models take at most about 64 million tokens a step");
}

} // namespace

std::optional<SizeProblem> checkRunSizes(const RunSizes &s) {
  if (auto problem = checkFields(s))
    return problem;
  if (auto problem = product(
          s.vpp > 1 ? "parallel.vpp" : "parallel.pp", "pp x vpp", "stages",
          {s.pp, std::max<int64_t>(s.vpp, 1)}, kMaxStages,
          "use fewer stages; each holds at least one layer, and a model at "
          "most 4096"))
    return problem;
  if (auto problem = product(
          s.dp >= s.pp ? "parallel.dp" : "parallel.pp", "pp x dp", "ranks",
          {s.pp, s.dp}, kMaxRanks,
          "use fewer ranks (pp or dp); hypipe starts one process per rank"))
    return problem;
  if (auto problem = product(
          "parallel.tp", "tp x pp x dp", "ranks", {s.tp, s.pp, s.dp}, kMaxRanks,
          "use fewer ranks (tp, pp or dp); hypipe starts one process per "
          "rank"))
    return problem;
  if (auto problem =
          product("training.micro_batch_size", "seq_length x micro_batch_size",
                  "tokens a microbatch", {s.seqLength, s.microBatchSize},
                  kMaxMicrobatchTokens,
                  "use more microbatches (parallel.microbatches) of fewer "
                  "samples; every activation holds a row per token"))
    return problem;
  return checkStepTokens(s);
}

} // namespace hypipe
