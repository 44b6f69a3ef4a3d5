//===- LayerShapes.h - static shapes, parameters and buffers of each layer ===//
//
// The one description of what every layer kind owns: its static shape, its
// parameters (Megatron-LM names, shapes, initialisation, weight decay) and
// how many floats its forward pass keeps for the backward pass. The compiler
// reads it to plan buffers and write the manifest; the kernels (CPU and
// CUDA) cut their buffers with BufferLayouts.h. Header-only and dependency-free
// so that both sides (and the runtime, which links no LLVM) can include it.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_MODEL_LAYERSHAPES_H
#define HYPIPE_CORE_MODEL_LAYERSHAPES_H

#include "core/model/ModelDims.h"
#include "core/model/Recompute.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace hypipe::rt {

/// The kernels a layer can run: what the planner lowers each layer op to
/// and what a stage's kernel program names (MtpInput and MtpOutput: the two
/// ends of one multi-token-prediction depth, its layers between them).
enum class LayerKind {
  Embedding,
  Mamba,
  Attention,
  Mlp,
  Moe,
  Head,
  MtpInput,
  MtpOutput,
  Gdn,
  Mla,
  Dsa
};

inline constexpr const char *kLayerKindNames[] = {
    "embedding", "mamba",      "attention", "mlp", "moe", "head",
    "mtp_input", "mtp_output", "gdn",       "mla", "dsa"};

/// `mamba`, `mtp_input`, ...: the manifest's and the IR's spelling.
inline const char *layerKindName(LayerKind kind) {
  return kLayerKindNames[int(kind)];
}

enum class Activation { SquaredRelu, Gelu, Swiglu };

/// What the stage code is compiled for. The kernels of both targets keep the
/// same parameter layout and, but for attention, the same saved tensors;
/// the CUDA kernels keep attention's log-sum-exp instead of its
/// probabilities and need a little more workspace (docs/cuda.md).
enum class Target { Cpu, Cuda };

inline const char *targetName(Target t) {
  return t == Target::Cuda ? "cuda" : "cpu";
}

/// The inverse of targetName; nullopt for anything else.
inline std::optional<Target> parseTarget(std::string_view name) {
  for (Target t : {Target::Cpu, Target::Cuda})
    if (name == targetName(t))
      return t;
  return std::nullopt;
}

inline const char *activationName(Activation a) {
  switch (a) {
  case Activation::SquaredRelu:
    return "squared_relu";
  case Activation::Gelu:
    return "gelu";
  case Activation::Swiglu:
    return "swiglu";
  }
  return "?";
}

/// The inverse of activationName; nullopt for anything else.
inline std::optional<Activation> parseActivation(std::string_view name) {
  for (Activation a :
       {Activation::SquaredRelu, Activation::Gelu, Activation::Swiglu})
    if (name == activationName(a))
      return a;
  return std::nullopt;
}

/// How a parameter gets its first value (docs/model.md). `a`, `b` are the
/// distribution's arguments.
enum class Init { Normal, Uniform, Ones, Zeros, MambaALog, MambaDtBias };

inline const char *initName(Init i) {
  switch (i) {
  case Init::Normal:
    return "normal";
  case Init::Uniform:
    return "uniform";
  case Init::Ones:
    return "ones";
  case Init::Zeros:
    return "zeros";
  case Init::MambaALog:
    return "mamba_a_log";
  case Init::MambaDtBias:
    return "mamba_dt_bias";
  }
  return "?";
}

/// How a parameter is cut over the tensor-parallel ranks (Megatron-LM's
/// column- and row-parallel linears): whole on every rank (a norm's weight,
/// the router), its rows (dim 0: a column-parallel linear's outputs,
/// per-head vectors, the vocabulary) or its columns (the last dim: a
/// row-parallel linear's inputs) in tp equal parts, rank r keeping part r.
/// Rows of several sections (Mamba's in_proj [z x B C dt], SwiGLU's fc1
/// [gate; up]) are cut section by section: rank r keeps the r-th part of
/// each, in order (TensorParallel.h).
enum class Split { None, Rows, Columns };

inline const char *splitName(Split s) {
  return s == Split::Rows ? "rows" : s == Split::Columns ? "columns" : "none";
}
inline std::optional<Split> parseSplit(std::string_view name) {
  for (Split s : {Split::None, Split::Rows, Split::Columns})
    if (name == splitName(s))
      return s;
  return std::nullopt;
}

struct ParamSpec {
  std::string name; ///< Relative to the layer, e.g. `mixer.in_proj.weight`.
  std::vector<int64_t> shape;
  Init init = Init::Normal;
  double a = 0, b = 0;
  Split split = Split::None;
  /// Rows: the sections' row counts (empty: one section, every row).
  std::vector<int64_t> sections;
  /// An expert's weight on an expert grid of `expertRanks` ranks
  /// (docs/expert-parallel.md): only the `expertTp` ranks of expert-
  /// parallel rank `expertRank` of the layer's group hold it, cut over them
  /// by `split`; -1: not an expert's, cut over every tp rank.
  int64_t expertRank = -1, expertRanks = 1, expertTp = 1;
  /// A weight every head of the layer shares (Split::None), each tensor-
  /// parallel rank holding some of the heads: its gradient on a rank is
  /// its heads' part, summed over the group with or without sequence
  /// parallelism (a norm's is partial only by rows, under it).
  bool sharedByHeads = false;
  /// Megatron's rule: no weight decay on 1-D parameters (norms, biases).
  bool decay() const { return shape.size() > 1; }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
};

/// Tokens of one microbatch, row-major [tokens, hidden] activations. Without
/// boundaries: `batch` sequences of `seq` tokens. With `cuSeqlens` (THD, a
/// packed microbatch): `numSeqs` samples, sample i the rows [cuSeqlens[i],
/// cuSeqlens[i + 1]), at most batch x seq tokens in all. The compiler plans
/// buffers for batch x seq; kernels touch only tokens(), and attention, the
/// Mamba conv and the scan never look across a sample boundary.
struct TokenShape {
  int64_t batch = 1;
  int64_t seq = 1;
  const int32_t *cuSeqlens = nullptr;
  int64_t numSeqs = 0;
  /// The last sequence pads a packed microbatch for sequence parallelism
  /// (StepBatch: masked labels, no sample's): in tokens(), in no loss.
  bool paddedTail = false;
  /// Packed microbatches on an expert grid over data-parallel replicas
  /// (MoeShape::groupReplicas m > 1): the replicas of a MoE layer's group
  /// run their microbatches as one, so StepBatch pads each to the group's
  /// most rows (the padding its last sequence, as above); these are the
  /// real tokens of each of the m (host memory, in the group's order).
  const int64_t *replicaTokens = nullptr;

  int64_t tokens() const {
    return cuSeqlens ? cuSeqlens[numSeqs] : batch * seq;
  }
  /// The rows a per-token loss of the layers (DSA's indexer loss) averages
  /// over: every row but the padding's.
  int64_t lossRows() const {
    return paddedTail && numSeqs > 0 ? cuSeqlens[numSeqs - 1] : tokens();
  }
  int64_t sequences() const { return cuSeqlens ? numSeqs : batch; }
  /// First row and length of sequence i.
  int64_t start(int64_t i) const { return cuSeqlens ? cuSeqlens[i] : i * seq; }
  int64_t length(int64_t i) const {
    return cuSeqlens ? cuSeqlens[i + 1] - cuSeqlens[i] : seq;
  }
};

/// The rows of `t` one of `shards` sequence-parallel ranks holds at a
/// layer's input (recipes::sequenceShard's `local`: a sequence-parallel
/// microbatch's tokens are a multiple of them). A layer keeps its input and
/// its pre-norm's rstd for these rows alone, as Megatron-LM's sequence
/// parallelism does.
inline int64_t shardRows(const TokenShape &t, int64_t shards) {
  shards = std::max<int64_t>(shards, 1);
  return (t.tokens() + shards - 1) / shards;
}

/// `p` cut by its rows (in `sections`, each cut in tp parts) or its columns.
inline ParamSpec splitRows(ParamSpec p, std::vector<int64_t> sections = {}) {
  p.split = Split::Rows;
  p.sections = std::move(sections);
  return p;
}
inline ParamSpec splitColumns(ParamSpec p) {
  p.split = Split::Columns;
  return p;
}
inline ParamSpec sharedByHeads(ParamSpec p) {
  p.sharedByHeads = true;
  return p;
}

/// Megatron's std for every linear and embedding weight.
constexpr double kInitStd = 0.02;
/// RMSNorm epsilon everywhere.
constexpr float kNormEps = 1e-5f;

