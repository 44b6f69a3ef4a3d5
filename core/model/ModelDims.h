//===- ModelDims.h - model dimensions and their consistency rules ---------===//
//
// The one definition of what makes a set of model dimensions valid. The spec
// loader calls it (and points at the offending YAML key), the `hybrid.dims`
// attribute verifier calls it, and so do the layer-op verifiers.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_MODELDIMS_H
#define HYPIPE_CORE_MODELDIMS_H

#include <cstdint>
#include <optional>
#include <string>

namespace hypipe {

/// Megatron-LM's padded vocabulary (_vocab_size_with_padding): `vocab`
/// rounded up to a multiple of `divisor` x `tp`
/// (--make-vocab-size-divisible-by, 128 by default), so every
/// tensor-parallel rank holds as many rows; the padded rows are trained
/// parameters whose logits take part in the softmax.
inline int64_t paddedVocabSize(int64_t vocab, int64_t divisor, int64_t tp) {
  const int64_t multiple = divisor * tp;
  return (vocab + multiple - 1) / multiple * multiple;
}

struct ModelDims {
  int64_t hidden = 256;
  int64_t ffnHidden = 1024;
  int64_t numHeads = 4;
  int64_t numQueryGroups = 4;
  int64_t mambaState = 16;
  int64_t mambaNumHeads = 8;
  int64_t mambaHeadDim = 64;
  int64_t mambaNumGroups = 1;
  int64_t mambaConvWidth = 4;
  /// Gated DeltaNet ('G'), Megatron-LM's defaults (Qwen3-Next's sizes).
  int64_t gdnNumKeyHeads = 16;
  int64_t gdnNumValueHeads = 32;
  int64_t gdnKeyHeadDim = 128;
  int64_t gdnValueHeadDim = 128;
  int64_t gdnConvWidth = 4;
  int64_t numExperts = 0;
  int64_t moeTopK = 0;
  int64_t moeFfnHidden = 0; // 0: same as ffnHidden
  /// The embedding's and the output layer's rows: model.vocab_size padded
  /// (paddedVocabSize) once the spec is loaded.
  int64_t vocab = 256;
  bool tieEmbeddings = true;
  std::string activation = "squared_relu";
  /// Multi-latent attention ('+'), with Megatron-LM's command-line defaults
  /// and its names: q_lora_rank 0 is Megatron's None (queries straight from
  /// the normed input through linear_q_proj), qk_layernorm the RMSNorms of
  /// the two latents.
  int64_t qLoraRank = 0;
  int64_t kvLoraRank = 32;
  int64_t qkHeadDim = 128;
  int64_t qkPosEmbHeadDim = 64;
  int64_t vHeadDim = 128;
  bool qkLayernorm = false;
  /// DeepSeek sparse attention ('D', an MLA layer with an indexer):
  /// Megatron-LM's dsa_indexer_n_heads, dsa_indexer_head_dim and
  /// dsa_indexer_topk. 0 is Megatron's None: it has no default, and a D
  /// layer needs each set (checkLayerKindDims).
  int64_t dsaIndexerNHeads = 0;
  int64_t dsaIndexerHeadDim = 0;
  int64_t dsaIndexerTopk = 0;

  int64_t kvChannels() const { return numHeads > 0 ? hidden / numHeads : 0; }
  int64_t mambaInner() const { return mambaNumHeads * mambaHeadDim; }
  /// An MLA query's and key's width per head: the content part and the
  /// rotary part.
  int64_t mlaQkDim() const { return qkHeadDim + qkPosEmbHeadDim; }
  int64_t gdnKeyWidth() const { return gdnNumKeyHeads * gdnKeyHeadDim; }
  int64_t gdnValueWidth() const { return gdnNumValueHeads * gdnValueHeadDim; }
  int64_t expertFfnHidden() const {
    return moeFfnHidden > 0 ? moeFfnHidden : ffnHidden;
  }
};

/// A rule a set of dimensions breaks. `field` is the spec key (under
/// `model:`) that should change; `help` says how.
struct DimsProblem {
  std::string field;
  std::string message;
  std::string help;
  /// The `#hybrid.dims` invariant it breaks (`dims_c0` ... `dims_c7`, as
  /// HybridAttrs.td lists them); empty for a layer kind's own check.
  std::string label;
};

/// Checks the invariants dims_c0-dims_c7 of `#hybrid.dims` (HybridAttrs.td),
/// in order: dims_c0 every size within its bound (SizeBounds.h), the Mamba
/// inner width at most 2^18 and every weight matrix at most 2^36 elements,
/// then the widths, attention, Mamba, MoE, the activation and MLA's sizes.
std::optional<DimsProblem> checkModelDims(const ModelDims &dims);

/// Checks that `dims` defines layer kind `symbol` (a pattern character):
/// e.g. `E` needs `num_experts > 0`.
std::optional<DimsProblem> checkLayerKindDims(char symbol,
                                              const ModelDims &dims);

} // namespace hypipe

#endif
