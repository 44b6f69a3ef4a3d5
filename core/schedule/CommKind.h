//===- CommKind.h - which transport moves a run's tensors -----------------===//
//
// The names of `--comm` and the spec's `parallel.comm`: the runtime picks
// its Transport by it (runtime/comm/Transport.h) and the simulator its
// model of how transfers queue (nccl: an in-order stream per direction of
// each pair of ranks).
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_SCHEDULE_COMMKIND_H
#define HYPIPE_CORE_SCHEDULE_COMMKIND_H

#include <array>
#include <optional>
#include <string_view>

namespace hypipe::schedule {

enum class CommKind {
  /// nccl when every rank has its own GPU, mpi-staged when ranks share
  /// one, mpi on the cpu target.
  Auto,
  /// MPI on host memory.
  Mpi,
  /// MPI through pinned host staging buffers: any number of ranks on one
  /// GPU (on the cpu target, its device is host memory).
  MpiStaged,
  /// CUDA IPC between ranks of one node (named, not built: docs/cuda.md).
  CudaIpc,
  /// NCCL, one rank per GPU.
  Nccl,
};

inline constexpr std::array<std::pair<std::string_view, CommKind>, 5>
    kCommKinds = {{{"auto", CommKind::Auto},
                   {"mpi", CommKind::Mpi},
                   {"mpi-staged", CommKind::MpiStaged},
                   {"cuda-ipc", CommKind::CudaIpc},
                   {"nccl", CommKind::Nccl}}};

inline std::optional<CommKind> parseCommKind(std::string_view name) {
  for (auto [text, kind] : kCommKinds)
    if (text == name)
      return kind;
  return std::nullopt;
}

inline std::string_view commKindName(CommKind kind) {
  for (auto [text, k] : kCommKinds)
    if (k == kind)
      return text;
  return "auto";
}

/// "auto, mpi, mpi-staged, cuda-ipc or nccl", for messages.
inline constexpr std::string_view kCommKindList =
    "auto, mpi, mpi-staged, cuda-ipc or nccl";

} // namespace hypipe::schedule

#endif
