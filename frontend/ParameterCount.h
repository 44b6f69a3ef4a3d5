//===- ParameterCount.h - exact parameter counts per layer ----------------===//
//
// Counts of the trainable parameters each part of the model allocates,
// defined in docs/spec.md ("Parameter counts"). Linear layers have no bias;
// every pre-norm is an RMSNorm with one weight vector.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_FRONTEND_PARAMETERCOUNT_H
#define HYPIPE_FRONTEND_PARAMETERCOUNT_H

#include "frontend/ModelDims.h"

#include <optional>

namespace hypipe {

/// Parameters of one pattern layer, or nullopt for kinds not modelled yet
/// (`G`, `D`, `+`).
std::optional<int64_t> layerParameters(char symbol, const ModelDims &dims);
int64_t embeddingParameters(const ModelDims &dims);
/// Final norm plus the output layer (zero extra when tied to the embedding).
int64_t headParameters(const ModelDims &dims);
/// One MTP depth without its layers: two input norms, the 2H->H projection,
/// and its final norm.
int64_t mtpDepthParameters(const ModelDims &dims);

} // namespace hypipe

#endif