/// Output projections are scaled by 1/sqrt(2 * num_layers) (Megatron's
/// scaled_init_method_normal).
inline double scaledStd(int64_t numLayers) {
  return kInitStd / std::sqrt(2.0 * double(numLayers > 0 ? numLayers : 1));
}

/// The full (Megatron) name of a layer's parameter `p` under the layer's
/// `prefix` (`decoder.layers.3.`), except the embedding table, which keeps
/// its model-level name in every stage that holds a copy (a tied head's, an
/// MTP depth's).
inline std::string parameterName(const std::string &prefix,
                                 const ParamSpec &p) {
  return p.name.rfind("embedding.", 0) == 0 ? p.name : prefix + p.name;
}

/// The model's embedding table: the embedding layer's parameter, and the
/// name (so the initial values) of every copy a later stage holds (a tied
/// output layer, an MTP depth's).
inline ParamSpec embeddingTableParam(int64_t vocab, int64_t hidden) {
  // Vocabulary-parallel: each tensor-parallel rank holds a range of rows.
  return splitRows({"embedding.word_embeddings.weight",
                    {vocab, hidden},
                    Init::Normal,
                    kInitStd});
}

/// Saved floats of a language-model loss (the head's, an MTP depth's): x,
/// the normed x, rstd, the logits (overwritten by their gradient for the
/// weight pass) unless the loss is chunked (`chunk` rows at a time: the
/// logits are made again from the normed x), each row's softmax statistics,
/// loss mask (a chunked loss's backward turns it into each row's gradient
/// coefficient), labels.
inline int64_t lmLossSavedFloats(const TokenShape &t, int64_t hidden,
                                 int64_t vocab, int64_t chunk = 0,
                                 int64_t sequenceShards = 1) {
  int64_t T = t.tokens();
  // x and rstd of a rank's rows (shardRows), xn, the logits; each row's
  // max, scale, mask and label.
  return shardRows(t, sequenceShards) * (hidden + 1) +
         T * (hidden + (chunk > 0 ? 0 : vocab)) + 4 * T;
}

/// Floats of a chunked loss's statistics scratch (LossChunkStats): each
/// row's loss, sum of exponentials, target logit and the group's largest
/// logit, and four sums.
inline int64_t lmLossChunkStatsFloats(int64_t T) { return 4 * T + 4; }

/// Workspace of a language-model loss: the normed output's gradient
/// (backward); on CUDA two more floats for the loss and mask sums the GPU
/// reduces into (forward: after each row's loss, T floats). A chunked loss
/// adds a chunk's logits [chunk, vocab] and its statistics scratch.
inline int64_t lmLossWorkspaceFloats(const TokenShape &t, int64_t hidden,
                                     Target target, int64_t vocab = 0,
                                     int64_t chunk = 0) {
  const int64_t T = t.tokens();
  if (chunk > 0)
    return T * hidden + std::min(chunk, T) * vocab + lmLossChunkStatsFloats(T);
  return T * hidden + (target == Target::Cuda ? 2 : 0);
}

/// The fewest rows a chunk of the linear cross-entropy takes by default:
/// its GEMMs' M, enough to keep a GPU's tensor cores busy.
inline constexpr int64_t kLeastLossChunkRows = 256;

/// Rows a chunked (fused linear) cross-entropy takes at a time over a
/// microbatch of `tokens`, with `vocab` logits a row on this rank:
/// `requested` when positive, else the rows whose logits take about as much
/// memory as the [tokens, hidden] input (Liger Kernel's rule: tokens /
/// ceil(vocab / hidden), up to a power of two) but at least
/// kLeastLossChunkRows; at most the tokens.
inline int64_t lossChunkRows(int64_t tokens, int64_t vocab, int64_t hidden,
                             int64_t requested) {
  if (tokens <= 0)
    return 1;
  if (requested > 0)
    return std::min(requested, tokens);
  const int64_t ratio = std::max<int64_t>(1, (vocab + hidden - 1) / hidden);
  const int64_t rows = (tokens + ratio - 1) / ratio;
  int64_t p = kLeastLossChunkRows;
  while (p < rows)
    p *= 2;
  return std::min(p, tokens);
}

struct MambaShape {
  /// f(name, field) for each field (forEachField).
  template <class Self, class F> static void fields(Self &s, F &&f) {
    f("hidden", s.hidden);
    f("heads", s.heads);
    f("head_dim", s.headDim);
    f("state", s.state);
    f("groups", s.groups);
    f("conv_width", s.convWidth);
  }
  int64_t hidden, heads, headDim, state, groups, convWidth;
  /// Sequence parallelism's shards of the tokens (tensorParallelShard; not
  /// serialised): the saved input and rstd hold shardRows of them.
  int64_t sequenceShards = 1;
  int64_t inner() const { return heads * headDim; }
  int64_t groupState() const { return groups * state; }
  int64_t convChannels() const { return inner() + 2 * groupState(); }
  int64_t inProj() const { return 2 * inner() + 2 * groupState() + heads; }
  /// The conv's channels [x B C], cut section by section over tp.
  std::vector<int64_t> convSections() const {
    return {inner(), groupState(), groupState()};
  }
  /// Scan checkpoint interval: the state is kept at every `kScanChunk`-th
  /// row of the microbatch and recomputed inside a chunk during the
  /// backward pass.
  static constexpr int64_t kScanChunk = 64;
  int64_t scanChunks(const TokenShape &t) const {
    return (t.tokens() + kScanChunk - 1) / kScanChunk;
  }

  std::vector<ParamSpec> params(int64_t numLayers) const {
    double convBound = 1.0 / std::sqrt(double(convWidth));
    return {
        // Megatron's hybrid Mamba layer fuses the pre-norm into in_proj.
        {"mixer.in_proj.layer_norm_weight", {hidden}, Init::Ones},
        // Column-parallel, section by section: [z x B C dt].
        splitRows({"mixer.in_proj.weight",
                   {inProj(), hidden},
                   Init::Normal,
                   kInitStd},
                  {inner(), inner(), groupState(), groupState(), heads}),
        splitRows({"mixer.conv1d_weight",
                   {convChannels(), 1, convWidth},
                   Init::Uniform,
                   -convBound,
                   convBound},
                  convSections()),
        splitRows({"mixer.conv1d_bias",
                   {convChannels()},
                   Init::Uniform,
                   -convBound,
                   convBound},
                  convSections()),
        splitRows({"mixer.dt_bias", {heads}, Init::MambaDtBias, 0.001, 0.1}),
        splitRows({"mixer.A_log", {heads}, Init::MambaALog, 1, 16}),
        splitRows({"mixer.D", {heads}, Init::Ones}),
        // The gated norm's groups stay within a rank.
        splitRows({"mixer.norm.weight", {inner()}, Init::Ones}),
        splitColumns({"mixer.out_proj.weight",
                      {hidden, inner()},
                      Init::Normal,
                      scaledStd(numLayers)}),
    };
  }

  /// Saved for backward, per microbatch: layer input, normed input, in_proj
  /// output, conv output (post-SiLU), dt after softplus, scan output y,
  /// gated-norm input and its rstd, gated-norm output (out_proj input), the
  /// per-chunk scan states, and room for the gradients the weight pass needs
  /// (in_proj and out_proj output gradients).
  int64_t savedFloats(const TokenShape &t, Target = Target::Cpu) const {
    int64_t T = t.tokens();
    int64_t states = scanChunks(t) * heads * headDim * state;
    return shardRows(t, sequenceShards) * (hidden /*x*/ + 1 /*rstd*/) +
           T * (hidden /*xn*/ + inProj() + convChannels() + heads /*dt*/ +
                inner() /*y*/ + inner() /*gated*/ + groups /*rstd*/ +
                inner() /*normed*/) +
           states + T * (inProj() + hidden) /*grad stash*/;
  }
  int64_t workspaceFloats(const TokenShape &t, Target = Target::Cpu) const {
    // Gradients of the gated norm's input, the scan's output, xBC, dt and
    // the normed input; then the chunked scan's per-(chunk, head) states or
    // state gradients and partials (CPU: 2, CUDA: 3 per chunk and head).
    return t.tokens() * (2 * inner() + convChannels() + heads + hidden) +
           scanChunks(t) * heads * (headDim * state + 3);
  }
};

/// Of a dropped module's tensors, `n` floats a token when `modules` has
/// `m` (the shapes' recomputedFloats).
inline int64_t droppedFloats(const TokenShape &t, RecomputeModuleSet modules,
                             RecomputeModule m, int64_t n) {
  return modules & moduleBit(m) ? t.tokens() * n : 0;
}

