//===- ArtifactSchemaTest.cpp - manifest writer and reader agree ----------===//
//
// The manifest's one schema is written by rt::manifestToJson and read by
// rt::artifactFromJson: every field written must come back, and a missing
// field is refused with its name.
//
//===----------------------------------------------------------------------===//
#include "core/schedule/Schedule.h"
#include "runtime/formats/Artifact.h"

#include <gtest/gtest.h>

namespace hypipe::rt {
namespace {

Artifact sample() {
  Artifact a;
  a.target = Target::Cpu;
  a.model.name = "m";
  a.model.pattern = "M*|-E";
  a.model.numLayers = 4;
  a.model.hidden = 16;
  a.model.vocab = 256;
  a.model.tieEmbeddings = false;
  a.model.positionEmbedding = "rope";
  a.model.moeAuxLossCoeff = 0.01;
  a.model.ffnHidden = 64;
  a.model.numHeads = 4;
  a.model.numQueryGroups = 2;
  a.model.kvChannels = 4;
  a.model.mambaNumHeads = 4;
  a.model.mambaHeadDim = 8;
  a.model.mambaState = 16;
  a.model.mambaNumGroups = 1;
  a.model.mambaConvWidth = 4;
  a.model.numExperts = 4;
  a.model.moeTopK = 2;
  a.model.moeFfnHidden = 32;
  a.model.activation = "swiglu";
  a.pp = 2;
  a.vpp = 1;
  a.dp = 3;
  a.schedule = schedule::ScheduleKind::ZbH1;
  a.microbatches = 4;
  a.groupSize = 2;
  a.packing = {true,  512,
               64,    6,
               6,     "first-fit-decreasing",
               true,  "{\"mode\": \"file\", \"path\": \"l.csv\"}",
               1.5e6, 40.25};
  a.training = {256, 2, 10, 7, 1e-3, 1e-4, 0.1, 1.0, 2, 8, 0.8, 0.95, 1e-6};
  a.dataPath = "/data/x.bin";
  a.dataFormat = DataFormat::Indexed;
  a.specFile = "/specs/m.yaml";
  a.specText = "model: {}\n";
  for (int64_t s = 0; s < 2; ++s) {
    StageEntry e;
    e.index = s;
    e.ppRank = s;
    e.hasEmbedding = s == 0;
    e.hasHead = s == 1;
    e.batch = 2;
    e.seq = 256;
    e.hidden = 16;
    e.numParams = 100;
    e.savedFloats = 50 + s;
    e.workspaceFloats = 30;
    // artifactFromJson reads what is written, checked or not (the checks
    // are checkArtifactConsistency's and StageProgramTest's).
    e.program.layers.push_back({LayerKind::Moe,
                                1 + 2 * s,
                                MoeShape{16, 8, 4, 2, Activation::Swiglu, 0.01},
                                {0, 240, DType::F32},
                                {4, 160, DType::F32}});
    e.program.layers.push_back({LayerKind::MtpInput,
                                2 + 2 * s,
                                MtpInputShape{32, 16, 1, true},
                                {240, 16, DType::F32},
                                {0, 4, DType::F32}});
    e.program.act0 = {0, 64, DType::F32};
    e.program.act1 = {64, 64, DType::F32};
    e.program.scratch = {128, 8, DType::F32};
    e.program.sharedOutput = {16, 32, DType::F32};
    e.program.sharedTable = {48, 32, DType::F32};
    e.program.forward = {{0, Slot::Input, Slot::Act0},
                         {-1, Slot::Act0, Slot::Output}};
    e.program.backwardInput = {{1, Slot::GradOutput, Slot::GradInput}};
    e.program.backwardWeight = {{1, Slot::None, Slot::None},
                                {0, Slot::None, Slot::None}};
    e.params.push_back({"decoder.layers.0.mixer.in_proj.layer_norm_weight",
                        {16},
                        4,
                        16,
                        "ones",
                        0,
                        0,
                        false});
    e.params.push_back({"w", {4, 6}, 20, 24, "normal", 0, 0.02, true});
    a.stages.push_back(e);
  }
  a.numStages = 2;
  auto built = schedule::buildSchedule({schedule::ScheduleKind::ZbH1, 2, 1, 4});
  EXPECT_TRUE(static_cast<bool>(built));
  schedule::insertCommunication(*built);
  a.programs = built->ranks;
  auto six = schedule::buildSchedule({schedule::ScheduleKind::ZbH1, 2, 1, 6});
  EXPECT_TRUE(static_cast<bool>(six));
  schedule::insertCommunication(*six);
  a.packedPrograms[6] = six->ranks;
  a.forwardPrograms = schedule::forwardOnlySchedule(*built).ranks;
  a.split = "969,30,1";
  return a;
}

TEST(ArtifactSchema, EveryFieldWrittenIsRead) {
  Artifact a = sample();
  Artifact b = artifactFromJson(manifestToJson(a), "<test>");
  EXPECT_EQ(b.target, a.target);
  EXPECT_EQ(manifestToJson(b), manifestToJson(a));
  EXPECT_EQ(b.model.moeFfnHidden, 32);
  EXPECT_EQ(b.training.beta2, 0.95);
  EXPECT_EQ(b.training.eps, 1e-6);
  EXPECT_EQ(b.specText, a.specText);
  EXPECT_EQ(b.groupSize, 2);
  EXPECT_TRUE(b.packing.enabled);
  EXPECT_EQ(b.packing.scheduler, "first-fit-decreasing");
  EXPECT_EQ(b.packing.mock, a.packing.mock);
  EXPECT_EQ(b.packing.costPerSquaredToken, 40.25);
  ASSERT_EQ(b.stages.size(), 2u);
  const StageProgram &pa = a.stages[1].program, &pb = b.stages[1].program;
  ASSERT_EQ(pb.layers.size(), 2u);
  EXPECT_EQ(pb.layers[0].kind, LayerKind::Moe);
  EXPECT_EQ(pb.layers[0].params, pa.layers[0].params);
  EXPECT_EQ(pb.layers[0].saved, pa.layers[0].saved);
  EXPECT_EQ(std::get<MoeShape>(pb.layers[0].shape).act, Activation::Swiglu);
  EXPECT_EQ(std::get<MoeShape>(pb.layers[0].shape).auxLossCoeff, 0.01);
  EXPECT_TRUE(std::get<MtpInputShape>(pb.layers[1].shape).ownsTable);
  EXPECT_EQ(pb.act1, pa.act1);
  EXPECT_EQ(pb.scratch, pa.scratch);
  EXPECT_EQ(pb.sharedTable, pa.sharedTable);
  EXPECT_EQ(pb.forward, pa.forward);
  EXPECT_EQ(pb.backwardInput, pa.backwardInput);
  EXPECT_EQ(pb.backwardWeight, pa.backwardWeight);
  EXPECT_EQ(pb.target, Target::Cpu);
  EXPECT_EQ(b.stages[1].params[1].numel, 24);
  ASSERT_EQ(b.programs.size(), 2u);
  EXPECT_EQ(b.programs, a.programs);
  bool batched = false;
  for (size_t i = 0; i < a.programs[0].size(); ++i) {
    EXPECT_EQ(b.programs[0][i].batched, a.programs[0][i].batched);
    batched = batched || a.programs[0][i].batched;
  }
  EXPECT_TRUE(batched) << "the sample should exercise batched transfers";
  EXPECT_EQ(b.packedPrograms, a.packedPrograms);
  EXPECT_EQ(rankProgram(b, 1, 6), a.packedPrograms.at(6)[1]);
  EXPECT_EQ(b.forwardPrograms, a.forwardPrograms);
  EXPECT_EQ(rankForwardProgram(b, 1), a.forwardPrograms[1]);
  EXPECT_EQ(b.split, "969,30,1");
}

// A packed step of a count the compiler wrote no program for is an error
// that says to recompile, never a program built at run time.
TEST(ArtifactSchema, MissingMicrobatchCountIsNamed) {
  Artifact a = artifactFromJson(manifestToJson(sample()), "<test>");
  try {
    rankProgram(a, 0, 8);
    FAIL() << "a program for 8 microbatches was found";
  } catch (const RuntimeError &e) {
    EXPECT_NE(std::string(e.what()).find("holds zb-h1 programs for 4, 6 only"),
              std::string::npos)
        << e.what();
  }
}

/// Expects the manifest `m` refused with an error that says `why`.
void expectRefused(const nlohmann::json &m, const std::string &why) {
  try {
    artifactFromJson(m, "<test>");
    ADD_FAILURE() << "a manifest was accepted that should fail with: " << why;
  } catch (const RuntimeError &e) {
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

// Megatron's learning-rate and AdamW settings travel through the manifest
// as written; an unknown style is refused, one missing is the cosine of
// manifests written before the styles.
TEST(ArtifactSchema, OptimizerSettingsRoundTrip) {
  Artifact a = sample();
  a.training.lrDecayStyle = LrDecayStyle::Wsd;
  a.training.lrWsdDecaySteps = 2;
  a.training.lrWsdDecayStyle = WsdDecayStyle::MinusSqrt;
  a.training.lrWarmupFraction = 0.25;
  a.training.beta1 = 0.8;
  a.training.beta2 = 0.95;
  a.training.eps = 1e-6;
  a.training.tensorboardDir = "/tmp/tb";
  const Artifact b = artifactFromJson(manifestToJson(a), "<test>");
  EXPECT_EQ(optimizerJson(b.training), optimizerJson(a.training));
  EXPECT_EQ(b.training.tensorboardDir, "/tmp/tb");
  EXPECT_EQ(b.training.lrSchedule(6).warmupSamples,
            0.25 * double(6 * a.training.decayEnd()));

  nlohmann::json m = manifestToJson(a);
  m["training"]["lr_decay_style"] = "wsd";
  expectRefused(m, "unknown lr_decay_style 'wsd'");
  m["training"].erase("lr_decay_style");
  m["training"]["adam_eps"] = 0;
  EXPECT_THROW(artifactFromJson(m, "<test>"), RuntimeError);
  m["training"]["adam_eps"] = 1e-8;
  EXPECT_EQ(artifactFromJson(m, "<test>").training.lrDecayStyle,
            LrDecayStyle::Cosine);
}

TEST(ArtifactSchema, MissingFieldIsNamed) {
  nlohmann::json m = manifestToJson(sample());
  m["training"].erase("adam_beta2");
  expectRefused(m, "missing field 'adam_beta2'");
}

} // namespace
} // namespace hypipe::rt
