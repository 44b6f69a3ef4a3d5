//===- ParameterNamesTest.cpp - names equal Megatron-LM's hybrid names ---===//
//
// Every parameter name of every layer kind against Megatron-LM's
// HybridModel.state_dict() for its hybrid layer specs (written out here
// from Megatron's module tree, not from hypipe's code), the map back to the
// names hypipe used before, and the initial values that map keeps.
//
//===----------------------------------------------------------------------===//

#include "core/model/ParameterNames.h"
#include "core/model/LayerShapes.h"
#include "runtime/exec/Init.h"
#include "runtime/formats/Artifact.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace hypipe;
using namespace hypipe::rt;

namespace {

std::vector<std::string> names(const std::vector<ParamSpec> &params) {
  std::vector<std::string> out;
  for (const ParamSpec &p : params)
    out.push_back(p.name);
  return out;
}

} // namespace

TEST(ParameterNames, EveryLayerKindIsMegatronsHybridName) {
  // MambaLayer: norm fused into in_proj (TELayerNormColumnParallelLinear),
  // MambaMixer's conv1d as plain parameters.
  EXPECT_EQ(names(MambaShape{64, 4, 32, 16, 1, 4}.params(8)),
            (std::vector<std::string>{
                "mixer.in_proj.layer_norm_weight", "mixer.in_proj.weight",
                "mixer.conv1d_weight", "mixer.conv1d_bias", "mixer.dt_bias",
                "mixer.A_log", "mixer.D", "mixer.norm.weight",
                "mixer.out_proj.weight"}));
  // TransformerLayer with self-attention, the norm fused into linear_qkv.
  EXPECT_EQ(
      names(AttentionShape{64, 4, 2, 16, false}.params(8)),
      (std::vector<std::string>{"self_attention.linear_qkv.layer_norm_weight",
                                "self_attention.linear_qkv.weight",
                                "self_attention.linear_proj.weight"}));
  // TransformerLayer with a dense MLP, the norm fused into linear_fc1.
  EXPECT_EQ(names(MlpShape{64, 128, Activation::SquaredRelu}.params(8)),
            (std::vector<std::string>{"mlp.linear_fc1.layer_norm_weight",
                                      "mlp.linear_fc1.weight",
                                      "mlp.linear_fc2.weight"}));
  // TransformerLayer with MoE: a separate pre-MLP norm, the router and
  // grouped experts (TEGroupedMLP) named weight<expert>.
  EXPECT_EQ(
      names(MoeShape{64, 128, 2, 1, Activation::SquaredRelu, 0.01}.params(8)),
      (std::vector<std::string>{
          "pre_mlp_layernorm.weight", "mlp.router.weight",
          "mlp.experts.linear_fc1.weight0", "mlp.experts.linear_fc2.weight0",
          "mlp.experts.linear_fc1.weight1", "mlp.experts.linear_fc2.weight1"}));
  // TransformerLayer with MLASelfAttention (get_gpt_layer_with_transformer_
  // engine_spec(multi_latent_attention=True)): a separate input norm; the
  // latent norms fused into the up-projections with qk_layernorm; without
  // q_lora_rank one linear_q_proj.
  EXPECT_EQ(
      names(MlaShape{64, 4, 24, 16, 8, 4, 12, true}.params(8)),
      (std::vector<std::string>{
          "input_layernorm.weight", "self_attention.linear_q_down_proj.weight",
          "self_attention.linear_q_up_proj.layer_norm_weight",
          "self_attention.linear_q_up_proj.weight",
          "self_attention.linear_kv_down_proj.weight",
          "self_attention.linear_kv_up_proj.layer_norm_weight",
          "self_attention.linear_kv_up_proj.weight",
          "self_attention.linear_proj.weight"}));
  EXPECT_EQ(names(MlaShape{64, 4, 0, 16, 8, 4, 12, false}.params(8)),
            (std::vector<std::string>{
                "input_layernorm.weight", "self_attention.linear_q_proj.weight",
                "self_attention.linear_kv_down_proj.weight",
                "self_attention.linear_kv_up_proj.weight",
                "self_attention.linear_proj.weight"}));
  EXPECT_EQ(names(EmbeddingShape{256, 64}.params()),
            (std::vector<std::string>{"embedding.word_embeddings.weight"}));
}

// The shapes Megatron's MLASelfAttention gives its weights (state_dict of
// hidden 64, 4 heads, q_lora 24, kv_lora 16, qk 8, pe 4, v 12).
TEST(ParameterNames, MultiLatentAttentionShapesAreMegatrons) {
  std::vector<std::vector<int64_t>> shapes;
  for (const ParamSpec &p : MlaShape{64, 4, 24, 16, 8, 4, 12, true}.params(8))
    shapes.push_back(p.shape);
  EXPECT_EQ(
      shapes,
      (std::vector<std::vector<int64_t>>{
          {64}, {24, 64}, {24}, {48, 24}, {20, 64}, {16}, {80, 16}, {64, 48}}));
}