/// A Gated DeltaNet layer (Megatron-LM's GatedDeltaNet, the linear-attention
/// mixer of Qwen3-Next): RMSNorm fused into in_proj -> [q k v z beta alpha];
/// causal depthwise conv (no bias) + SiLU over [q k v]; q, k L2-normalised;
/// g = -exp(A_log) softplus(alpha + dt_bias), beta = sigmoid(beta); the
/// gated delta rule per value head in chunks of kChunk rows; RMSNorm over
/// dv (one weight, every head) times SiLU(z); out_proj (docs/gdn.md).
struct GdnShape {
  /// f(name, field) for each field (forEachField).
  template <class Self, class F> static void fields(Self &s, F &&f) {
    f("hidden", s.hidden);
    f("key_heads", s.keyHeads);
    f("value_heads", s.valueHeads);
    f("key_head_dim", s.keyHeadDim);
    f("value_head_dim", s.valueHeadDim);
    f("conv_width", s.convWidth);
  }
  int64_t hidden, keyHeads, valueHeads, keyHeadDim, valueHeadDim, convWidth;
  /// Sequence parallelism's shards of the tokens (tensorParallelShard; not
  /// serialised): the saved input and rstd hold shardRows of them.
  int64_t sequenceShards = 1;
  int64_t keyWidth() const { return keyHeads * keyHeadDim; }
  int64_t valueWidth() const { return valueHeads * valueHeadDim; }
  /// The conv's channels [q k v].
  int64_t convChannels() const { return 2 * keyWidth() + valueWidth(); }
  /// in_proj's rows [q k v z beta alpha].
  int64_t inProj() const {
    return convChannels() + valueWidth() + 2 * valueHeads;
  }
  /// Value heads a key head serves (value head j reads key head j / this).
  int64_t headsPerKey() const {
    return keyHeads > 0 ? valueHeads / keyHeads : 1;
  }
  /// Tokens of one chunk of the chunked gated delta rule (Megatron's and
  /// flash-linear-attention's 64). A chunk ends at the sequence's end or at
  /// the next multiple of kChunk rows of the microbatch, whichever comes
  /// first: so the state entering every kChunk-th row (one per chunk) is
  /// all the backward pass needs, and a packed microbatch needs no more
  /// than an unpacked one.
  static constexpr int64_t kChunk = 64;
  int64_t chunks(const TokenShape &t) const {
    return (t.tokens() + kChunk - 1) / kChunk;
  }
  /// The state [dk, dv] of one value head.
  int64_t stateFloats() const { return keyHeadDim * valueHeadDim; }
  /// Scratch of the rule per value head. CPU (runtime/kernels/cpu/Gdn.cpp):
  /// forward, the chunk's q, k, decayed k [kChunk, dk], right-hand sides
  /// [kChunk, dv + dk], two [kChunk, kChunk] matrices, beta [kChunk] and
  /// the state; backward, the same and the adjoints dP [kChunk,
  /// kChunk], dU [kChunk, dv], dQ, dK and a product [kChunk, dk], the
  /// entering state's gradient and the carried one. CUDA
  /// (runtime/kernels/cuda/Gdn.cu, row by row): the states inside one
  /// chunk, the state's gradient and three dv vectors.
  int64_t ruleScratchFloats(Target target = Target::Cpu) const {
    const int64_t L = kChunk, dk = keyHeadDim, dv = valueHeadDim;
    if (target == Target::Cuda)
      return (L + 2) * stateFloats() + 3 * dv;
    return chunkForwardFloats() + L * (3 * dk + dv) + L * L + 2 * stateFloats();
  }
  /// Of the CPU rule's scratch, what one chunk's forward uses (the state
  /// sits at the scratch's end).
  int64_t chunkForwardFloats() const {
    const int64_t L = kChunk;
    return L * (4 * keyHeadDim + valueHeadDim) + 2 * L * L + L;
  }

  std::vector<ParamSpec> params(int64_t numLayers) const {
    double convBound = 1.0 / std::sqrt(double(convWidth));
    return {
        {"self_attention.in_proj.layer_norm_weight", {hidden}, Init::Ones},
        splitRows({"self_attention.in_proj.weight",
                   {inProj(), hidden},
                   Init::Normal,
                   kInitStd},
                  {keyWidth(), keyWidth(), valueWidth(), valueWidth(),
                   valueHeads, valueHeads}),
        // No bias (Megatron's conv_bias default); PyTorch's Conv1d init.
        splitRows({"self_attention.conv1d.weight",
                   {convChannels(), 1, convWidth},
                   Init::Uniform,
                   -convBound,
                   convBound},
                  {keyWidth(), keyWidth(), valueWidth()}),
        splitRows({"self_attention.dt_bias", {valueHeads}, Init::Ones}),
        splitRows(
            {"self_attention.A_log", {valueHeads}, Init::MambaALog, 1, 16}),
        // One weight over dv, shared by every head.
        sharedByHeads(
            {"self_attention.out_norm.weight", {valueHeadDim}, Init::Ones}),
        splitColumns({"self_attention.out_proj.weight",
                      {hidden, valueWidth()},
                      Init::Normal,
                      scaledStd(numLayers)}),
    };
  }

  /// Saved for backward, per microbatch (BufferLayouts.h's gdnSaved): layer
  /// input, normed input and its rstd, in_proj output, conv output
  /// (post-SiLU), the L2-normalised q and k and their inverse norms, g and
  /// beta, the rule's output, the out norm's rstd and output (out_proj
  /// input), the state entering every chunk, and the in_proj and out_proj
  /// output gradients for the weight pass.
  int64_t savedFloats(const TokenShape &t, Target = Target::Cpu) const {
    const int64_t T = t.tokens();
    return shardRows(t, sequenceShards) * (hidden + 1) +
           T * (hidden + inProj() + convChannels() + 2 * keyWidth() +
                2 * keyHeads + 2 * valueHeads + valueWidth() + valueHeads +
                valueWidth()) +
           chunks(t) * valueHeads * stateFloats() + T * (inProj() + hidden);
  }
  /// Of savedFloats, what selective recompute of `modules` drops:
  /// gdn_norm_out the gated out norm's output (recomputed from o, z and
  /// its kept rstd).
  int64_t recomputedFloats(const TokenShape &t,
                           RecomputeModuleSet modules) const {
    return droppedFloats(t, modules, RecomputeModule::GdnNormOut, valueWidth());
  }
  /// Gradients of the out norm's output and input, of the conv's output,
  /// of q and k per value head, of g and beta, and of the normed input;
  /// then the rule's scratch for every value head.
  int64_t workspaceFloats(const TokenShape &t,
                          Target target = Target::Cpu) const {
    const int64_t T = t.tokens();
    return T * (2 * valueWidth() + convChannels() +
                2 * valueHeads * keyHeadDim + 2 * valueHeads + hidden) +
           valueHeads * ruleScratchFloats(target);
  }
};

struct AttentionShape {
  /// f(name, field) for each field (forEachField).
  template <class Self, class F> static void fields(Self &s, F &&f) {
    f("hidden", s.hidden);
    f("heads", s.heads);
    f("groups", s.groups);
    f("head_dim", s.headDim);
    f("rope", s.rope);
    f("rope_base", s.ropeBase);
  }
  int64_t hidden, heads, groups, headDim;
  bool rope = false;
  double ropeBase = 10000.0;
  /// A tensor-parallel shard's (tensorParallelShard; not serialised): the
  /// ranks that share each query group's k and v (Megatron-LM with tp above
  /// num_query_groups: the shard holds one group, heads of its queries),
  /// and the tensor-parallel size.
  int64_t kvReplicas = 1, ranks = 1;
  /// The scale of the scores (not serialised): 0 is 1/sqrt(headDim); MLA's
  /// core (MlaShape::core) sets its own.
  double softmaxScale = 0;
  /// Sequence parallelism's shards of the tokens (tensorParallelShard; not
  /// serialised): the saved input and rstd hold shardRows of them.
  int64_t sequenceShards = 1;
  /// The factor on q . k the cores apply.
  float scoreScale() const {
    return softmaxScale > 0 ? float(softmaxScale)
                            : 1.0f / std::sqrt(float(headDim));
  }
  /// q, k and v of the layer's heads: [q heads | k | v] by query group.
  int64_t qkvWidth() const { return (heads + 2 * groups) * headDim; }
  int64_t contextWidth() const { return heads * headDim; }
  /// Replicated k and v: the whole layer's qkv width, which the ranks'
  /// linear_qkv outputs make up side by side.
  int64_t wholeQkvWidth() const {
    return (heads * kvReplicas + 2) * headDim * (ranks / kvReplicas);
  }
  /// The rows of linear_qkv this rank computes: the shard's q, k and v, or
  /// with replicated k and v its tp-th of the whole layer's rows.
  int64_t linearWidth() const {
    return kvReplicas > 1 ? wholeQkvWidth() / ranks : qkvWidth();
  }

