//===- Mtp.cu - a multi-token prediction depth's kernels on the GPU -------===//
//
// What recipes/Mtp.h composes a depth's input from besides the embedding,
// linear and norm kernels (cpu/Mtp.cpp's, on the stream): the tokens
// `shift` places ahead and a strided row copy. docs/model.md has the
// equations.
//
//===----------------------------------------------------------------------===//

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/cuda/Primitives.cuh"

namespace hypipe::rt::cuda {
namespace {

/// ids[i] = the token `shift` rows ahead of row i in its sequence, 0 past
/// its end (Megatron's roll_tensor with its zero fill, per sample).
__global__ void tokensAheadKernel(int64_t T, Seqs seqs, int shift,
                                  const int32_t *tokens, int32_t *ids) {
  const int64_t row = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= T)
    return;
  const int ahead = seqs.rowAhead(int(row), shift);
  ids[row] = ahead < 0 ? 0 : tokens[ahead];
}

} // namespace

void Kernels::tokensAhead(const Tokens &t, int64_t shift, const int32_t *tokens,
                          int32_t *ids) {
  const int64_t T = t.tokens();
  if (T == 0)
    return;
  tokensAheadKernel<<<blocksFor(T), 256, 0, stream()>>>(
      T, seqsOf(t), int(shift), tokens, ids);
  launched("MTP tokens ahead");
}

void Kernels::copyRows(int64_t T, int64_t n, float *dst, int64_t dstStride,
                       const float *src, int64_t srcStride) {
  if (T == 0 || n == 0)
    return;
  check(cudaMemcpy2DAsync(dst, sizeof(float) * dstStride, src,
                          sizeof(float) * srcStride, sizeof(float) * n,
                          size_t(T), cudaMemcpyDeviceToDevice, stream()),
        "row copy");
}

} // namespace hypipe::rt::cuda
