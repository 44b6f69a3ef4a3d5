//===- ParameterCount.cpp -------------------------------------------------===//
#include "frontend/ParameterCount.h"

namespace hypipe {

std::optional<int64_t> layerParameters(char symbol, const ModelDims &d) {
  int64_t h = d.hidden;
  int64_t norm = h;
  switch (symbol) {
  case 'M': {
    int64_t inner = d.mambaInner();
    int64_t groupsState = d.mambaNumGroups * d.mambaState;
    int64_t inProj =
        h * (2 * inner + 2 * groupsState + d.mambaNumHeads); // z, x, B, C, dt
    int64_t convChannels = inner + 2 * groupsState;
    int64_t conv = convChannels * d.mambaConvWidth +
                   convChannels;           // depthwise weight + bias
    int64_t perHead = 3 * d.mambaNumHeads; // A_log, D, dt_bias
    int64_t gatedNorm = inner;
    int64_t outProj = inner * h;
    return norm + inProj + conv + perHead + gatedNorm + outProj;
  }
  case '*': {
    int64_t kv = d.kvChannels();
    int64_t qkv = h * (d.numHeads * kv + 2 * d.numQueryGroups * kv);
    int64_t out = d.numHeads * kv * h;
    return norm + qkv + out;
  }
  case '-': {
    int64_t up = h * d.ffnHidden * (d.activation == "swiglu" ? 2 : 1);
    return norm + up + d.ffnHidden * h;
  }
  case 'E': {
    int64_t f = d.expertFfnHidden();
    int64_t expert = h * f * (d.activation == "swiglu" ? 2 : 1) + f * h;
    return norm + h * d.numExperts + d.numExperts * expert;
  }
  default:
    return std::nullopt;
  }
}

int64_t embeddingParameters(const ModelDims &d) { return d.vocab * d.hidden; }

int64_t headParameters(const ModelDims &d) {
  return d.hidden + (d.tieEmbeddings ? 0 : d.vocab * d.hidden);
}

int64_t mtpDepthParameters(const ModelDims &d) {
  return 2 * d.hidden + 2 * d.hidden * d.hidden + d.hidden;
}

} // namespace hypipe