  std::vector<ParamSpec> params(int64_t numLayers) const {
    return {
        {"self_attention.linear_qkv.layer_norm_weight", {hidden}, Init::Ones},
        // Rows grouped by query group ([q heads | k | v] each): cut by
        // groups.
        splitRows({"self_attention.linear_qkv.weight",
                   {qkvWidth(), hidden},
                   Init::Normal,
                   kInitStd}),
        splitColumns({"self_attention.linear_proj.weight",
                      {hidden, contextWidth()},
                      Init::Normal,
                      scaledStd(numLayers)}),
    };
  }
  /// x, xn, rstd, qkv (after RoPE), the log-sum-exp of every row and head
  /// (the probabilities are recomputed going backward), context, grad
  /// stash.
  int64_t savedFloats(const TokenShape &t, Target = Target::Cpu) const {
    int64_t T = t.tokens();
    return shardRows(t, sequenceShards) * (hidden + 1) +
           T * (hidden + qkvWidth() + contextWidth()) + T * heads +
           T * (qkvWidth() + hidden);
  }
  /// Of savedFloats, what selective recompute of `modules` drops (into the
  /// recompute buffer, BufferLayouts.h): layernorm the normed input,
  /// core_attn the log-sum-exp and the context.
  int64_t recomputedFloats(const TokenShape &t,
                           RecomputeModuleSet modules) const {
    return droppedFloats(t, modules, RecomputeModule::LayerNorm, hidden) +
           droppedFloats(t, modules, RecomputeModule::CoreAttn,
                         heads + contextWidth());
  }
  /// The context's and the normed input's gradients, and dO . O per row
  /// and head.
  /// With replicated k and v, the whole layer's q, k and v, gathered.
  int64_t workspaceFloats(const TokenShape &t, Target = Target::Cpu) const {
    return t.tokens() * (hidden + contextWidth() + heads +
                         (kvReplicas > 1 ? wholeQkvWidth() : 0));
  }
};

/// The row sections of an fc1 weight of `ffn` rows a section: [gate; up]
/// with SwiGLU, cut section by section over tensor-parallel ranks.
inline std::vector<int64_t> fc1SectionsOf(Activation act, int64_t ffn) {
  return act == Activation::Swiglu ? std::vector<int64_t>{ffn, ffn}
                                   : std::vector<int64_t>{ffn};
}

/// Multi-latent attention as Megatron-LM builds it
/// (multi_latent_attention.py): queries through linear_q_down_proj and
/// linear_q_up_proj (or one linear_q_proj without q_lora_rank); keys and
/// values from the latent c_kv of linear_kv_down_proj, whose last
/// `posEmbDim` columns are the one rotary key k_pe all heads share; RoPE
/// (or YaRN) on the rotary parts, causal softmax attention and linear_proj.
/// The kernels run attention's core on heads padded to coreHeadDim()
/// (zero columns change no score and no output).
struct MlaShape {
  /// f(name, field) for each field (forEachField).
  template <class Self, class F> static void fields(Self &s, F &&f) {
    f("hidden", s.hidden);
    f("heads", s.heads);
    f("q_lora_rank", s.qLoraRank);
    f("kv_lora_rank", s.kvLoraRank);
    f("qk_head_dim", s.qkHeadDim);
    f("qk_pos_emb_head_dim", s.posEmbDim);
    f("v_head_dim", s.vHeadDim);
    f("qk_layernorm", s.qkLayernorm);
    f("yarn", s.yarn);
    f("rotary_base", s.rotaryBase);
    f("rotary_scaling_factor", s.scalingFactor);
    f("mscale", s.mscale);
    f("mscale_all_dim", s.mscaleAllDim);
  }
  int64_t hidden, heads;
  int64_t qLoraRank; ///< 0: Megatron's None, no query down-projection
  int64_t kvLoraRank, qkHeadDim, posEmbDim, vHeadDim;
  bool qkLayernorm = false;
  /// Megatron's --rope-type yarn (true, MLA's default) or rope, with
  /// --rotary-base and YaRN's --rotary-scaling-factor, --mscale and
  /// --mscale-all-dim.
  bool yarn = true;
  double rotaryBase = 10000.0, scalingFactor = 1.0, mscale = 1.0,
         mscaleAllDim = 0.0;
  /// Sequence parallelism's shards of the tokens (tensorParallelShard; not
  /// serialised): the saved input and rstd hold shardRows of them.
  int64_t sequenceShards = 1;
  /// YaRN's fixed settings (Megatron's and DeepSeek-V3's defaults).
  static constexpr double kOriginalMaxPositions = 4096, kBetaFast = 32,
                          kBetaSlow = 1;

  int64_t queryDim() const { return qkHeadDim + posEmbDim; }
  int64_t queryWidth() const { return heads * queryDim(); }
  int64_t kvUpWidth() const { return heads * (qkHeadDim + vHeadDim); }
  int64_t contextWidth() const { return heads * vHeadDim; }
  int64_t kvDownWidth() const { return kvLoraRank + posEmbDim; }
  /// The attention core's head: wide enough for q and k and for v, a
  /// power of two from 8 (a head width the CUDA core is built for), on
  /// both targets, so they keep the same tensors.
  int64_t coreHeadDim() const {
    int64_t d = 8;
    while (d < std::max(queryDim(), vHeadDim))
      d *= 2;
    return d;
  }

  /// Megatron's _yarn_get_mscale.
  static double yarnMscale(double scale, double m) {
    return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0;
  }
  /// The scores' scale: mscale(f, mscale_all_dim)^2 / sqrt(qk + pe)
  /// (Megatron's, whatever the rope type).
  double softmaxScale() const {
    const double m = yarnMscale(scalingFactor, mscaleAllDim);
    return m * m / std::sqrt(double(queryDim()));
  }
  /// The factor on cos and sin: YaRN's concentration, 1 for plain RoPE.
  double ropeFactor() const {
    return yarn ? yarnMscale(scalingFactor, mscale) /
                      yarnMscale(scalingFactor, mscaleAllDim)
                : 1.0;
  }
  /// The angle per position of rotary pair i < posEmbDim / 2: base^(-2i/pe),
  /// with YaRN ramped between it and it / f (Megatron's
  /// YarnRotaryEmbedding).
  double inverseFrequency(int64_t i) const {
    const double D = double(posEmbDim);
    const double extra = std::pow(rotaryBase, -2.0 * double(i) / D);
    if (!yarn)
      return extra;
    auto correction = [&](double rotations) {
      return D *
             std::log(kOriginalMaxPositions /
                      (rotations * 2 * 3.141592653589793)) /
             (2 * std::log(rotaryBase));
    };
    const double low = std::max(std::floor(correction(kBetaFast)), 0.0);
    double high = std::min(std::ceil(correction(kBetaSlow)), D - 1);
    if (low == high)
      high += 0.001;
    const double ramp = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
    return extra / scalingFactor * ramp + extra * (1 - ramp);
  }
  /// The core's view: one query group a head, [q | k | v] each
  /// coreHeadDim() wide, MLA's scale.
  AttentionShape core() const {
    AttentionShape c{hidden, heads, heads, coreHeadDim()};
    c.softmaxScale = softmaxScale();
    return c;
  }

