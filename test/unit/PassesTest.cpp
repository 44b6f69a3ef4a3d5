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
#include "dialects/hybrid/HybridEnums.h"
#include "passes/lowering/KernelPlan.h"
#include "targets/StageProgram.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
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

// The hybrid dialect's schedule enum and the schedule library's ScheduleKind
// name the same schedules, in the same order, the same way: HybridEnums.h
// converts between them by value.
TEST(HybridEnums, ScheduleMatchesTheScheduleLibrary) {
  for (schedule::ScheduleKind kind : schedule::scheduleKinds())
    EXPECT_EQ(hybrid::stringifySchedule(hybrid::toSchedule(kind)).str(),
              schedule::scheduleName(kind));
  EXPECT_EQ(size_t(hybrid::getMaxEnumValForSchedule()) + 1,
            schedule::scheduleKinds().size());
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
    ASSERT_TRUE(succeeded(autoPartitionModel(model, PartitionObjective::Time,
                                             std::nullopt, false)));
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

// Tests that the artifact's translation reads a stage's kernel program and
// nothing else: it refuses a stage that pipe-lower-kernels has not lowered
// instead of planning it, gives the planned offsets, follows an edit of the
// IR, and a stage lowered twice holds one program.
TEST(Passes, TranslationReadsTheKernelProgramOnly) {
  auto spec = parseSpec(specFor("M*|-E", 2, 1), "plan.yaml");
  ASSERT_TRUE(static_cast<bool>(spec)) << toString(spec.takeError());
  mlir::MLIRContext context;
  context.loadDialect<pipe::PipeDialect>();
  auto module = buildModel(context, *spec);
  auto model = *module->getOps<hybrid::ModelOp>().begin();
  ASSERT_TRUE(succeeded(outlineStages(model)));
  auto stage = *model.getBody().front().getOps<pipe::StageOp>().begin();

  std::string diagnostics;
  mlir::ScopedDiagnosticHandler capture(&context, [&](mlir::Diagnostic &d) {
    diagnostics += d.str() + "\n";
    return mlir::success();
  });
  EXPECT_TRUE(failed(translateStage(stage, rt::Target::Cpu)));
  EXPECT_NE(diagnostics.find("run pipe-lower-kernels first"), std::string::npos)
      << diagnostics;

  ASSERT_TRUE(succeeded(lowerKernels(model)));
  ASSERT_TRUE(succeeded(lowerKernels(model)));
  auto programs = stage.getBody().front().getOps<pipe::KernelProgramOp>();
  ASSERT_EQ(std::distance(programs.begin(), programs.end()), 1);
  auto planned = cpu::planStage(stage);
  auto read = translateStage(stage, rt::Target::Cpu);
  ASSERT_TRUE(succeeded(planned) && succeeded(read));
  EXPECT_EQ(read->program.paramBytes, planned->paramBytes);
  EXPECT_EQ(read->program.savedBytes, planned->savedBytes);
  EXPECT_EQ(read->program.workspaceBytes, planned->workspaceBytes);
  ASSERT_EQ(read->program.layers.size(), planned->layers.size());
  for (size_t i = 0; i < planned->layers.size(); ++i) {
    EXPECT_EQ(read->program.layers[i].params.offset,
              planned->layers[i].paramOffset);
    EXPECT_EQ(read->program.layers[i].saved.offset,
              planned->layers[i].savedOffset);
  }

  // The program says where the first layer's saved tensors sit; the
  // translation takes the IR's word for it.
  auto layer = *(*programs.begin())
                    .getBody()
                    .front()
                    .getOps<pipe::KernelLayerOp>()
                    .begin();
  pipe::RangeAttr saved = layer.getSaved();
  layer.setSavedAttr(pipe::RangeAttr::get(&context, saved.getOffset() + 4,
                                          saved.getBytes(), saved.getDtype()));
  read = translateStage(stage, rt::Target::Cpu);
  ASSERT_TRUE(succeeded(read));
  EXPECT_EQ(read->program.layers[0].saved.offset, saved.getOffset() + 4);
}

} // namespace
} // namespace hypipe
