//===- ConformanceTest.cpp - Megatron-LM's own layout vectors -------------===//
//
// Every entry of test/conformance/layout_vectors.json (produced by running
// Megatron-LM) goes through hypipe's parsers: the same inputs are accepted and
// rejected, and accepted ones place every layer where Megatron does.
//
//===----------------------------------------------------------------------===//
#include "core/lang/HybridPattern.h"
#include "core/lang/PipelineLayout.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <regex>

using nlohmann::json;

namespace hypipe {
namespace {

json loadVectors() {
  std::ifstream in(HYPIPE_CONFORMANCE_DIR "/layout_vectors.json");
  EXPECT_TRUE(in.good()) << "cannot open the conformance vectors";
  return json::parse(in);
}

std::vector<json> vectorsOfKind(const std::string &kind) {
  std::vector<json> out;
  for (const json &v : loadVectors())
    if (v["kind"] == kind)
      out.push_back(v);
  return out;
}

std::optional<int64_t> optionalInt(const json &v, const char *key) {
  if (!v.contains(key) || v[key].is_null())
    return std::nullopt;
  return v[key].get<int64_t>();
}

TEST(Conformance, VectorFileHasEveryKind) {
  EXPECT_EQ(vectorsOfKind("layout").size(), 28u);
  EXPECT_EQ(vectorsOfKind("hybrid").size(), 31u);
  EXPECT_EQ(vectorsOfKind("hybrid_ratio").size(), 9u);
}

TEST(Conformance, PipelineLayouts) {
  for (const json &v : vectorsOfKind("layout")) {
    std::string input = v["input"];
    SCOPED_TRACE("layout '" + input +
                 "' pp=" + std::to_string(v["pp"].get<int>()));
    bool expectError = v.contains("error");
    auto layout = parsePipelineLayout(input, v["pp"].get<int64_t>());
    if (v["error_stage"] == "parse") {
      EXPECT_FALSE(static_cast<bool>(layout));
      EXPECT_FALSE(layout.problem().message.empty());
      continue;
    }
    ASSERT_TRUE(static_cast<bool>(layout)) << toString(layout.takeError());
    const json &expected = v["expected"];
    EXPECT_EQ(layout->expanded, expected["expanded"].get<std::string>());
    EXPECT_EQ(static_cast<int64_t>(layout->stages.size()),
              expected["num_stages"].get<int64_t>());
    EXPECT_EQ(layout->vpp, expected["vpp_size"].get<int64_t>());
    ASSERT_EQ(layout->stages.size(), expected["stages"].size());
    for (size_t i = 0; i < layout->stages.size(); ++i) {
      const LayoutStage &got = layout->stages[i];
      const json &want = expected["stages"][i];
      EXPECT_EQ(got.index, want["stage_index"].get<int64_t>());
      EXPECT_EQ(got.ppRank, want["pp_rank"].get<int64_t>());
      EXPECT_EQ(got.vpStage, want["vp_stage"].get<int64_t>());
      EXPECT_EQ(got.layers, want["layers"].get<std::string>());
      EXPECT_EQ(got.decoderLayerIds,
                want["decoder_layer_ids"].get<std::vector<int64_t>>());
      EXPECT_EQ(got.mtpLayerIds,
                want["mtp_layer_ids"].get<std::vector<int64_t>>());
    }
    if (!expected.contains("validate"))
      continue; // parse-only vector
    auto valid = validatePipelineLayout(*layout, v["num_layers"].get<int64_t>(),
                                        optionalInt(v, "mtp_num_layers"));
    if (expectError) {
      EXPECT_FALSE(static_cast<bool>(valid))
          << "Megatron rejects it: " << v["error"];
      EXPECT_FALSE(valid.problem().message.empty());
      continue;
    }
    ASSERT_TRUE(static_cast<bool>(valid)) << toString(valid.takeError());
    EXPECT_TRUE(expected["validate"]["ok"].get<bool>());
    EXPECT_EQ(valid->mtpStandalone,
              expected["validate"]["mtp_standalone"].get<bool>());
  }
}

/// The (pp_rank, vp_stage) Megatron asked for in an out-of-range lookup.
std::pair<int64_t, int64_t> requestedSegment(const std::string &error) {
  std::smatch m;
  std::regex re(R"(pp_rank=(\d+), vp_stage=(\d+))");
  EXPECT_TRUE(std::regex_search(error, m, re)) << error;
  return {std::stoll(m[1]), std::stoll(m[2])};
}

TEST(Conformance, HybridPatterns) {
  for (const json &v : vectorsOfKind("hybrid")) {
    std::string input = v["input"];
    SCOPED_TRACE("pattern '" + input +
                 "' pp=" + std::to_string(v["pp"].get<int>()));
    auto pattern = parseHybridPattern(input);
    if (v.value("error_stage", "") == "parse_hybrid_pattern") {
      EXPECT_FALSE(static_cast<bool>(pattern))
          << "Megatron rejects it: " << v["error"];
      EXPECT_FALSE(pattern.problem().message.empty());
      continue;
    }
    ASSERT_TRUE(static_cast<bool>(pattern)) << toString(pattern.takeError());
    const json &expected = v["expected"];

    // Parsing: main/MTP split, counts.
    std::string main =
        expected["main_pattern"].is_null() ? "" : expected["main_pattern"];
    EXPECT_EQ(pattern->main, main);
    if (expected["mtp_pattern"].is_null())
      EXPECT_FALSE(pattern->hasMtp());
    else
      EXPECT_EQ(pattern->mtp, expected["mtp_pattern"].get<std::string>());
    EXPECT_EQ(pattern->mtpDepths, expected["mtp_num_depths"].get<int>());
    EXPECT_EQ(pattern->numLayers(), expected["num_layers"].get<int64_t>());
    EXPECT_EQ(pattern->numSegments(), expected["num_segments"].get<int64_t>());
    for (auto [symbol, count] : pattern->layerCounts())
      EXPECT_EQ(count,
                expected["layer_counts"][std::string(1, symbol)].get<int64_t>())
          << "count of '" << symbol << "'";

    // Placement.
    PlacementOptions options;
    options.pp = v["pp"];
    options.vpp = optionalInt(v, "vpp");
    options.firstStageLayers =
        optionalInt(v, "num_layers_in_first_pipeline_stage");
    options.lastStageLayers =
        optionalInt(v, "num_layers_in_last_pipeline_stage");
    std::string error = v.value("error", "");
    // Megatron's test asks for vp_stage 0 on a pattern without '|': that is
    // virtual pipelining requested, which hypipe spells vpp > 1.
    if (error.find("Virtual pipeline parallelism") != std::string::npos)
      options.vpp = 2;
    auto placement = placeHybridPattern(*pattern, options);
    if (!error.empty() && error.find("out of range") == std::string::npos) {
      EXPECT_FALSE(static_cast<bool>(placement))
          << "Megatron rejects it: " << error;
      EXPECT_FALSE(placement.problem().message.empty());
      continue;
    }
    ASSERT_TRUE(static_cast<bool>(placement))
        << toString(placement.takeError());
    if (!error.empty()) {
      // Megatron's test looks up a segment the pattern does not have.
      auto [ppRank, vpStage] = requestedSegment(error);
      auto stage = placement->stage(ppRank, vpStage);
      EXPECT_FALSE(static_cast<bool>(stage));
      EXPECT_FALSE(stage.problem().message.empty());
      continue;
    }
    ASSERT_EQ(placement->stages.size(), expected["stages"].size());
    for (const json &want : expected["stages"]) {
      int64_t vpStage =
          want["vp_stage"].is_null() ? 0 : want["vp_stage"].get<int64_t>();
      auto got = placement->stage(want["pp_rank"].get<int64_t>(), vpStage);
      ASSERT_TRUE(static_cast<bool>(got)) << toString(got.takeError());
      EXPECT_EQ(got->layers, want["layers"].get<std::string>());
      EXPECT_EQ(got->layerOffset, want["layer_offset"].get<int64_t>());
      EXPECT_EQ(got->layerNumbers,
                want["layer_numbers"].get<std::vector<int64_t>>());
      EXPECT_EQ(placement->virtualStages, !want["vp_stage"].is_null());
    }
    if (expected.contains("mtp_on")) {
      ASSERT_TRUE(placement->mtpOn.has_value());
      const json &on = expected["mtp_on"];
      EXPECT_EQ(placement->mtpOn->first, on["pp_rank"].get<int64_t>());
      EXPECT_EQ(placement->mtpOn->second,
                on["vp_stage"].is_null() ? 0 : on["vp_stage"].get<int64_t>());
    } else {
      EXPECT_FALSE(placement->mtpOn.has_value());
    }
  }
}

TEST(Conformance, RatioAllocation) {
  for (const json &v : vectorsOfKind("hybrid_ratio")) {
    auto pattern = patternFromRatios(v["num_layers"], v["attention_ratio"],
                                     v["mlp_ratio"]);
    ASSERT_TRUE(static_cast<bool>(pattern)) << toString(pattern.takeError());
    EXPECT_EQ(*pattern, v["expected"].get<std::string>())
        << "num_layers=" << v["num_layers"]
        << " attention_ratio=" << v["attention_ratio"]
        << " mlp_ratio=" << v["mlp_ratio"];
  }
}

} // namespace
} // namespace hypipe