  std::vector<ParamSpec> params(int64_t numLayers) const {
    std::vector<ParamSpec> p = {
        {"input_layernorm.weight", {hidden}, Init::Ones}};
    // Megatron splits heads: the up-projections are column-parallel (by
    // heads), the down-projections replicated, linear_proj row-parallel.
    if (qLoraRank > 0) {
      p.push_back({"self_attention.linear_q_down_proj.weight",
                   {qLoraRank, hidden},
                   Init::Normal,
                   kInitStd});
      if (qkLayernorm)
        p.push_back({"self_attention.linear_q_up_proj.layer_norm_weight",
                     {qLoraRank},
                     Init::Ones});
      p.push_back(splitRows({"self_attention.linear_q_up_proj.weight",
                             {queryWidth(), qLoraRank},
                             Init::Normal,
                             kInitStd}));
    } else {
      p.push_back(splitRows({"self_attention.linear_q_proj.weight",
                             {queryWidth(), hidden},
                             Init::Normal,
                             kInitStd}));
    }
    p.push_back({"self_attention.linear_kv_down_proj.weight",
                 {kvDownWidth(), hidden},
                 Init::Normal,
                 kInitStd});
    if (qkLayernorm)
      p.push_back({"self_attention.linear_kv_up_proj.layer_norm_weight",
                   {kvLoraRank},
                   Init::Ones});
    // Rows per head [k_nope; v].
    p.push_back(splitRows({"self_attention.linear_kv_up_proj.weight",
                           {kvUpWidth(), kvLoraRank},
                           Init::Normal,
                           kInitStd}));
    p.push_back(splitColumns({"self_attention.linear_proj.weight",
                              {hidden, contextWidth()},
                              Init::Normal,
                              scaledStd(numLayers)}));
    return p;
  }
  /// Floats a token of the latents' tensors: the query latent and its
  /// normed copy (with qk_layernorm, and its rstd), kv_down_proj's output,
  /// c_kv alone and normed (likewise).
  int64_t latentFloats() const {
    const int64_t ln = qkLayernorm ? 1 : 0;
    return qLoraRank * (1 + ln) + (qLoraRank > 0 ? ln : 0) + kvDownWidth() +
           kvLoraRank * (1 + ln) + ln;
  }
  /// x, xn, rstd, the latents, the core's q, k and v (after RoPE), its
  /// log-sum-exp and padded context, the context, and for the weight pass
  /// the gradients of q, the query latent, kv_down_proj's and
  /// kv_up_proj's outputs and the layer's output.
  int64_t savedFloats(const TokenShape &t, Target = Target::Cpu) const {
    const int64_t D = coreHeadDim();
    return shardRows(t, sequenceShards) * (hidden + 1) +
           t.tokens() * (hidden + latentFloats() + 3 * heads * D + heads +
                         heads * D + contextWidth() + queryWidth() + qLoraRank +
                         kvDownWidth() + kvUpWidth() + hidden);
  }
  /// Of savedFloats, what selective recompute of `modules` drops:
  /// mla_up_proj the core's q, k and v (Megatron's up-projections and RoPE,
  /// computed again from the kept latents).
  int64_t recomputedFloats(const TokenShape &t,
                           RecomputeModuleSet modules) const {
    return droppedFloats(t, modules, RecomputeModule::MlaUpProj,
                         3 * heads * coreHeadDim());
  }
  /// Going backward: the context's gradient, packed and padded, the core's
  /// q, k and v gradient, dO . O per row and head, the normed input's
  /// gradient and the latents' (the normed query latent's, c_kv normed and
  /// not). Going forward its front holds q and kv_up_proj's output.
  int64_t workspaceFloats(const TokenShape &t, Target = Target::Cpu) const {
    const int64_t D = coreHeadDim();
    return t.tokens() * (contextWidth() + 4 * heads * D + heads + hidden +
                         qLoraRank + 2 * kvLoraRank);
  }
};

/// DeepSeek sparse attention as Megatron-LM builds it (dsa.py): an MLA
/// layer whose core attends, per query, only to the top-k keys of its
/// lightning indexer. The indexer (self_attention.core_attention.indexer)
/// reads the layer's normed input x and the query latent (the normed input
/// without q_lora_rank), both detached: linear_wq_b to indexerHeads
/// queries of indexerHeadDim, linear_wk and the LayerNorm k_norm to one
/// key, RoPE on their last posEmbDim channels, linear_weights_proj to a
/// weight per head; I[t, s] = sum_h w[t, h] ReLU(q[t, h] . k[s]). It
/// trains only through its KL loss against the attention's distribution.
struct DsaShape : MlaShape {
  /// f(name, field) for each field (forEachField): MLA's, then the
  /// indexer's.
  template <class Self, class F> static void fields(Self &s, F &&f) {
    using Mla =
        std::conditional_t<std::is_const_v<Self>, const MlaShape, MlaShape>;
    MlaShape::fields(static_cast<Mla &>(s), f);
    f("dsa_indexer_n_heads", s.indexerHeads);
    f("dsa_indexer_head_dim", s.indexerHeadDim);
    f("dsa_indexer_topk", s.topk);
    f("dsa_indexer_loss_coeff", s.lossCoeff);
    f("dsa_indexer_use_sparse_loss", s.sparseLoss);
    f("seq_length", s.seq);
  }
  int64_t indexerHeads, indexerHeadDim, topk;
  /// The KL loss's weight, and whether it covers only the top-k keys.
  double lossCoeff = 0.0;
  bool sparseLoss = false;
  /// The microbatch's sequence length (the compiler's; 0 where no
  /// collective is asked for): the floats of a query's row of the pair
  /// blocks, over which the KL loss's target is summed across tensor-
  /// parallel ranks (collectivesOf: the first tokens x seq floats of the
  /// pair blocks, which hold the sum of the samples' squared lengths).
  int64_t seq = 0;

  /// The dense per-sample [s, s] blocks of a microbatch (the index
  /// scores' gradient, the kept keys): sum of the samples' squared
  /// lengths, at most tokens x seq (a packed microbatch is one row of seq
  /// tokens).
  static int64_t pairFloats(const TokenShape &t) {
    return t.batch * t.seq * t.seq;
  }

  /// The layer's MLA: its sizes and rotary settings.
  const MlaShape &mla() const { return *this; }

  /// linear_wq_b's input: the query latent, or the normed input.
  int64_t indexerQueryIn() const { return qLoraRank > 0 ? qLoraRank : hidden; }
  int64_t indexerQueryWidth() const { return indexerHeads * indexerHeadDim; }

  /// MLA's parameters, then the indexer's, replicated on every rank
  /// (Megatron's parallel_mode "duplicated").
  std::vector<ParamSpec> params(int64_t numLayers) const {
    std::vector<ParamSpec> p = MlaShape::params(numLayers);
    const std::string indexer = "self_attention.core_attention.indexer.";
    p.push_back({indexer + "linear_wq_b.weight",
                 {indexerQueryWidth(), indexerQueryIn()},
                 Init::Normal,
                 kInitStd});
    p.push_back({indexer + "linear_wk.weight",
                 {indexerHeadDim, hidden},
                 Init::Normal,
                 kInitStd});
    p.push_back({indexer + "k_norm.weight", {indexerHeadDim}, Init::Ones});
    p.push_back({indexer + "k_norm.bias", {indexerHeadDim}, Init::Zeros});
    p.push_back({indexer + "linear_weights_proj.weight",
                 {indexerHeads, hidden},
                 Init::Normal,
                 kInitStd});
    return p;
  }
  /// Floats a token of the indexer's own tensors: its queries (after
  /// RoPE) and their gradient, its key before k_norm, normed and rotated
  /// and that one's gradient, k_norm's mean and rstd, the head weights and
  /// their gradient.
  int64_t indexerFloats() const {
    return 2 * indexerQueryWidth() + 3 * indexerHeadDim + 2 + 2 * indexerHeads;
  }
  /// MLA's tensors, then the indexer's and, per sample, the KL loss's
  /// gradient of the index scores and the keys each query keeps.
  int64_t savedFloats(const TokenShape &t, Target target = Target::Cpu) const {
    return MlaShape::savedFloats(t, target) + t.tokens() * indexerFloats() +
           2 * pairFloats(t);
  }
  /// MLA's, and for the indexer's backward a sample's block of scores per
  /// head.
  int64_t workspaceFloats(const TokenShape &t,
                          Target target = Target::Cpu) const {
    return MlaShape::workspaceFloats(t, target) + pairFloats(t) +
           t.tokens() * indexerHeadDim;
  }
};

struct MlpShape {
  /// f(name, field) for each field (forEachField).
  template <class Self, class F> static void fields(Self &s, F &&f) {
    f("hidden", s.hidden);
    f("ffn", s.ffn);
    f("activation", s.act);
  }
  int64_t hidden, ffn;
  Activation act = Activation::SquaredRelu;
  /// Sequence parallelism's shards of the tokens (tensorParallelShard; not
  /// serialised): the saved input and rstd hold shardRows of them.
  int64_t sequenceShards = 1;
  int64_t fc1Width() const { return act == Activation::Swiglu ? 2 * ffn : ffn; }
  std::vector<int64_t> fc1Sections() const { return fc1SectionsOf(act, ffn); }

