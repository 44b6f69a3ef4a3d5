//===- Mtp.cpp - a multi-token prediction depth's kernels on the CPU ------===//
//
// What recipes/Mtp.h composes a depth's input from besides the embedding,
// linear and norm kernels: the tokens `shift` places ahead and a strided
// row copy. docs/model.md has the equations.
//
//===----------------------------------------------------------------------===//

#include "runtime/kernels/cpu/Kernels.h"
#include "runtime/kernels/cpu/Primitives.h"

#include <cstring>

namespace hypipe::rt::cpu {

void Kernels::tokensAhead(const TokenShape &t, int64_t shift,
                          const int32_t *tokens, int32_t *ids) {
  thread_local std::vector<int64_t> ahead;
  rowsAhead(t, shift, ahead);
  for (int64_t i = 0; i < t.tokens(); ++i)
    ids[i] = ahead[size_t(i)] < 0 ? 0 : tokens[ahead[size_t(i)]];
}

void Kernels::copyRows(int64_t T, int64_t n, float *dst, int64_t dstStride,
                       const float *src, int64_t srcStride) {
  for (int64_t i = 0; i < T; ++i)
    std::memcpy(dst + i * dstStride, src + i * srcStride, sizeof(float) * n);
}

} // namespace hypipe::rt::cpu
