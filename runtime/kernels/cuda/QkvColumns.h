//===- QkvColumns.h - where a qkv column goes when q, k and v are split ---===//
//
// Megatron's linear_qkv writes each row as [q heads of group 0 | k_0 | v_0 |
// q heads of group 1 | k_1 | v_1 | ...]; cuDNN's fused attention takes Q
// [T, heads, D] and K, V [T, groups, D]. One mapping for the split and join
// kernels (Attention.cu) and the host test that holds it to the hand-written
// kernels' offsets. Plain C++, callable from device code.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_CUDA_QKVCOLUMNS_H
#define HYPIPE_RUNTIME_KERNELS_CUDA_QKVCOLUMNS_H

#ifdef __CUDACC__
#define HYPIPE_HOST_DEVICE __host__ __device__
#else
#define HYPIPE_HOST_DEVICE
#endif

namespace hypipe::rt::cuda {

/// Column `col` of a qkv row is element `d` of query head `head` (which 0),
/// or of group `head`'s key (1) or value (2).
struct QkvColumn {
  int which, head, d;
};

HYPIPE_HOST_DEVICE inline QkvColumn qkvColumn(int heads, int groups,
                                              int headDim, int col) {
  const int qpg = heads / groups, perGroup = (qpg + 2) * headDim;
  const int g = col / perGroup, j = (col % perGroup) / headDim,
            d = col % headDim;
  if (j < qpg)
    return {0, g * qpg + j, d};
  return {j - qpg + 1, g, d};
}

} // namespace hypipe::rt::cuda

#endif