  std::vector<ParamSpec> params(int64_t numLayers) const {
    return {
        {"mlp.linear_fc1.layer_norm_weight", {hidden}, Init::Ones},
        // [gate; up] with SwiGLU, cut section by section.
        splitRows({"mlp.linear_fc1.weight",
                   {fc1Width(), hidden},
                   Init::Normal,
                   kInitStd},
                  fc1Sections()),
        splitColumns({"mlp.linear_fc2.weight",
                      {hidden, ffn},
                      Init::Normal,
                      scaledStd(numLayers)}),
    };
  }
  /// x, xn, rstd, fc1 output, activation output, grad stash.
  int64_t savedFloats(const TokenShape &t, Target = Target::Cpu) const {
    int64_t T = t.tokens();
    return shardRows(t, sequenceShards) * (hidden + 1) +
           T * (hidden + fc1Width() + ffn) + T * (fc1Width() + hidden);
  }
  /// Of savedFloats, what selective recompute of `modules` drops:
  /// layernorm the normed input, mlp the fc1 output and the activation.
  int64_t recomputedFloats(const TokenShape &t,
                           RecomputeModuleSet modules) const {
    return droppedFloats(t, modules, RecomputeModule::LayerNorm, hidden) +
           droppedFloats(t, modules, RecomputeModule::Mlp, fc1Width() + ffn);
  }
  int64_t workspaceFloats(const TokenShape &t, Target = Target::Cpu) const {
    return t.tokens() * (ffn + hidden);
  }
};

struct MoeShape {
  /// f(name, field) for each field (forEachField).
  template <class Self, class F> static void fields(Self &s, F &&f) {
    f("hidden", s.hidden);
    f("ffn", s.ffn);
    f("experts", s.experts);
    f("topk", s.topk);
    f("activation", s.act);
    f("aux_loss_coeff", s.auxLossCoeff);
    f("expert_ranks", s.expertRanks);
    f("capacity_factor", s.capacityFactor);
    f("drop_by_position", s.dropByPosition);
    f("capacity_blocks", s.capacityBlocks);
    f("all_to_all", s.allToAll);
    f("group_replicas", s.groupReplicas);
    f("expert_tp", s.expertTp);
  }
  int64_t hidden, ffn, experts, topk;
  Activation act = Activation::SquaredRelu;
  double auxLossCoeff = 0.0;
  /// Megatron-LM's --moe-expert-capacity-factor (0: dropless, its
  /// default): each expert takes at most ceil(tokens x topk / experts x
  /// factor) of the tokens routed to it, per block of the routed tokens
  /// (capacityBlocks: the tensor-parallel ranks' sequence shards, where
  /// Megatron-LM's router runs), keeping those of the highest routing
  /// weights or, with dropByPosition (--moe-token-drop-policy position),
  /// the earliest (core/model/MoeCapacity.h).
  double capacityFactor = 0.0;
  bool dropByPosition = false;
  int64_t capacityBlocks = 1;
  /// Megatron-LM's alltoall token dispatcher (--moe-token-dispatcher-type
  /// alltoall) over tensor-parallel ranks: each rank's routed rows travel to
  /// the ranks of their experts and back (false: the allgather dispatcher,
  /// Megatron-LM's default, gathers every token).
  bool allToAll = false;
  /// Megatron-LM's expert parallelism (ep x etp = groupReplicas x tp):
  /// expert-parallel rank r (the rank in the layer's group / etp) holds the
  /// experts [r E/ep, (r+1) E/ep), each split over etp ranks.
  int64_t expertRanks = 1;
  /// Expert parallelism over data-parallel ranks (etp x ep = m tp, m > 1):
  /// the layer's group is m consecutive data-parallel replicas' tensor-
  /// parallel groups (Megatron-LM's tp-ep group), and it runs over the m
  /// replicas' microbatches as one of m times the tokens, replica-major
  /// (each replica's routing, capacity and load-balancing loss its own:
  /// docs/expert-parallel.md). 1: the group is the tensor-parallel one.
  int64_t groupReplicas = 1;
  /// Megatron-LM's expert tensor-parallel size (etp) on an expert grid
  /// (expertRanks > 1): each expert split over that many ranks.
  int64_t expertTp = 1;
  /// Sequence parallelism's shards of the group's tokens
  /// (tensorParallelShard; not serialised: the layer's group's ranks when
  /// they split the sequence): the saved input and rstd hold shardRows of
  /// them, a rank's own tokens.
  int64_t sequenceShards = 1;
  /// The tokens the layer's tensors hold: the group's replicas'. A packed
  /// microbatch over m > 1 replicas is seen as Megatron-LM's router sees
  /// the m replicas' packed sequences: a batch of m sequences of its rows
  /// (every replica's has as many: TokenShape::replicaTokens).
  TokenShape group(TokenShape t) const {
    if (groupReplicas == 1)
      return t;
    if (t.cuSeqlens)
      return {groupReplicas, t.tokens(), nullptr, 0, false, t.replicaTokens};
    t.batch *= groupReplicas;
    return t;
  }
  /// The real tokens (not padding) of replica r of the group, whose tokens
  /// `group` holds (group() of a replica's): sequence parallelism's and the
  /// group's padding are no token of the router's (MoeCapacity.h).
  int64_t realTokens(const TokenShape &group, int64_t r) const {
    const int64_t rows = group.tokens() / groupReplicas;
    if (group.replicaTokens && groupReplicas > 1)
      return std::clamp<int64_t>(group.replicaTokens[r], 0, rows);
    return group.lossRows() / groupReplicas;
  }
  /// The experts a rank holds (their slots in its parameters).
  int64_t localExperts() const { return experts / expertRanks; }
  int64_t fc1Width() const { return act == Activation::Swiglu ? 2 * ffn : ffn; }

  /// Megatron-LM's get_capacity(tokens x topk, experts, factor), computed
  /// in double in its order: ceil(tokens x topk / experts x factor), at
  /// most `tokens`. An expert takes a token once, so a larger capacity
  /// drops nothing either (and a huge factor's would overflow an int64_t).
  int64_t capacityOf(int64_t tokens) const {
    const double capacity =
        std::ceil(double(tokens * topk) / double(experts) * capacityFactor);
    return capacity < double(tokens) ? int64_t(capacity) : tokens;
  }
  /// The experts whose routed rows a rank keeps (their inputs, fc1 and fc2
  /// outputs and gradients): under the allgather dispatcher its own (on an
  /// expert grid, a part: Megatron-LM's permutes the gathered tokens to
  /// its local experts' alone); under the alltoall dispatcher all of them,
  /// whose rows of this rank's tokens it sends to their ranks.
  int64_t heldExperts() const { return allToAll ? experts : localExperts(); }
  /// The most routed rows those experts take from the group's tokens
  /// `group` (group() of a replica's), whatever the routing: a token
  /// chooses at most min(topk, heldExperts) of them, and with a capacity
  /// factor each keeps at most its capacity of every block's tokens
  /// (MoeCapacity.h), which adds up to the capacity of all the tokens plus
  /// at most one row a block (each block's capacity is rounded up; one
  /// more for the double's rounding). Dropless routing may send every
  /// token to this rank's experts, so a static buffer needs room for that.
  /// (`held`: of that many experts instead.)
  int64_t heldRows(const TokenShape &group, int64_t held = 0) const {
    const int64_t T = group.tokens();
    if (held <= 0)
      held = heldExperts();
    const int64_t dropless = T * std::min(topk, held);
    if (capacityFactor <= 0)
      return dropless;
    const int64_t blocks = groupReplicas * std::max<int64_t>(1, capacityBlocks);
    const int64_t perExpert = std::min(T, capacityOf(T) + blocks + 1);
    return std::min(dropless, held * perExpert);
  }