// DSAttention (experimental_attention_variant/dsa.py) as MLA's
// core_attention: MLA's weights, then its DSAIndexer's, named and shaped as
// Megatron builds them: linear_wq_b (q_lora_rank -> heads x head_dim; the
// hidden size without q_lora_rank), linear_wk (hidden -> head_dim), the
// LayerNorm k_norm (weight and bias), linear_weights_proj (hidden ->
// heads); all without bias.
TEST(ParameterNames, SparseAttentionIsMlaWithMegatronsIndexer) {
  const MlaShape mla{64, 4, 24, 16, 8, 4, 12, true};
  std::vector<std::string> expected = names(mla.params(8));
  const std::string indexer = "self_attention.core_attention.indexer.";
  for (const char *name :
       {"linear_wq_b.weight", "linear_wk.weight", "k_norm.weight",
        "k_norm.bias", "linear_weights_proj.weight"})
    expected.push_back(indexer + name);
  const DsaShape dsa{mla, 2, 8, 16};
  EXPECT_EQ(names(dsa.params(8)), expected);
  std::vector<std::vector<int64_t>> shapes;
  for (const ParamSpec &p : dsa.params(8))
    shapes.push_back(p.shape);
  EXPECT_EQ(std::vector<std::vector<int64_t>>(shapes.end() - 5, shapes.end()),
            (std::vector<std::vector<int64_t>>{
                {16, 24}, {8, 64}, {8}, {8}, {2, 64}}));
  // Without q_lora_rank linear_wq_b reads the normed input.
  const DsaShape noLatent{{64, 4, 0, 16, 8, 4, 12, false}, 2, 8, 16};
  EXPECT_EQ(noLatent.params(8)[5].shape, (std::vector<int64_t>{16, 64}));
}

// GatedDeltaNet (megatron/core/ssm/gated_delta_net.py) as the hybrid
// model's self_attention: the norm fused into in_proj, an nn.Conv1d without
// bias, dt_bias and A_log per value head, out_norm over one head's width.
TEST(ParameterNames, GatedDeltaNetIsMegatronsName) {
  // hidden 64, nk 2, nv 4, dk 8, dv 16, conv 4.
  std::vector<ParamSpec> params = GdnShape{64, 2, 4, 8, 16, 4}.params(8);
  EXPECT_EQ(
      names(params),
      (std::vector<std::string>{
          "self_attention.in_proj.layer_norm_weight",
          "self_attention.in_proj.weight", "self_attention.conv1d.weight",
          "self_attention.dt_bias", "self_attention.A_log",
          "self_attention.out_norm.weight", "self_attention.out_proj.weight"}));
  // in_proj [2*2*8 + 2*4*16 + 2*4, 64]: rows [q k v z beta alpha].
  EXPECT_EQ(params[1].shape, (std::vector<int64_t>{32 + 128 + 8, 64}));
  EXPECT_EQ(params[1].sections, (std::vector<int64_t>{16, 16, 64, 64, 4, 4}));
  // conv1d [2*2*8 + 4*16, 1, 4] over [q k v].
  EXPECT_EQ(params[2].shape, (std::vector<int64_t>{32 + 64, 1, 4}));
  EXPECT_EQ(params[3].shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(params[3].init, Init::Ones);      // Megatron's dt_bias: ones
  EXPECT_EQ(params[4].init, Init::MambaALog); // log U(1, 16)
  EXPECT_EQ(params[4].a, 1);
  EXPECT_EQ(params[4].b, 16);
  EXPECT_EQ(params[5].shape, (std::vector<int64_t>{16}));
  EXPECT_EQ(params[6].shape, (std::vector<int64_t>{64, 64}));
}

TEST(ParameterNames, LegacyNames) {
  EXPECT_EQ(legacyParameterName("decoder.layers.3.mixer.in_proj.layer_norm_"
                                "weight"),
            "decoder.layers.3.norm.weight");
  EXPECT_EQ(legacyParameterName("decoder.layers.0.mixer.conv1d_weight"),
            "decoder.layers.0.mixer.conv1d.weight");
  EXPECT_EQ(legacyParameterName("decoder.layers.0.mixer.conv1d_bias"),
            "decoder.layers.0.mixer.conv1d.bias");
  EXPECT_EQ(legacyParameterName("decoder.layers.12.mlp.experts.linear_fc1."
                                "weight17"),
            "decoder.layers.12.mlp.experts.local_experts.17.linear_fc1.weight");
  EXPECT_EQ(legacyParameterName("decoder.layers.12.mlp.experts.linear_fc2."
                                "weight0"),
            "decoder.layers.12.mlp.experts.local_experts.0.linear_fc2.weight");
  // Unchanged: names Megatron and hypipe always shared, and look-alikes.
  for (const char *same :
       {"embedding.word_embeddings.weight", "decoder.final_norm.weight",
        "decoder.layers.1.self_attention.linear_qkv.layer_norm_weight",
        "decoder.layers.2.mixer.in_proj.weight",
        "decoder.layers.2.mixer.norm.weight",
        "decoder.layers.4.mlp.experts.linear_fc1.weight",
        "decoder.layers.4.mlp.experts.linear_fc1.weightX",
        "output_layer.weight", "decoder.layers."})
    EXPECT_EQ(legacyParameterName(same), same) << same;
}

TEST(ParameterNames, InitialValuesKeepTheirStream) {
  ParamEntry renamed{"decoder.layers.0.mlp.experts.linear_fc1.weight1",
                     {8, 4},
                     0,
                     32,
                     "normal",
                     0.02,
                     0,
                     true};
  ParamEntry legacy = renamed;
  legacy.name =
      "decoder.layers.0.mlp.experts.local_experts.1.linear_fc1.weight";
  ParamEntry other = renamed;
  other.name = "decoder.layers.0.mlp.experts.linear_fc1.weight2";
  std::vector<float> a(32), b(32), c(32);
  initParameter(renamed, 1234, a.data());
  initParameter(legacy, 1234, b.data());
  initParameter(other, 1234, c.data());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}
