//===- NcclLibrary.h - NCCL, loaded when a run first uses it --------------===//
//
// hypipe-run is not linked to NCCL: a cpu run, or a GPU run over mpi-staged,
// must start on a node that has no libnccl.so.2 (a single-GPU machine often
// keeps NCCL only inside a Python package). The NCCL transport loads the
// library the first time it is asked for (dlopen) and calls it through this
// table of entry points.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_COMM_NCCLLIBRARY_H
#define HYPIPE_RUNTIME_COMM_NCCLLIBRARY_H

#include <nccl.h>

#include <string>

namespace hypipe::rt {

// The NCCL functions hypipe calls; each becomes a member of NcclLibrary
// with the function's own type.
#define HYPIPE_NCCL_FUNCTIONS(X)                                               \
  X(ncclGetErrorString)                                                        \
  X(ncclGetUniqueId)                                                           \
  X(ncclCommInitRank)                                                          \
  X(ncclCommSplit)                                                             \
  X(ncclCommDestroy)                                                           \
  X(ncclCommAbort)                                                             \
  X(ncclCommGetAsyncError)                                                     \
  X(ncclGroupStart)                                                            \
  X(ncclGroupEnd)                                                              \
  X(ncclSend)                                                                  \
  X(ncclRecv)                                                                  \
  X(ncclAllReduce)                                                             \
  X(ncclReduceScatter)                                                         \
  X(ncclAllGather)

struct NcclLibrary {
#define HYPIPE_NCCL_MEMBER(name) decltype(&::name) name = nullptr;
  HYPIPE_NCCL_FUNCTIONS(HYPIPE_NCCL_MEMBER)
#undef HYPIPE_NCCL_MEMBER
};

/// NCCL's entry points, the library loaded on the first call. Throws
/// RuntimeError naming what the loader said when it is not found.
const NcclLibrary &ncclLibrary();

} // namespace hypipe::rt

#endif
