//===- RecordingTargetTest.cpp - what the stage interpreter asks a target -===//
//
// A fake target whose primitives only record their calls runs the real
// stage interpreter (runtime/kernels/StageInterpreter.h) on stage programs
// holding each layer kind, and each kind's forward, input-gradient and
// weight-gradient passes must call exactly the sequence its recipe
// (runtime/kernels/recipes/) writes. The recipes are shared, so this is the
// sequence the CUDA target runs too -- every rounding point included --,
// checked on a machine without a GPU. The expected sequences are written
// from the recipes, not from this test's output.
//
//===----------------------------------------------------------------------===//

#include "runtime/kernels/StageInterpreter.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace hypipe::rt;

namespace {

/// The calls of the pass being run, in order.
std::vector<std::string> calls;

void record(std::string call) { calls.push_back(std::move(call)); }

std::string dims(const char *name, int64_t in, int64_t out) {
  return std::string(name) + " " + std::to_string(in) + ">" +
         std::to_string(out);
}

/// A target's primitive set that computes nothing: each call is recorded
/// (linear layers with their in and out widths, rounding with the
/// precision it rounds to, the cross-entropy with its label shift).
struct RecordingKernels {
  DType activations = DType::F32;

  using Tokens = TokenShape;
  static Tokens tokens(TokenShape capacity, const int32_t *cuSeqlens,
                       const int32_t *, int64_t numSeqs, bool paddedTail,
                       const int64_t *replicaTokens) {
    return packedTokens(capacity, cuSeqlens, numSeqs, paddedTail,
                        replicaTokens);
  }
  static const TokenShape &shape(const TokenShape &t) { return t; }
  static void copy(float *, const float *, int64_t) { record("copy"); }
  static void addInto(float *, const float *, int64_t) { record("addInto"); }
  static void zero(float *, int64_t) { record("zero"); }
  void round(float *, int64_t) const {
    record(activations == DType::BF16 ? "round bf16" : "round fp32");
  }

