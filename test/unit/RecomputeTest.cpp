//===- RecomputeTest.cpp - full recompute's chunks and the flags ----------===//
#include "core/model/Recompute.h"

#include <gtest/gtest.h>

namespace hypipe {
namespace {

using Chunks = std::vector<std::pair<int64_t, int64_t>>;

RecomputeSpec full(RecomputeMethod method, int64_t numLayers) {
  return fullRecompute(method, numLayers);
}

// uniform: chunks of num_layers layers; 8 layers by 3 leave a last chunk of
// 2 (layers 6 and 7).
TEST(Recompute, UniformCutsChunksAndTheLastMayBeShorter) {
  EXPECT_EQ(recomputeChunks(full(RecomputeMethod::Uniform, 3), 8),
            (Chunks{{0, 3}, {3, 6}, {6, 8}}));
  EXPECT_EQ(recomputeChunks(full(RecomputeMethod::Uniform, 2), 4),
            (Chunks{{0, 2}, {2, 4}}));
  // A chunk larger than the stage is the whole stage.
  EXPECT_EQ(recomputeChunks(full(RecomputeMethod::Uniform, 5), 3),
            (Chunks{{0, 3}}));
}

// block: the first num_layers layers one by one, the rest kept; more than
// the stage has checkpoints all of them (valid in Megatron too).
TEST(Recompute, BlockCheckpointsTheFirstLayersOneByOne) {
  EXPECT_EQ(recomputeChunks(full(RecomputeMethod::Block, 2), 4),
            (Chunks{{0, 1}, {1, 2}}));
  EXPECT_EQ(recomputeChunks(full(RecomputeMethod::Block, 5), 3),
            (Chunks{{0, 1}, {1, 2}, {2, 3}}));
}

// Only full recompute has chunks.
TEST(Recompute, NoneAndSelectiveHaveNoChunks) {
  EXPECT_TRUE(recomputeChunks(RecomputeSpec{}, 4).empty());
  RecomputeSpec selective;
  selective.granularity = RecomputeGranularity::Selective;
  selective.modules = {RecomputeModule::CoreAttn};
  EXPECT_TRUE(recomputeChunks(selective, 4).empty());
}

// Megatron's flags, as `hypipe plan` prints them.
TEST(Recompute, FlagsAreMegatrons) {
  EXPECT_EQ(recomputeFlags(RecomputeSpec{}), "");
  EXPECT_EQ(recomputeFlags(full(RecomputeMethod::Block, 2)),
            "--recompute-granularity full --recompute-method block "
            "--recompute-num-layers 2");
  RecomputeSpec selective;
  selective.granularity = RecomputeGranularity::Selective;
  selective.modules = {RecomputeModule::CoreAttn, RecomputeModule::Mlp};
  EXPECT_EQ(recomputeFlags(selective),
            "--recompute-granularity selective --recompute-modules core_attn "
            "mlp");
}

// Every name parses back to its value.
TEST(Recompute, NamesRoundTrip) {
  for (RecomputeGranularity g : kRecomputeGranularities)
    EXPECT_EQ(parseRecomputeGranularity(recomputeGranularityName(g)), g);
  for (RecomputeMethod m : kRecomputeMethods)
    EXPECT_EQ(parseRecomputeMethod(recomputeMethodName(m)), m);
  for (RecomputeModule m : kRecomputeModules)
    EXPECT_EQ(parseRecomputeModule(recomputeModuleName(m)), m);
  EXPECT_FALSE(parseRecomputeModule("attention"));
}

} // namespace
} // namespace hypipe