  std::vector<ParamSpec> params(int64_t numLayers) const {
    std::vector<ParamSpec> p = {
        {"pre_mlp_layernorm.weight", {hidden}, Init::Ones},
        {"mlp.router.weight", {experts, hidden}, Init::Normal, kInitStd},
    };
    // Grouped experts (TEGroupedMLP), as Megatron's hybrid MoE spec builds
    // them: weight<e> per expert, over tensor-parallel ranks fc1
    // column-parallel ([gate; up] cut section by section) and fc2
    // row-parallel, as the dense MLP's.
    const std::vector<int64_t> fc1Sections = fc1SectionsOf(act, ffn);
    for (int64_t e = 0; e < experts; ++e) {
      std::string id = std::to_string(e);
      p.push_back(splitRows({"mlp.experts.linear_fc1.weight" + id,
                             {fc1Width(), hidden},
                             Init::Normal,
                             kInitStd},
                            fc1Sections));
      p.push_back(splitColumns({"mlp.experts.linear_fc2.weight" + id,
                                {hidden, ffn},
                                Init::Normal,
                                scaledStd(numLayers)}));
      if (expertRanks > 1)
        for (size_t w = p.size() - 2; w < p.size(); ++w) {
          p[w].expertRank = e / localExperts();
          p[w].expertRanks = expertRanks;
          p[w].expertTp = expertTp;
        }
    }
    return p;
  }
  /// Room for the routed rows of the held experts (heldRows): per row its
  /// gathered input, fc1 output, activation, fc2 output, and the fc1/fc2
  /// output gradients for the weight pass. Plus x, xn, rstd, router
  /// probabilities, chosen experts and weights, every routed row's slot,
  /// the kept and the routed token counts and the aux loss.
  /// Sized for the group's tokens (groupReplicas replicas', each with its
  /// own routed counts and aux loss); `t` is a replica's microbatch.
  int64_t savedFloats(const TokenShape &t, Target = Target::Cpu) const {
    const TokenShape g = group(t);
    const int64_t T = g.tokens(), R = T * topk, L = heldRows(g);
    return shardRows(g, sequenceShards) * (hidden + 1) +
           T * (hidden + experts + 2 * topk) + (1 + groupReplicas) * experts +
           groupReplicas + L * (hidden + 2 * fc1Width() + ffn + 2 * hidden) +
           R /*row map*/;
  }
  /// Of savedFloats, what selective recompute of `modules` drops:
  /// layernorm the normed input, moe_act the routed rows' activations, moe
  /// (which drops moe_act's too: the pass names both) everything the router
  /// and the experts keep -- probabilities, choices, weights, counts, the
  /// aux loss, the routed rows' inputs, fc1 and fc2 outputs and the row map.
  int64_t recomputedFloats(const TokenShape &replica,
                           RecomputeModuleSet modules) const {
    const TokenShape t = group(replica);
    const int64_t L = heldRows(t); // the held routed rows
    auto drops = [&](RecomputeModule m) {
      return (modules & moduleBit(m)) != 0;
    };
    return droppedFloats(t, modules, RecomputeModule::LayerNorm, hidden) +
           (drops(RecomputeModule::MoeAct) ? L * ffn : 0) +
           (drops(RecomputeModule::Moe)
                ? t.tokens() * (experts + 3 * topk) +
                      L * (hidden + fc1Width() + hidden) +
                      (1 + groupReplicas) * experts + groupReplicas
                : 0);
  }
  /// The router's and the routed rows' scratch; the alltoall dispatcher's
  /// send and receive buffers after it (allToAllBuffers), or over data-
  /// parallel replicas the allgather dispatcher's weighted sums of the
  /// group's tokens (more rows than the layer's output holds).
  int64_t workspaceFloats(const TokenShape &t, Target = Target::Cpu) const {
    const int64_t T = group(t).tokens();
    return routingWorkspaceFloats(t) +
           (allToAll            ? 2 * exchangedRows(group(t)) * hidden
            : groupReplicas > 1 ? T * hidden
                                : 0);
  }
  /// The most rows one exchange of the alltoall dispatcher moves in or out
  /// of a rank (its send and receive buffers' rows): a rank's tokens'
  /// routed rows, each to the etp ranks of its expert's (etp x T / (ep x
  /// etp) x topk), or the rows of its own experts (heldRows of
  /// localExperts), whichever is more.
  int64_t exchangedRows(const TokenShape &group) const {
    const int64_t own = (group.tokens() * topk + expertRanks - 1) / expertRanks;
    return std::max(own, heldRows(group, localExperts()));
  }
  int64_t routingWorkspaceFloats(const TokenShape &t) const {
    const TokenShape g = group(t);
    const int64_t T = g.tokens();
    return T * (2 * experts + topk + hidden) + heldRows(g) * (hidden + ffn);
  }
};

struct EmbeddingShape {
  /// f(name, field) for each field (forEachField).
  template <class Self, class F> static void fields(Self &s, F &&f) {
    f("vocab", s.vocab);
    f("hidden", s.hidden);
  }
  int64_t vocab, hidden;
  std::vector<ParamSpec> params() const {
    return {embeddingTableParam(vocab, hidden)};
  }
  /// Tokens (as int32) and, after I, the output gradient for W.
  int64_t savedFloats(const TokenShape &t, Target = Target::Cpu) const {
    return t.tokens() * (1 + hidden);
  }
  int64_t workspaceFloats(const TokenShape &, Target = Target::Cpu) const {
    return 0;
  }
};

/// Final RMSNorm, output layer and cross-entropy.
struct HeadShape {
  /// f(name, field) for each field (forEachField).
  template <class Self, class F> static void fields(Self &s, F &&f) {
    f("vocab", s.vocab);
    f("hidden", s.hidden);
    f("tied", s.tied);
    f("loss_chunk", s.lossChunk);
  }
  int64_t vocab, hidden;
  bool tied = true;
  /// Rows the fused linear cross-entropy takes at a time (0: the whole
  /// microbatch's logits kept, Megatron's native loss).
  int64_t lossChunk = 0;
  /// Sequence parallelism's shards of the tokens (tensorParallelShard; not
  /// serialised): the saved input and rstd hold shardRows of them.
  int64_t sequenceShards = 1;
  std::vector<ParamSpec> params() const {
    std::vector<ParamSpec> p = {
        {"decoder.final_norm.weight", {hidden}, Init::Ones}};
    // A tied head shares the embedding table: it gets the embedding's name
    // (so the same initial values) and its gradient is summed with it.
    ParamSpec out = embeddingTableParam(vocab, hidden);
    if (!tied)
      out.name = "output_layer.weight";
    p.push_back(out);
    return p;
  }
  int64_t savedFloats(const TokenShape &t, Target = Target::Cpu) const {
    return lmLossSavedFloats(t, hidden, vocab, lossChunk, sequenceShards);
  }
  int64_t workspaceFloats(const TokenShape &t,
                          Target target = Target::Cpu) const {
    return lmLossWorkspaceFloats(t, hidden, target, vocab, lossChunk);
  }
};

/// The input of one multi-token-prediction depth (Megatron's
/// MultiTokenPredictionLayer up to its inner layers): the embedding of the
/// tokens `depth` places ahead (within each sequence; token 0 past its
/// end), normalised (enorm), and the previous depth's hidden states,
/// normalised (hnorm), concatenated [e | h] and projected to hidden
/// (eh_proj). The embedding table is the model's (shared, not a parameter
/// of the depth).
struct MtpInputShape {
  /// f(name, field) for each field (forEachField).
  template <class Self, class F> static void fields(Self &s, F &&f) {
    f("vocab", s.vocab);
    f("hidden", s.hidden);
    f("depth", s.depth);
    f("owns_table", s.ownsTable);
  }
  int64_t vocab, hidden, depth;
  /// The stage has no embedding table of its own (no embedding layer, an
  /// untied head): this depth carries the copy, under the embedding's name
  /// (same initial values; its gradient summed with the first stage's).
  bool ownsTable = false;
  /// Sequence parallelism's shards of the tokens (tensorParallelShard; not
  /// serialised): the previous hidden states and both rstds hold shardRows
  /// of them (the embedding rows are summed over the group first: whole).
  int64_t sequenceShards = 1;
  std::vector<ParamSpec> params() const {
    std::vector<ParamSpec> p = {
        {"enorm.weight", {hidden}, Init::Ones},
        {"hnorm.weight", {hidden}, Init::Ones},
        // Column-parallel (Megatron's eh_proj): each tensor-parallel rank
        // holds a tp-th of the output rows.
        splitRows(
            {"eh_proj.weight", {hidden, 2 * hidden}, Init::Normal, kInitStd})};
    if (ownsTable)
      p.push_back(embeddingTableParam(vocab, hidden));
    return p;
  }
  /// Shifted token ids, the embedding rows, their rstd, the previous
  /// hidden states and their rstd, the projection's input [e' | h'], and
  /// (after I) the projection's output gradient and the rows' gradient;
  /// the rstds and hidden states of the rank's rows (sequenceShards).
  int64_t savedFloats(const TokenShape &t, Target = Target::Cpu) const {
    int64_t T = t.tokens();
    return T * (1 + hidden + 2 * hidden + hidden + hidden) +
           shardRows(t, sequenceShards) * (1 + hidden + 1);
  }
  int64_t workspaceFloats(const TokenShape &t, Target = Target::Cpu) const {
    return t.tokens() * 3 * hidden;
  }
};