  static void linearForward(int64_t, int64_t in, int64_t out, const float *,
                            const float *, float *) {
    record(dims("linearForward", in, out));
  }
  static void linearBackwardInput(int64_t, int64_t in, int64_t out,
                                  const float *, const float *, float *,
                                  bool accumulate = false) {
    record(dims(accumulate ? "linearBackwardInput+=" : "linearBackwardInput",
                in, out));
  }
  static void linearBackwardWeight(int64_t, int64_t in, int64_t out,
                                   const float *, const float *, float *) {
    record(dims("linearBackwardWeight", in, out));
  }
  static void rmsnormForward(int64_t, int64_t, const float *, const float *,
                             float *, float *) {
    record("rmsnormForward");
  }
  static void rmsnormBackward(int64_t, int64_t, const float *, const float *,
                              const float *, const float *, float *, float *,
                              bool accumulate) {
    record(accumulate ? "rmsnormBackward+=" : "rmsnormBackward");
  }
  static void activationForward(Activation, int64_t, int64_t, const float *,
                                float *) {
    record("activationForward");
  }
  static void activationBackward(Activation, int64_t, int64_t, const float *,
                                 const float *, float *) {
    record("activationBackward");
  }

#include "runtime/kernels/TargetKernels.inc"
};

void RecordingKernels::rope(const AttentionShape &, const TokenShape &, float *,
                            float sign) {
  record(sign > 0 ? "rope +" : "rope -");
}
void RecordingKernels::coreForward(const AttentionShape &, const TokenShape &,
                                   AttnSaved &) const {
  record("coreForward");
}
void RecordingKernels::coreBackward(const AttentionShape &, const TokenShape &,
                                    AttnSaved &, const float *, float *) const {
  record("coreBackward");
}
void RecordingKernels::convForward(const MambaShape &, const TokenShape &,
                                   const MambaParams<const float> &,
                                   MambaSaved &) {
  record("convForward");
}
void RecordingKernels::scanForward(const MambaShape &, const TokenShape &,
                                   const MambaParams<const float> &,
                                   MambaSaved &, float *) {
  record("scanForward");
}
void RecordingKernels::gatedNormForward(const MambaShape &, const TokenShape &,
                                        const MambaParams<const float> &,
                                        MambaSaved &) {
  record("gatedNormForward");
}
void RecordingKernels::gatedNormBackward(const MambaShape &, const TokenShape &,
                                         const MambaParams<const float> &,
                                         MambaParams<float> &, MambaSaved &,
                                         const float *, float *) {
  record("gatedNormBackward");
}
void RecordingKernels::scanBackward(const MambaShape &, const TokenShape &,
                                    const MambaParams<const float> &,
                                    MambaParams<float> &, MambaSaved &,
                                    const float *, float *, float *, float *) {
  record("scanBackward");
}
void RecordingKernels::convBackward(const MambaShape &, const TokenShape &,
                                    const MambaParams<const float> &,
                                    MambaParams<float> &, MambaSaved &, float *,
                                    const float *) {
  record("convBackward");
}
void RecordingKernels::gdnConvForward(const GdnShape &, const TokenShape &,
                                      const GdnParams<const float> &,
                                      GdnSaved &) {
  record("gdnConvForward");
}
void RecordingKernels::gdnGatesForward(const GdnShape &, const TokenShape &,
                                       const GdnParams<const float> &,
                                       GdnSaved &) {
  record("gdnGatesForward");
}
void RecordingKernels::gdnRuleForward(const GdnShape &, const TokenShape &,
                                      GdnSaved &, float *) {
  record("gdnRuleForward");
}
void RecordingKernels::gdnNormForward(const GdnShape &, const TokenShape &,
                                      const GdnParams<const float> &,
                                      GdnSaved &) {
  record("gdnNormForward");
}
void RecordingKernels::gdnNormBackward(const GdnShape &, const TokenShape &,
                                       const GdnParams<const float> &,
                                       GdnParams<float> &, GdnSaved &,
                                       const float *, float *) {
  record("gdnNormBackward");
}
void RecordingKernels::gdnRuleBackward(const GdnShape &, const TokenShape &,
                                       const GdnSaved &, const float *, float *,
                                       float *, float *, float *, float *) {
  record("gdnRuleBackward");
}
void RecordingKernels::gdnGatesBackward(const GdnShape &, const TokenShape &,
                                        const GdnParams<const float> &,
                                        GdnParams<float> &, GdnSaved &,
                                        const float *, const float *,
                                        const float *, float *) {
  record("gdnGatesBackward");
}
void RecordingKernels::gdnConvBackward(const GdnShape &, const TokenShape &,
                                       const GdnParams<const float> &,
                                       GdnParams<float> &, GdnSaved &,
                                       float *) {
  record("gdnConvBackward");
}
float RecordingKernels::crossEntropy(const TokenShape &, int64_t, int64_t shift,
                                     const int32_t *, const float *, HeadSaved,
                                     float *) {
  record("crossEntropy shift " + std::to_string(shift));
  return 0.0f;
}
void RecordingKernels::embeddingLookup(int64_t, int64_t, const float *,
                                       const int32_t *, float *, int32_t *) {
  record("embeddingLookup");
}
void RecordingKernels::embeddingScatterAdd(int64_t, int64_t, const int32_t *,
                                           const float *, float *) {
  record("embeddingScatterAdd");
}
void RecordingKernels::embeddingLookupShard(int64_t, int64_t, const float *,
                                            const int32_t *, int64_t first,
                                            int64_t, float *, int32_t *) {
  record("embeddingLookupShard from " + std::to_string(first));
}
void RecordingKernels::embeddingScatterAddShard(int64_t, int64_t,
                                                const int32_t *, int64_t first,
                                                int64_t, const float *,
                                                float *) {
  record("embeddingScatterAddShard from " + std::to_string(first));
}
float RecordingKernels::crossEntropyShard(const TokenShape &, int64_t,
                                          int64_t first, int64_t,
                                          const int32_t *, const float *,
                                          HeadSaved, TensorParallelCalls &,
                                          float *) {
  record("crossEntropyShard from " + std::to_string(first));
  return 0.0f;
}
void RecordingKernels::lossTargets(const TokenShape &, int64_t shift,
                                   const int32_t *, const float *, HeadSaved) {
  record("lossTargets shift " + std::to_string(shift));
}
void RecordingKernels::crossEntropyChunk(int64_t row0, int64_t rows, int64_t,
                                         int64_t, HeadSaved, LossChunkStats) {
  record("crossEntropyChunk " + std::to_string(row0) + "+" +
         std::to_string(rows));
}
float RecordingKernels::crossEntropyChunked(int64_t, HeadSaved,
                                            TensorParallelCalls *tp,
                                            LossChunkStats) {
  record(tp ? "crossEntropyChunked over tp" : "crossEntropyChunked");
  return 0.0f;
}
void RecordingKernels::lossCoefficients(int64_t, HeadSaved, float, float *) {
  record("lossCoefficients");
}
void RecordingKernels::crossEntropyBackwardChunk(int64_t row0, int64_t rows,
                                                 int64_t, int64_t, HeadSaved) {
  record("crossEntropyBackwardChunk " + std::to_string(row0) + "+" +
         std::to_string(rows));
}
/// Every routed row to expert 0 (one row: the experts' recipes run once).
void routeToTheFirstExpert(const MoeShape &s, std::vector<int64_t> &off) {
  off.assign(size_t(s.experts + 1), 1);
  off[0] = 0;
}
float RecordingKernels::moeRoute(const MoeShape &s, const TokenShape &,
                                 const float *, MoeSaved &m, int32_t *,
                                 std::vector<int64_t> &off, RouterCheck *,
                                 float *) const {
  record("moeRoute");
  routeToTheFirstExpert(s, off);
  recipes::holdRowsOf(m, off);
  return 0.0f;
}
void RecordingKernels::moeCombine(const MoeShape &, int64_t, const MoeSaved &,
                                  const int32_t *, const float *x,
                                  float *) const {
  record(x ? "moeCombine+x" : "moeCombine");
}
void RecordingKernels::moeOffsets(const MoeShape &s, MoeSaved &m,
                                  std::vector<int64_t> &off) const {
  record("moeOffsets");
  routeToTheFirstExpert(s, off);
  recipes::holdRowsOf(m, off);
}
void RecordingKernels::moeRowMap(const MoeSaved &, int64_t rows,
                                 std::vector<int32_t> &rowMap) const {
  record("moeRowMap");
  rowMap.assign(size_t(rows), 0); // every row token 0's
}
void RecordingKernels::moeCombineBackward(const MoeShape &, int64_t,
                                          const MoeSaved &, const float *,
                                          float *) const {
  record("moeCombineBackward");
}
void RecordingKernels::moeGatherRowGradients(const MoeShape &, int64_t,
                                             const MoeSaved &, const float *,
                                             float *, int32_t *) const {
  record("moeGatherRowGradients");
}
void RecordingKernels::moeRouterBackward(const MoeShape &, int64_t,
                                         const MoeSaved &, const float *, float,
                                         float *) const {
  record("moeRouterBackward");
}
void RecordingKernels::mlaAssemble(const MlaShape &, const TokenShape &,
                                   const float *, const float *, const float *,
                                   float *) {
  record("mlaAssemble");
}
void RecordingKernels::mlaGatherGradients(const MlaShape &, const TokenShape &,
                                          const float *, float *, float *,
                                          float *) {
  record("mlaGatherGradients");
}
void RecordingKernels::mlaRopeBackward(const MlaShape &, const TokenShape &,
                                       float *, int64_t, int64_t heads,
                                       int64_t) {
  record("mlaRopeBackward " + std::to_string(heads));
}
void RecordingKernels::mlaRope(const MlaShape &, const TokenShape &, float *,
                               int64_t, int64_t heads, int64_t) {
  record("mlaRope " + std::to_string(heads));
}
void RecordingKernels::dsaKeyNormForward(int64_t, int64_t, const float *,
                                         const float *, const float *, float *,
                                         float *, float *) {
  record("dsaKeyNormForward");
}
void RecordingKernels::dsaKeyNormBackward(int64_t, int64_t, const float *,
                                          const float *, const float *,
                                          const float *, const float *, float *,
                                          float *, float *) {
  record("dsaKeyNormBackward");
}
void RecordingKernels::dsaIndexScores(const DsaShape &, const TokenShape &,
                                      const float *, const float *,
                                      const float *, float *) {
  record("dsaIndexScores");
}
void RecordingKernels::dsaTopk(const DsaShape &, const TokenShape &,
                               const float *, float *) {
  record("dsaTopk");
}
void RecordingKernels::dsaTargetDifference(const DsaShape &, const TokenShape &,
                                           const AttnSaved &, const float *,
                                           const float *, float *) {
  record("dsaTargetDifference");
}
float RecordingKernels::dsaIndexerLoss(const DsaShape &, const TokenShape &,
                                       int64_t, const float *, const float *,
                                       float *) {
  record("dsaIndexerLoss");
  return 0.0f;
}
void RecordingKernels::dsaCoreForward(const AttentionShape &,
                                      const TokenShape &, AttnSaved &,
                                      const float *) {
  record("dsaCoreForward");
}
void RecordingKernels::dsaCoreBackward(const AttentionShape &,
                                       const TokenShape &, AttnSaved &,
                                       const float *, const float *, float *) {
  record("dsaCoreBackward");
}
void RecordingKernels::dsaIndexScoresBackward(const DsaShape &,
                                              const TokenShape &, int64_t,
                                              int64_t, const float *,
                                              const float *, const float *,
                                              const float *, float, float *,
                                              float *, float *, float *) {
  record("dsaIndexScoresBackward");
}
void RecordingKernels::tokensAhead(const TokenShape &, int64_t shift,
                                   const int32_t *, int32_t *) {
  record("tokensAhead " + std::to_string(shift));
}
void RecordingKernels::copyRows(int64_t, int64_t n, float *, int64_t dstStride,
                                const float *, int64_t srcStride) {
  record("copyRows " + std::to_string(n) + " of " + std::to_string(srcStride) +
         " to " + std::to_string(dstStride));
}

using Calls = std::vector<std::string>;

constexpr int64_t kHidden = 8, kVocab = 16;

ProgramLayer layerOf(LayerKind kind, LayerShape shape) {
  ProgramLayer l;
  l.kind = kind;
  l.layer = 1;
  l.shape = shape;
  return l;
}

/// A stage of `layers` in this order (every buffer range at offset 0: the
/// fake reads and writes nothing); forward in order, the input gradient in
/// reverse, the weight gradient in reverse.
StageProgram programOf(std::vector<ProgramLayer> layers,
                       DType activations = DType::F32) {
  StageProgram p;
  p.activations = activations;
  p.tokens = TokenShape{2, 4};
  p.hidden = kHidden;
  p.layers = std::move(layers);
  const int32_t n = int32_t(p.layers.size());
  for (int32_t i = 0; i < n; ++i) {
    p.forward.push_back({i, i == 0 ? Slot::Input : Slot::Act0,
                         i + 1 == n ? Slot::Output : Slot::Act0});
    p.backwardInput.push_back({n - 1 - i,
                               i == 0 ? Slot::GradOutput : Slot::Act1,
                               i + 1 == n ? Slot::GradInput : Slot::Act1});
    p.backwardWeight.push_back({n - 1 - i});
  }
  EXPECT_EQ(shardLayers(p), "");
  return p;
}

/// The calls of one pass of `program` over the recording target.
Calls run(const StageProgram &program, StagePass pass) {
  static float buffer[1];
  static float mtpLosses[2];
  static RouterCheck checks[4];
  StageArgs args;
  args.params = buffer;
  args.grads = buffer;
  args.saved = buffer;
  args.workspace = buffer;
  args.input = buffer;
  args.grad_output = buffer;
  args.mtp_losses = mtpLosses;
  args.router_checks = checks;
  RecordingKernels kernels;
  kernels.activations = program.activations;
  calls.clear();
  runStagePassOn(kernels, program, pass, args);
  return calls;
}

/// The three passes of a stage holding one layer.
struct Passes {
  Calls forward, backwardInput, backwardWeight;
};
Passes passesOf(LayerKind kind, LayerShape shape) {
  const StageProgram p = programOf({layerOf(kind, shape)});
  return {run(p, StagePass::Forward), run(p, StagePass::BackwardInput),
          run(p, StagePass::BackwardWeight)};
}

const std::string R = "round fp32";

TEST(RecordingTarget, Embedding) {
  const Passes p = passesOf(LayerKind::Embedding, EmbeddingShape{kVocab, 8});
  EXPECT_EQ(p.forward, (Calls{"embeddingLookup"}));
  EXPECT_EQ(p.backwardInput, (Calls{"copy"})); // dy kept for W
  EXPECT_EQ(p.backwardWeight, (Calls{"embeddingScatterAdd"}));
}

TEST(RecordingTarget, Mamba) {
  // hidden 8, 2 heads of 4 (inner 8), state 3, 1 group, conv 4:
  // in_proj 2*8 + 2*3 + 2 = 24 wide.
  const Passes p =
      passesOf(LayerKind::Mamba, MambaShape{kHidden, 2, 4, 3, 1, 4});
  EXPECT_EQ(p.forward,
            (Calls{"copy", "rmsnormForward", R, "linearForward 8>24", R,
                   "convForward", R, "scanForward", R, "gatedNormForward", R,
                   "linearForward 8>8", R, "addInto", R}));
  EXPECT_EQ(
      p.backwardInput,
      (Calls{"copy", "linearBackwardInput 8>8", R, "gatedNormBackward", R,
             "scanBackward", R, "convBackward", R, "linearBackwardInput 8>24",
             R, "copy", "rmsnormBackward+=", R}));
  EXPECT_EQ(p.backwardWeight,
            (Calls{"linearBackwardWeight 8>24", "linearBackwardWeight 8>8"}));
}

TEST(RecordingTarget, Gdn) {
  // hidden 8, 1 key head of 4, 2 value heads of 3, conv 4: in_proj
  // 2*4 + 2*6 + 2*2 = 24 wide, out_proj from 6. The rounding points of
  // recipes/Gdn.h: none between the gates and the rule, nor between the
  // rule's and the gates' backward (the conv output's gradient is whole).
  const Passes p = passesOf(LayerKind::Gdn, GdnShape{kHidden, 1, 2, 4, 3, 4});
  EXPECT_EQ(p.forward,
            (Calls{"copy", "rmsnormForward", R, "linearForward 8>24", R,
                   "gdnConvForward", R, "gdnGatesForward", "gdnRuleForward", R,
                   "gdnNormForward", R, "linearForward 6>8", R, "addInto", R}));
  EXPECT_EQ(
      p.backwardInput,
      (Calls{"copy", "linearBackwardInput 6>8", R, "gdnNormBackward", R,
             "gdnRuleBackward", "gdnGatesBackward", R, "gdnConvBackward", R,
             "linearBackwardInput 8>24", R, "copy", "rmsnormBackward+=", R}));
  EXPECT_EQ(p.backwardWeight,
            (Calls{"linearBackwardWeight 8>24", "linearBackwardWeight 6>8"}));
}

TEST(RecordingTarget, AttentionWithRope) {
  // 4 heads in 2 groups of head_dim 2: qkv (4 + 2*2) * 2 = 16, context 8.
  const Passes p =
      passesOf(LayerKind::Attention, AttentionShape{kHidden, 4, 2, 2, true});
  EXPECT_EQ(p.forward, (Calls{"copy", "rmsnormForward", R, "linearForward 8>16",
                              R, "rope +", R, "coreForward", R,
                              "linearForward 8>8", R, "addInto", R}));
  EXPECT_EQ(p.backwardInput,
            (Calls{"copy", "linearBackwardInput 8>8", R, "coreBackward", R,
                   "rope -", R, "linearBackwardInput 8>16", R, "copy",
                   "rmsnormBackward+=", R}));
  EXPECT_EQ(p.backwardWeight,
            (Calls{"linearBackwardWeight 8>16", "linearBackwardWeight 8>8"}));
}

TEST(RecordingTarget, AttentionWithoutRope) {
  const Passes p =
      passesOf(LayerKind::Attention, AttentionShape{kHidden, 4, 2, 2, false});
  EXPECT_EQ(p.forward,
            (Calls{"copy", "rmsnormForward", R, "linearForward 8>16", R,
                   "coreForward", R, "linearForward 8>8", R, "addInto", R}));
  EXPECT_EQ(
      p.backwardInput,
      (Calls{"copy", "linearBackwardInput 8>8", R, "coreBackward", R,
             "linearBackwardInput 8>16", R, "copy", "rmsnormBackward+=", R}));
}

/// `a` then `b`.
Calls operator+(Calls a, const Calls &b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

/// An MLA layer's forward with hidden 8, 2 heads, kv_lora 4, qk 3 + pe 2,
/// v 4 (kv_down 4 + 2 = 6 wide, kv_up 2 * (3 + 4) = 14, the context 2 * 4
/// = 8; the core's heads padded to 8, 16 a row of its context): the
/// pre-norm, the query latent's `latent` calls, c_kv split off
/// kv_down_proj's output (and normed with qk_layernorm), the up-projections
/// (q's `query` calls first) and the assembly, the core and linear_proj.
Calls mlaForward(const Calls &latent, const Calls &query, bool layernorm) {
  const Calls latentNorm = layernorm ? Calls{"rmsnormForward", R} : Calls{};
  return Calls{"copy", "rmsnormForward", R} + latent +
         Calls{"linearForward 8>6", R, "copyRows 4 of 6 to 4"} + latentNorm +
         query +
         Calls{"linearForward 4>14",
               R,
               "mlaAssemble",
               R,
               "coreForward",
               R,
               "copyRows 4 of 16 to 8",
               "copyRows 4 of 16 to 8",
               "linearForward 8>8",
               R,
               "addInto",
               R};
}

/// Its weight pass after the query branch's `query` GEMMs.
Calls mlaWeights(const Calls &query) {
  return query + Calls{"linearBackwardWeight 8>6", "linearBackwardWeight 4>14",
                       "linearBackwardWeight 8>8"};
}

TEST(RecordingTarget, MlaWithLatents) {
  // q_lora 6 (q 2 * 5 = 10 wide) and qk_layernorm.
  const Passes p =
      passesOf(LayerKind::Mla, MlaShape{kHidden, 2, 6, 4, 3, 2, 4, true});
  EXPECT_EQ(p.forward, mlaForward({"linearForward 8>6", R, "rmsnormForward", R},
                                  {"linearForward 6>10", R}, true));
  // The context's gradient padded for the core; q's, kv_up_proj's and
  // k_pe's gradients rounded, the rotary parts back through RoPE (q's
  // rounded again, kvd's once c_kv's is in); the latents' norms; the
  // normed input's gradient from both down-projections.
  EXPECT_EQ(p.backwardInput, (Calls{"copy",
                                    "linearBackwardInput 8>8",
                                    R,
                                    "zero",
                                    "copyRows 4 of 8 to 16",
                                    "copyRows 4 of 8 to 16",
                                    "coreBackward",
                                    "mlaGatherGradients",
                                    R,
                                    R,
                                    R,
                                    "mlaRopeBackward 2",
                                    R,
                                    "mlaRopeBackward 1",
                                    "linearBackwardInput 4>14",
                                    "copyRows 4 of 4 to 6",
                                    "copyRows 4 of 6 to 4",
                                    R,
                                    "rmsnormBackward",
                                    "copyRows 4 of 4 to 6",
                                    R,
                                    "linearBackwardInput 6>10",
                                    R,
                                    "rmsnormBackward",
                                    R,
                                    "linearBackwardInput 8>6",
                                    "linearBackwardInput+= 8>6",
                                    R,
                                    "copy",
                                    "rmsnormBackward+=",
                                    R}));
  EXPECT_EQ(p.backwardWeight, mlaWeights({"linearBackwardWeight 8>6",
                                          "linearBackwardWeight 6>10"}));
}

TEST(RecordingTarget, MlaWithoutLatents) {
  // No q_lora_rank (one linear_q_proj 8>10), no qk_layernorm.
  const Passes p =
      passesOf(LayerKind::Mla, MlaShape{kHidden, 2, 0, 4, 3, 2, 4, false});
  EXPECT_EQ(p.forward, mlaForward({}, {"linearForward 8>10", R}, false));
  EXPECT_EQ(p.backwardWeight, mlaWeights({"linearBackwardWeight 8>10"}));
}

TEST(RecordingTarget, SwigluMlp) {
  // SwiGLU: fc1 is 2 * ffn = 24 wide, the activation halves it to 12.
  const Passes p =
      passesOf(LayerKind::Mlp, MlpShape{kHidden, 12, Activation::Swiglu});
  EXPECT_EQ(p.forward, (Calls{"copy", "rmsnormForward", R, "linearForward 8>24",
                              R, "activationForward", R, "linearForward 12>8",
                              R, "addInto", R}));
  EXPECT_EQ(
      p.backwardInput,
      (Calls{"copy", "linearBackwardInput 12>8", R, "activationBackward", R,
             "linearBackwardInput 8>24", R, "copy", "rmsnormBackward+=", R}));
  EXPECT_EQ(p.backwardWeight,
            (Calls{"linearBackwardWeight 8>24", "linearBackwardWeight 12>8"}));
}

TEST(RecordingTarget, Moe) {
  // hidden 8, 4 experts of width 12 (squared ReLU), top-2: the router's
  // GEMM 8>4; the routing and the combine are the target's; each expert
  // with rows runs fc1 8>12 and fc2 12>8 (here expert 0 alone). Whole, the
  // residual is added in the combine; the router's input gradient adds to
  // the experts' before the norm's backward.
  const Passes p = passesOf(LayerKind::Moe, MoeShape{kHidden, 12, 4, 2});
  EXPECT_EQ(p.forward,
            (Calls{"copy", "rmsnormForward", R, "linearForward 8>4", R,
                   "moeRoute", "linearForward 8>12", R, "activationForward", R,
                   "linearForward 12>8", R, "moeCombine+x"}));
  EXPECT_EQ(
      p.backwardInput,
      (Calls{"moeOffsets", "moeCombineBackward", R, "linearBackwardInput 12>8",
             R, "activationBackward", R, "linearBackwardInput 8>12",
             "moeGatherRowGradients", "moeRouterBackward", R,
             "linearBackwardInput+= 8>4", "linearBackwardWeight 8>4", R, "copy",
             "rmsnormBackward+=", R}));
  EXPECT_EQ(p.backwardWeight, (Calls{"moeOffsets", "linearBackwardWeight 8>12",
                                     "linearBackwardWeight 12>8"}));
}

TEST(RecordingTarget, Head) {
  const Passes p = passesOf(LayerKind::Head, HeadShape{kVocab, kHidden});
  EXPECT_EQ(p.forward, (Calls{"copy", "rmsnormForward", R, "linearForward 8>16",
                              R, "crossEntropy shift 0"}));
  // No MTP depth: nothing adds to the normed output's gradient.
  EXPECT_EQ(p.backwardInput,
            (Calls{"lossCoefficients", "crossEntropyBackwardChunk 0+8", R,
                   "linearBackwardInput 8>16", R, "rmsnormBackward", R}));
  EXPECT_EQ(p.backwardWeight, (Calls{"linearBackwardWeight 8>16"}));
}

TEST(RecordingTarget, ChunkedHead) {
  // Megatron's linear cross-entropy fusion, 3 rows at a time over the 8
  // tokens: each chunk's logits made and rounded, then its statistics; the
  // input gradient makes them again, turns them into their gradient and
  // takes both the input's and the output layer's weight gradient from
  // them, so W has nothing left. No [T, vocab] GEMM anywhere.
  const Passes p =
      passesOf(LayerKind::Head, HeadShape{kVocab, kHidden, true, 3});
  const Calls chunks = {"linearForward 8>16", R, "crossEntropyChunk 0+3",
                        "linearForward 8>16", R, "crossEntropyChunk 3+3",
                        "linearForward 8>16", R, "crossEntropyChunk 6+2"};
  Calls forward = {"copy", "rmsnormForward", R, "lossTargets shift 0"};
  forward.insert(forward.end(), chunks.begin(), chunks.end());
  forward.push_back("crossEntropyChunked");
  EXPECT_EQ(p.forward, forward);
  Calls input = {"lossCoefficients"};
  for (const char *c : {"0+3", "3+3", "6+2"})
    input.insert(input.end(),
                 {"linearForward 8>16", R,
                  std::string("crossEntropyBackwardChunk ") + c, R,
                  "linearBackwardInput 8>16", "linearBackwardWeight 8>16"});
  input.insert(input.end(), {R, "rmsnormBackward", R});
  EXPECT_EQ(p.backwardInput, input);
  EXPECT_EQ(p.backwardWeight, Calls{});
}

TEST(RecordingTarget, MtpInput) {
  const Passes p =
      passesOf(LayerKind::MtpInput, MtpInputShape{kVocab, kHidden, 1});
  // The tokens one place ahead looked up; both inputs normed and rounded,
  // laid side by side as [e' | h'] (hidden 8 into rows of 16) and projected.
  EXPECT_EQ(p.forward,
            (Calls{"tokensAhead 1", "embeddingLookup", "copy", "rmsnormForward",
                   "rmsnormForward", R, "copyRows 8 of 8 to 16",
                   "copyRows 8 of 8 to 16", "linearForward 16>8", R}));
  // The output's gradient kept for the weight pass; [e' | h']'s gradient
  // rounded, each half back through its norm: the rows' gradient rounded
  // (complete), hPrev's left for the head to complete.
  EXPECT_EQ(p.backwardInput,
            (Calls{"copy", "linearBackwardInput 16>8", R,
                   "copyRows 8 of 16 to 8", "rmsnormBackward", R,
                   "copyRows 8 of 16 to 8", "rmsnormBackward"}));
  EXPECT_EQ(p.backwardWeight,
            (Calls{"linearBackwardWeight 16>8", "embeddingScatterAdd"}));
}

TEST(RecordingTarget, MtpOutput) {
  const Passes p =
      passesOf(LayerKind::MtpOutput, MtpOutputShape{kVocab, kHidden, 2, 0.5});
  // The head's loss with the labels two rows ahead.
  EXPECT_EQ(p.forward, (Calls{"copy", "rmsnormForward", R, "linearForward 8>16",
                              R, "crossEntropy shift 2"}));
  EXPECT_EQ(p.backwardInput,
            (Calls{"lossCoefficients", "crossEntropyBackwardChunk 0+8", R,
                   "linearBackwardInput 8>16", R, "rmsnormBackward", R}));
  EXPECT_EQ(p.backwardWeight, (Calls{"linearBackwardWeight 8>16"}));
}

/// A last stage with one MTP depth, in bf16: the head hands its normed
/// output to the depth's input, and in the input-gradient pass the depth's
/// input hands that output's gradient back, which the head adds before its
/// norm's backward (then rounds the sum once). Every rounding point rounds
/// to the program's precision.
TEST(RecordingTarget, MtpDepthAfterTheHeadInBf16) {
  StageProgram p = programOf(
      {layerOf(LayerKind::Head, HeadShape{kVocab, kHidden}),
       layerOf(LayerKind::MtpInput, MtpInputShape{kVocab, kHidden, 1}),
       layerOf(LayerKind::MtpOutput, MtpOutputShape{kVocab, kHidden, 1, 0.5})},
      DType::BF16);
  p.sharedOutput = TensorRange{0, 4, DType::F32};
  p.sharedTable = TensorRange{0, 4, DType::F32};
  const std::string B = "round bf16";
  EXPECT_EQ(run(p, StagePass::Forward), (Calls{"copy",
                                               "rmsnormForward",
                                               B,
                                               "linearForward 8>16",
                                               B,
                                               "crossEntropy shift 0",
                                               "tokensAhead 1",
                                               "embeddingLookup",
                                               "copy",
                                               "rmsnormForward",
                                               "rmsnormForward",
                                               B,
                                               "copyRows 8 of 8 to 16",
                                               "copyRows 8 of 8 to 16",
                                               "linearForward 16>8",
                                               B,
                                               "copy",
                                               "rmsnormForward",
                                               B,
                                               "linearForward 8>16",
                                               B,
                                               "crossEntropy shift 1"}));
  EXPECT_EQ(run(p, StagePass::BackwardInput),
            (Calls{"lossCoefficients",
                   "crossEntropyBackwardChunk 0+8",
                   B,
                   "linearBackwardInput 8>16",
                   B,
                   "rmsnormBackward",
                   B,
                   "copy",
                   "linearBackwardInput 16>8",
                   B,
                   "copyRows 8 of 16 to 8",
                   "rmsnormBackward",
                   B,
                   "copyRows 8 of 16 to 8",
                   "rmsnormBackward",
                   "lossCoefficients",
                   "crossEntropyBackwardChunk 0+8",
                   B,
                   "linearBackwardInput 8>16",
                   "addInto",
                   B,
                   "rmsnormBackward",
                   B}));
  EXPECT_EQ(run(p, StagePass::BackwardWeight),
            (Calls{"linearBackwardWeight 8>16", "linearBackwardWeight 16>8",
                   "embeddingScatterAdd", "linearBackwardWeight 8>16"}));
}

// The alltoall dispatcher's plan (recipes/Moe.h, rowExchange), worked by
// hand: tp 4 = ep 2 x etp 2, 4 experts (2 a rank), top-1, 8 tokens (2 a
// rank). Tokens 0..7 go to experts 0 3 0 1 2 2 1 0, so the rows grouped by
// expert in token order are e0: tokens 0 2 7, e1: 3 6, e2: 4 5, e3: 1.
TEST(RowExchange, SegmentsOfEachRanksTokensToEachExpert) {
  MoeShape s{8, 8, 4, 1};
  s.expertRanks = 2;
  const std::vector<int32_t> rowMap = {0, 2, 7, 3, 6, 4, 5, 1};
  const std::vector<int64_t> off = {0, 3, 5, 7, 8};
  using recipes::RowSegment;
  auto rows = [](const std::vector<RowSegment> &g) {
    std::vector<std::pair<int64_t, int64_t>> out;
    for (const RowSegment &x : g)
      out.push_back({x.row, x.rows});
    return out;
  };
  using Rows = std::vector<std::pair<int64_t, int64_t>>;
  const recipes::RowExchange x0 = recipes::rowExchange(s, rowMap, off, 8, 4, 0);
  // Rank 0 (tokens 0, 1) sends token 0's row (row 0) to ranks 0 and 1
  // (experts 0 and 1: none to expert 1) and token 1's (row 7) to 2 and 3.
  EXPECT_EQ(rows(x0.send[0]), (Rows{{0, 1}, {3, 0}}));
  EXPECT_EQ(rows(x0.send[1]), (Rows{{0, 1}, {3, 0}}));
  EXPECT_EQ(rows(x0.send[2]), (Rows{{5, 0}, {7, 1}}));
  EXPECT_EQ(rows(x0.send[3]), (Rows{{5, 0}, {7, 1}}));
  // It receives the rows of experts 0 and 1 of every rank's tokens: token
  // 2's (row 1) and 3's (row 3) from rank 1, 7's (row 2) and 6's (row 4)
  // from rank 3, none from rank 2.
  EXPECT_EQ(rows(x0.recv[0]), (Rows{{0, 1}, {3, 0}}));
  EXPECT_EQ(rows(x0.recv[1]), (Rows{{1, 1}, {3, 1}}));
  EXPECT_EQ(rows(x0.recv[2]), (Rows{{2, 0}, {4, 0}}));
  EXPECT_EQ(rows(x0.recv[3]), (Rows{{2, 1}, {4, 1}}));
  // What a sends b, b receives from a: the counts agree without an
  // exchange, for every pair.
  for (int64_t a = 0; a < 4; ++a)
    for (int64_t b = 0; b < 4; ++b)
      EXPECT_EQ(rows(recipes::rowExchange(s, rowMap, off, 8, 4, a).send[b]),
                rows(recipes::rowExchange(s, rowMap, off, 8, 4, b).recv[a]))
          << a << " to " << b;
}

TEST(RowExchange, RowsOutOfTokenOrderAreABug) {
  MoeShape s{8, 8, 2, 1};
  s.expertRanks = 2;
  // Expert 0's rows: token 3 (rank 1) before token 0 (rank 0).
  EXPECT_THROW(recipes::rowExchange(s, {3, 0, 1, 2}, {0, 2, 4}, 4, 2, 0),
               RuntimeError);
}

} // namespace
