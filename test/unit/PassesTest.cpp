//===- PassesTest.cpp - the partition passes on Megatron's own patterns ---===//
//
// For every accepted hybrid pattern of the conformance vectors that has its
// own '|', building the model, dropping the placement and running
// hybrid-auto-partition must give back Megatron's placement unchanged; and
// the pipeline of passes must produce stages that verify.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "conversion/SpecToHybrid.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace hypipe {
namespace {

std::string specFor(const std::string &pattern, int64_t pp, int64_t vpp) {
  return fmt::format(
      "model:\n  pattern: \"{}\"\n  hidden_size: 16\n  num_attention_heads: 2\n"
      "  num_query_groups: 1\n  mamba_num_heads: 2\n  mamba_head_dim: 8\n"
      "  num_experts: 2\n  moe_router_topk: 1\nparallel:\n  pp: {}\n"
      "  schedule: {}\ntraining:\n  seq_length: 4\n",
      pattern, pp, vpp > 1 ? "interleaved-1f1b" : "1f1b");
}

TEST(Passes, AutoPartitionKeepsMegatronsOwnSegments) {
  std::ifstream in(HYPIPE_CONFORMANCE_DIR "/layout_vectors.json");
  auto vectors = nlohmann::json::parse(in);
  int checked = 0;
  for (const auto &v : vectors) {
    if (v["kind"] != "hybrid" || v.contains("error"))
      continue;
    std::string input = v["input"];
    auto pattern = parseHybridPattern(input);
    ASSERT_TRUE(static_cast<bool>(pattern));
    if (!pattern->hasPipes() || pattern->numLayers() == 0 ||
        input.find_first_of("GD+") != std::string::npos)
      continue;
    int64_t pp = v["pp"];
    SCOPED_TRACE(input);
    auto spec = parseSpec(specFor(input, pp, pattern->numSegments() / pp),
                          "vector.yaml");
    ASSERT_TRUE(static_cast<bool>(spec)) << toString(spec.takeError());

    mlir::MLIRContext context;
    context.loadDialect<pipe::PipeDialect>();
    auto module = buildModel(context, *spec);
    auto model = *module->getOps<hybrid::ModelOp>().begin();
    llvm::SmallVector<mlir::Operation *> layers = model.getMainLayers();
    std::vector<mlir::Attribute> megatron;
    for (mlir::Operation *layer : layers) {
      megatron.push_back(layer->getAttr("placement"));
      layer->removeAttr("placement");
    }
    ASSERT_TRUE(
        succeeded(autoPartitionModel(model, "time", std::nullopt, false)));
    for (size_t i = 0; i < layers.size(); ++i)
      EXPECT_EQ(layers[i]->getAttr("placement"), megatron[i])
          << "layer " << i + 1;
    ASSERT_TRUE(succeeded(outlineStages(model)));
    ASSERT_TRUE(succeeded(insertP2P(model)));
    EXPECT_TRUE(succeeded(mlir::verify(*module)));
    ++checked;
  }
  EXPECT_GE(checked, 8);
}

} // namespace
} // namespace hypipe