/// The output of one MTP depth: its final norm, the model's output layer
/// (shared) and the cross-entropy against the labels `depth` places ahead
/// (masked past each sequence's end), weighted by `lossWeight` =
/// mtp_loss_scaling_factor / depths in the objective.
struct MtpOutputShape {
  /// f(name, field) for each field (forEachField).
  template <class Self, class F> static void fields(Self &s, F &&f) {
    f("vocab", s.vocab);
    f("hidden", s.hidden);
    f("depth", s.depth);
    f("loss_weight", s.lossWeight);
    f("loss_chunk", s.lossChunk);
  }
  int64_t vocab, hidden, depth;
  double lossWeight = 0.1;
  /// As the head's.
  int64_t lossChunk = 0;
  /// Sequence parallelism's shards of the tokens (tensorParallelShard; not
  /// serialised): the saved input and rstd hold shardRows of them.
  int64_t sequenceShards = 1;
  std::vector<ParamSpec> params() const {
    return {{"final_layernorm.weight", {hidden}, Init::Ones}};
  }
  /// As the head's, with the shifted mask and labels.
  int64_t savedFloats(const TokenShape &t, Target = Target::Cpu) const {
    return lmLossSavedFloats(t, hidden, vocab, lossChunk, sequenceShards);
  }
  int64_t workspaceFloats(const TokenShape &t,
                          Target target = Target::Cpu) const {
    return lmLossWorkspaceFloats(t, hidden, target, vocab, lossChunk);
  }
};

/// Any layer's static shape; the alternatives are in LayerKind's order.
using LayerShape = std::variant<EmbeddingShape, MambaShape, AttentionShape,
                                MlpShape, MoeShape, HeadShape, MtpInputShape,
                                MtpOutputShape, GdnShape, MlaShape, DsaShape>;

inline LayerKind kindOf(const LayerShape &shape) {
  return LayerKind(shape.index());
}

/// A `kind` layer's shape with its fields value-initialised: what a reader
/// fills in with forEachField.
template <size_t... I>
LayerShape blankShapeOf(size_t kind, std::index_sequence<I...>) {
  LayerShape shape;
  ((kind == I ? (shape = std::variant_alternative_t<I, LayerShape>{}, 0) : 0),
   ...);
  return shape;
}
inline LayerShape blankShape(LayerKind kind) {
  return blankShapeOf(
      size_t(kind),
      std::make_index_sequence<std::variant_size_v<LayerShape>>());
}

/// Calls f(name, field) for every field of `shape` -- an int64_t, bool,
/// double or Activation, by reference -- with the name the manifest and
/// the IR spell it with, in a fixed order: the one list every writer and
/// reader of a shape goes through.
template <class Shape, class F> void forEachField(Shape &shape, F &&f) {
  std::visit([&](auto &s) { std::decay_t<decltype(s)>::fields(s, f); }, shape);
}

//===----------------------------------------------------------------------===//
// Shapes from the model's dimensions: what the kernel planner lowers and
// what the cost model counts, so the two cannot disagree on a parameter.
//===----------------------------------------------------------------------===//

inline Activation activationOf(const ModelDims &d) {
  if (d.activation == "gelu")
    return Activation::Gelu;
  if (d.activation == "swiglu")
    return Activation::Swiglu;
  return Activation::SquaredRelu;
}

inline MambaShape mambaShape(const ModelDims &d) {
  return {d.hidden,     d.mambaNumHeads,  d.mambaHeadDim,
          d.mambaState, d.mambaNumGroups, d.mambaConvWidth};
}
inline GdnShape gdnShape(const ModelDims &d) {
  return {d.hidden,        d.gdnNumKeyHeads,  d.gdnNumValueHeads,
          d.gdnKeyHeadDim, d.gdnValueHeadDim, d.gdnConvWidth};
}
inline AttentionShape attentionShape(const ModelDims &d, bool rope = false) {
  return {d.hidden, d.numHeads, d.numQueryGroups, d.kvChannels(), rope};
}
inline MlaShape mlaShape(const ModelDims &d) {
  return {d.hidden,    d.numHeads,        d.qLoraRank, d.kvLoraRank,
          d.qkHeadDim, d.qkPosEmbHeadDim, d.vHeadDim,  d.qkLayernorm};
}
/// mlaShape's inverse for the latent sizes: `m`'s written into `d` (its
/// hidden size and heads left as they are).
inline void setMlaDims(ModelDims &d, const MlaShape &m) {
  d.qLoraRank = m.qLoraRank;
  d.kvLoraRank = m.kvLoraRank;
  d.qkHeadDim = m.qkHeadDim;
  d.qkPosEmbHeadDim = m.posEmbDim;
  d.vHeadDim = m.vHeadDim;
  d.qkLayernorm = m.qkLayernorm;
}
inline DsaShape dsaShape(const ModelDims &d) {
  return {mlaShape(d), d.dsaIndexerNHeads, d.dsaIndexerHeadDim,
          d.dsaIndexerTopk};
}
inline MlpShape mlpShape(const ModelDims &d) {
  return {d.hidden, d.ffnHidden, activationOf(d)};
}
inline MoeShape moeShape(const ModelDims &d, double auxLossCoeff = 0.0) {
  return {d.hidden,  d.expertFfnHidden(), d.numExperts,
          d.moeTopK, activationOf(d),     auxLossCoeff};
}
inline EmbeddingShape embeddingShape(const ModelDims &d) {
  return {d.vocab, d.hidden};
}
/// `lossChunk`: HeadShape's.
inline HeadShape headShape(const ModelDims &d, int64_t lossChunk = 0) {
  return {d.vocab, d.hidden, d.tieEmbeddings, lossChunk};
}

inline int64_t numel(const std::vector<ParamSpec> &params) {
  int64_t n = 0;
  for (const ParamSpec &p : params)
    n += p.numel();
  return n;
}

template <class S, class = void> struct ScalesWithDepth : std::false_type {};
template <class S>
struct ScalesWithDepth<
    S, std::void_t<decltype(std::declval<const S &>().params(int64_t()))>>
    : std::true_type {};

/// A layer's parameters, names without the layer's prefix, in a model of
/// `numLayers` main layers (a decoder layer's output projections start
/// smaller in deeper models).
inline std::vector<ParamSpec> paramsOf(const LayerShape &shape,
                                       int64_t numLayers) {
  return std::visit(
      [&](const auto &s) {
        if constexpr (ScalesWithDepth<std::decay_t<decltype(s)>>::value)
          return s.params(numLayers);
        else
          return s.params();
      },
      shape);
}

/// Floats a layer saves of one microbatch of `tokens`, and the scratch its
/// kernels need, on `target`.
inline int64_t savedFloatsOf(const LayerShape &shape, const TokenShape &tokens,
                             Target target) {
  return std::visit(
      [&](const auto &s) { return s.savedFloats(tokens, target); }, shape);
}
/// The modules selective recompute drops of a layer of `kind` (none: a
/// kind it leaves alone, Mamba's among them: only full recompute
/// recomputes those).
inline RecomputeModuleSet selectiveModulesOf(LayerKind kind) {
  const RecomputeModuleSet norm = moduleBit(RecomputeModule::LayerNorm);
  switch (kind) {
  case LayerKind::Attention:
    return norm | moduleBit(RecomputeModule::CoreAttn);
  case LayerKind::Mlp:
    return norm | moduleBit(RecomputeModule::Mlp);
  case LayerKind::Moe:
    return norm | moduleBit(RecomputeModule::MoeAct) |
           moduleBit(RecomputeModule::Moe);
  case LayerKind::Gdn:
    return moduleBit(RecomputeModule::GdnNormOut);
  case LayerKind::Mla:
    return moduleBit(RecomputeModule::MlaUpProj);
  default:
    return 0;
  }
}
/// Of a layer's saved floats, what selective recompute of `modules` (of
/// selectiveModulesOf its kind) drops into the recompute buffer.
inline int64_t recomputedFloatsOf(const LayerShape &shape,
                                  const TokenShape &tokens,
                                  RecomputeModuleSet modules) {
  return std::visit(
      [&](const auto &s) -> int64_t {
        if constexpr (std::is_same_v<std::decay_t<decltype(s)>,
                                     AttentionShape> ||
                      std::is_same_v<std::decay_t<decltype(s)>, MlpShape> ||
                      std::is_same_v<std::decay_t<decltype(s)>, MoeShape> ||
                      std::is_same_v<std::decay_t<decltype(s)>, GdnShape> ||
                      std::is_same_v<std::decay_t<decltype(s)>, MlaShape>)
          return s.recomputedFloats(tokens, modules);
        else
          return 0;
      },
      shape);
}
inline int64_t workspaceFloatsOf(const LayerShape &shape,
                                 const TokenShape &tokens, Target target) {
  return std::visit(
      [&](const auto &s) { return s.workspaceFloats(tokens, target); }, shape);
}

} // namespace hypipe::rt

#endif
