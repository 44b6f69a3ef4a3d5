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
  int64_t vocab = 256;
  bool tieEmbeddings = true;
  std::string activation = "squared_relu";

  int64_t kvChannels() const { return numHeads > 0 ? hidden / numHeads : 0; }
  int64_t mambaInner() const { return mambaNumHeads * mambaHeadDim; }
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
  /// The `#hybrid.dims` invariant it breaks (`dims_c0` ... `dims_c6`, as
  /// HybridAttrs.td lists them); empty for a layer kind's own check.
  std::string label;
};

/// Checks the invariants dims_c0-dims_c6 of `#hybrid.dims` (HybridAttrs.td),
/// in order: dims_c0 every size within its bound (SizeBounds.h), the Mamba
/// inner width at most 2^18 and every weight matrix at most 2^36 elements,
/// then the widths, attention, Mamba, MoE and the activation.
std::optional<DimsProblem> checkModelDims(const ModelDims &dims);

/// Checks that `dims` defines layer kind `symbol` (a pattern character):
/// e.g. `E` needs `num_experts > 0`.
std::optional<DimsProblem> checkLayerKindDims(char symbol,
                                              const ModelDims &dims);

} // namespace hypipe

#endif
