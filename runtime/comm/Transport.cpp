//===- Transport.cpp - MPI transports, direct and staged, and the choice --===//

#include "runtime/comm/Transport.h"

#include "core/numeric/Bf16.h"
#include "runtime/formats/RuntimeError.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace hypipe::rt {

void Transport::waitAll(std::vector<Request> &requests) {
  if (testAll(requests))
    return;
  // Named by the first operation still pending: the peer and its host.
  std::string what = describe(requests.front());
  if (requests.size() > 1)
    what += fmt::format(" (and {} more)", requests.size() - 1);
  comm.poll([&] { return testAll(requests); }, what);
}

namespace {
[[noreturn]] void noExpertGroups(const Transport &t, const char *what) {
  throw RuntimeError(
      fmt::format("error: the {} transport runs no {} over an expert grid "
                  "spread over data-parallel replicas\nhelp: use --comm mpi "
                  "or mpi-staged, or an expert grid inside the tensor-parallel "
                  "group (etp x ep = tp)",
                  schedule::commKindName(t.kind()), what));
}
} // namespace

Transport::Request Transport::iexpertParallel(CollectiveKind kind, void *data,
                                              int64_t count, DType type) {
  if (comm.expertReplicas() > 1)
    noExpertGroups(*this, "collective");
  return itensorParallel(kind, data, count, type);
}

Transport::Request
Transport::iallToAllExpert(const void *send,
                           const std::vector<int64_t> &sendCounts, void *recv,
                           const std::vector<int64_t> &recvCounts, DType type) {
  if (comm.expertReplicas() > 1)
    noExpertGroups(*this, "all-to-all");
  return iallToAllTp(send, sendCounts, recv, recvCounts, type);
}

Transport::Request Transport::iallreduceExpertDp(void *data, int64_t count,
                                                 DType type) {
  if (comm.expertReplicas() > 1)
    noExpertGroups(*this, "expert-data-parallel sum");
  return iallreduceDp(data, count, type);
}

Transport::Request Transport::iexpertShard(ExpertShardGroup, CollectiveKind,
                                           void *, int64_t, DType) {
  noExpertGroups(*this, "distributed optimizer");
}

std::string Transport::rankText(int rank) const {
  return fmt::format("rank {} on host {}", rank, comm.hostOf(rank));
}

std::string Transport::dpPeersText() const {
  std::string out;
  for (int64_t d = 0; d < comm.dpSize(); ++d)
    if (d != comm.dpRank())
      out += (out.empty() ? "" : ", ") +
             rankText(comm.worldRankAt(comm.ppRank(), d, comm.tpRank()));
  return out;
}

std::string Transport::tpPeersText() const {
  std::string out;
  for (int64_t t = 0; t < comm.tpSize(); ++t)
    if (t != comm.tpRank())
      out += (out.empty() ? "" : ", ") +
             rankText(comm.worldRankAt(comm.ppRank(), comm.dpRank(), t));
  return out;
}

std::string Transport::tiedSumText(const std::vector<int64_t> &ppRanks) const {
  std::string out;
  for (int64_t pp : ppRanks)
    if (pp != comm.ppRank())
      out += (out.empty() ? "" : ", ") + rankText(comm.worldRankOf(pp));
  return "the tied-parameter sum with " + out;
}

bool Transport::testAll(std::vector<Request> &requests) {
  requests.erase(std::remove_if(requests.begin(), requests.end(),
                                [&](Request r) { return test(r); }),
                 requests.end());
  return requests.empty();
}

#ifndef HYPIPE_HAVE_NCCL
std::string ncclUnavailable() { return "this hypipe was built without NCCL"; }
std::unique_ptr<Transport> makeNcclTransport(Comm &, Device &) {
  throw RuntimeError("error: --comm nccl: this hypipe was built without "
                     "NCCL\nhelp: rebuild with NCCL at /usr/local/cuda, or "
                     "use --comm mpi-staged");
}
#endif

CommKind resolveComm(CommKind requested, bool cudaTarget, int localRanks,
                     int gpus) {
  const bool sharing = localRanks > gpus;
  switch (requested) {
  case CommKind::Auto:
    if (!cudaTarget)
      return CommKind::Mpi;
    // Without NCCL on the node a run still starts: mpi-staged moves the
    // same tensors through host buffers.
    return sharing || !ncclUnavailable().empty() ? CommKind::MpiStaged
                                                 : CommKind::Nccl;
  case CommKind::Mpi:
    if (cudaTarget)
      throw RuntimeError(
          "error: --comm mpi sends host memory, and a cuda artifact keeps its "
          "tensors on the GPU\nhelp: use --comm mpi-staged (through host "
          "buffers) or nccl (one GPU per rank), or leave --comm auto");
    return requested;
  case CommKind::MpiStaged:
    return requested;
  case CommKind::CudaIpc:
    throw RuntimeError(
        "error: --comm cuda-ipc is named but not built in this version "
        "(docs/cuda.md says why)\nhelp: use --comm mpi-staged for ranks that "
        "share a GPU, nccl for one GPU per rank");
  case CommKind::Nccl:
    if (!cudaTarget)
      throw RuntimeError(
          "error: --comm nccl moves GPU memory, and this artifact's target is "
          "cpu\nhelp: use --comm mpi (or auto) for a cpu artifact");
    if (std::string why = ncclUnavailable(); !why.empty())
      throw RuntimeError(fmt::format(
          "error: --comm nccl: {}\nhelp: put the directory that holds "
          "libnccl.so.2 on LD_LIBRARY_PATH (a pip install keeps it in "
          "site-packages/nvidia/nccl/lib; a build without NCCL needs NCCL at "
          "/usr/local/cuda), or use --comm mpi-staged",
          why));
    if (gpus == 0)
      throw RuntimeError(
          "error: --comm nccl needs a GPU per rank, and this node sees none\n"
          "help: run on GPU nodes (check CUDA_VISIBLE_DEVICES), or compile "
          "the spec with --target cpu");
    if (sharing)
      throw RuntimeError(fmt::format(
          "error: --comm nccl needs a GPU per rank: this node runs {} rank{} "
          "and sees {} GPU{} (NCCL refuses two ranks of a communicator on "
          "one GPU)\nhelp: launch at most {} rank{} a node, or use --comm "
          "mpi-staged to share GPUs",
          localRanks, localRanks == 1 ? "" : "s", gpus, gpus == 1 ? "" : "s",
          gpus, gpus == 1 ? "" : "s"));
    return requested;
  }
  return requested;
}

namespace {

int64_t elementBytes(DType type) { return type == DType::BF16 ? 2 : 4; }

MPI_Datatype mpiType(DType type) {
  return type == DType::BF16 ? MPI_UINT16_T : MPI_FLOAT;
}

/// MPI has no bfloat16: sums of bf16 payloads add in fp32 and round each
/// partial sum to bf16, as NCCL's bf16 reductions do.
void sumBf16(void *in, void *inout, int *len, MPI_Datatype *) {
  const auto *a = static_cast<const uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = bf16::fromFloat(bf16::toFloat(a[i]) + bf16::toFloat(b[i]));
}

/// A transfer of MpiTransport in flight.
struct MpiOp {
  MPI_Request request = MPI_REQUEST_NULL;
  /// The staging buffer it holds (returned to the pool when complete).
  void *stage = nullptr;
  int64_t stageBytes = 0;
  /// What completes it once MPI has: the copy back to the device.
  std::function<void()> done;
  std::string what; ///< for describe()
};

/// Mpi (device == host memory, no staging) and MpiStaged (every transfer
/// through a pinned host buffer, copied to and from the device).
class MpiTransport final : public PendingTransport<MpiOp> {
  using Op = MpiOp;
  /// A communicator with this rank's place in it and its size.
  struct GroupOf {
    MPI_Comm comm;
    int64_t rank, size;
  };

public:
  MpiTransport(Comm &comm, Device &device, bool staged)
      : PendingTransport<MpiOp>(comm), device(device), staged(staged) {
    if (comm.distributed())
      MPI_Op_create(&sumBf16, 1, &bf16Sum);
    const char *ordered = std::getenv("HYPIPE_ORDERED_LINKS");
    orderedLinks = ordered && std::string(ordered) == "1";
  }
  ~MpiTransport() override {
    for (MPI_Comm &c : groups)
      MPI_Comm_free(&c);
    if (bf16Sum != MPI_OP_NULL)
      MPI_Op_free(&bf16Sum);
    for (auto &[bytes, p] : freeStages)
      device.releaseHost(p);
    for (auto &[id, op] : ops)
      if (op.stage)
        device.releaseHost(op.stage);
  }

  CommKind kind() const override {
    return staged ? CommKind::MpiStaged : CommKind::Mpi;
  }
  bool matchesByOrder() const override { return orderedLinks; }

  Request isend(const void *data, int64_t count, DType type, int peer,
                int tag) override {
    Op op;
    const void *from = data;
    if (staged) {
      op.stage = stageOut(data, count * elementBytes(type), op);
      from = op.stage;
    }
    MPI_Isend(from, mpiCount(count), mpiType(type), peer,
              orderedLinks ? 0 : tag, comm.world(), &op.request);
    op.what = "sending to " + rankText(peer);
    return start(std::move(op));
  }

  Request irecv(void *data, int64_t count, DType type, int peer,
                int tag) override {
    Op op;
    void *into = data;
    if (staged) {
      const int64_t bytes = count * elementBytes(type);
      into = op.stage = takeStage(bytes, op);
      op.done = [this, data, stage = op.stage, bytes] {
        device.toDevice(data, stage, bytes);
      };
    }
    MPI_Irecv(into, mpiCount(count), mpiType(type), peer,
              orderedLinks ? 0 : tag, comm.world(), &op.request);
    op.what = "receiving from " + rankText(peer);
    return start(std::move(op));
  }

  Request iallreduceDp(void *data, int64_t count, DType type) override {
    return allreduceOn(comm.dpGroup(), data, count, type,
                       "the data-parallel all-reduce with " + dpPeersText());
  }

  Request ireduceScatterDp(void *data, int64_t block, DType type) override {
    return reduceScatterOn(
        {comm.dpGroup(), comm.dpRank(), comm.dpSize()}, data, block, type,
        "the data-parallel reduce-scatter with " + dpPeersText());
  }

  Request iallgatherDp(void *data, int64_t block, DType type) override {
    return allgatherOn({comm.dpGroup(), comm.dpRank(), comm.dpSize()}, data,
                       block, type,
                       "the data-parallel all-gather with " + dpPeersText());
  }

  Request itensorParallel(CollectiveKind kind, void *data, int64_t count,
                          DType type) override {
    return collectiveOn(
        {comm.tpGroup(), comm.tpRank(), comm.tpSize()}, kind, data, count, type,
        std::string("the tensor-parallel ") + collectiveKindName(kind) +
            " with " + tpPeersText());
  }

  Request iallToAllTp(const void *send, const std::vector<int64_t> &sendCounts,
                      void *recv, const std::vector<int64_t> &recvCounts,
                      DType type) override {
    return allToAllOn({comm.tpGroup(), comm.tpRank(), comm.tpSize()}, send,
                      sendCounts, recv, recvCounts, type,
                      "the tensor-parallel all_to_all with " + tpPeersText());
  }

  Request iexpertParallel(CollectiveKind kind, void *data, int64_t count,
                          DType type) override {
    return collectiveOn(
        {comm.expertGroup(), comm.expertRank(), comm.expertSize()}, kind, data,
        count, type,
        std::string("the expert tp-ep group's ") + collectiveKindName(kind));
  }

  Request iallToAllExpert(const void *send,
                          const std::vector<int64_t> &sendCounts, void *recv,
                          const std::vector<int64_t> &recvCounts,
                          DType type) override {
    return allToAllOn(
        {comm.expertGroup(), comm.expertRank(), comm.expertSize()}, send,
        sendCounts, recv, recvCounts, type,
        "the expert tp-ep group's all_to_all");
  }

  Request iallreduceExpertDp(void *data, int64_t count, DType type) override {
    return allreduceOn(comm.expertDpGroup(), data, count, type,
                       "the expert-data-parallel all-reduce");
  }

  Request iexpertShard(ExpertShardGroup group, CollectiveKind kind, void *data,
                       int64_t block, DType type) override {
    const bool replicas = group == ExpertShardGroup::Replicas;
    const GroupOf g =
        replicas ? GroupOf{comm.expertReplicaGroup(), comm.expertReplicaRank(),
                           comm.expertReplicas()}
                 : GroupOf{comm.expertDpGroup(), comm.expertDpRank(),
                           comm.expertDpSize()};
    std::string what = fmt::format("the distributed optimizer's {} over the {}",
                                   collectiveKindName(kind),
                                   replicas ? "replicas of the expert grid"
                                            : "expert-data-parallel group");
    if (kind == CollectiveKind::ReduceScatter)
      return reduceScatterOn(g, data, block, type, std::move(what));
    if (kind == CollectiveKind::AllGather)
      return allgatherOn(g, data, block, type, std::move(what));
    throw RuntimeError(std::string("error: ") + what +
                       " is not run\nhelp: "
                       "report this hypipe bug");
  }

private:
  Request collectiveOn(GroupOf tp, CollectiveKind kind, void *data,
                       int64_t count, DType type, std::string what) {
    switch (kind) {
    case CollectiveKind::AllReduce:
      return allreduceOn(tp.comm, data, count, type, std::move(what));
    case CollectiveKind::AllReduceMax:
      return allreduceOn(tp.comm, data, count, type, std::move(what), MPI_MAX);
    case CollectiveKind::AllGather:
      return allgatherOn(tp, data, count / tp.size, type, std::move(what));
    case CollectiveKind::ReduceScatter:
      return reduceScatterOn(tp, data, count / tp.size, type, std::move(what));
    case CollectiveKind::AllToAll:
      break; // iallToAllTp: its counts are not one block a rank
    }
    throw RuntimeError(std::string("error: the tensor-parallel ") +
                       collectiveKindName(kind) +
                       " needs its counts\nhelp: this is a bug in hypipe; "
                       "please report it");
  }

  Request allToAllOn(GroupOf tp, const void *send,
                     const std::vector<int64_t> &sendCounts, void *recv,
                     const std::vector<int64_t> &recvCounts, DType type,
                     std::string what) {
    // MPI reads the counts and displacements until it completes.
    struct Counts {
      std::vector<int> send, sendAt, recv, recvAt;
    };
    auto c = std::make_shared<Counts>();
    int64_t sendTotal = 0, recvTotal = 0;
    for (int64_t p = 0; p < tp.size; ++p) {
      c->sendAt.push_back(mpiCount(sendTotal));
      c->send.push_back(mpiCount(sendCounts.at(size_t(p))));
      sendTotal += sendCounts[size_t(p)];
      c->recvAt.push_back(mpiCount(recvTotal));
      c->recv.push_back(mpiCount(recvCounts.at(size_t(p))));
      recvTotal += recvCounts[size_t(p)];
    }
    Op op;
    op.what = std::move(what);
    const void *from = send;
    void *into = recv;
    if (staged) {
      // One staging buffer: the send blocks, then the receive blocks.
      const int64_t sendBytes = sendTotal * elementBytes(type),
                    recvBytes = recvTotal * elementBytes(type);
      op.stage = takeStage(sendBytes + recvBytes, op);
      device.toHost(op.stage, send, sendBytes);
      from = op.stage;
      into = static_cast<char *>(op.stage) + sendBytes;
      op.done = [this, recv, into, recvBytes, c] {
        device.toDevice(recv, into, recvBytes);
      };
    } else {
      op.done = [c] {};
    }
    MPI_Ialltoallv(from, c->send.data(), c->sendAt.data(), mpiType(type), into,
                   c->recv.data(), c->recvAt.data(), mpiType(type), tp.comm,
                   &op.request);
    return start(std::move(op));
  }

public:
  Group makeGroup(const std::vector<int64_t> &ppRanks) override {
    if (!comm.distributed())
      return kNoGroup;
    const bool member = std::find(ppRanks.begin(), ppRanks.end(),
                                  comm.ppRank()) != ppRanks.end();
    MPI_Comm c;
    MPI_Comm_split(comm.pipelineGroup(), member ? 0 : MPI_UNDEFINED,
                   int(comm.ppRank()), &c);
    if (c == MPI_COMM_NULL)
      return kNoGroup;
    groups.push_back(c);
    groupWhat.push_back(tiedSumText(ppRanks));
    return Group(groups.size() - 1);
  }

  Request iallreduce(Group group, void *data, int64_t count,
                     DType type) override {
    if (group == kNoGroup)
      return start(Op{});
    return allreduceOn(groups.at(size_t(group)), data, count, type,
                       groupWhat.at(size_t(group)));
  }

protected:
  bool complete(Op &op) override {
    if (op.request != MPI_REQUEST_NULL) {
      int done = 0;
      MPI_Test(&op.request, &done, MPI_STATUS_IGNORE);
      if (!done)
        return false;
    }
    if (op.done)
      op.done();
    if (op.stage)
      freeStages.emplace(op.stageBytes, op.stage);
    return true;
  }

private:
  /// A pooled host buffer of at least `bytes` (the smallest that fits).
  void *takeStage(int64_t bytes, Op &op) {
    auto it = freeStages.lower_bound(bytes);
    if (it != freeStages.end()) {
      op.stageBytes = it->first;
      void *p = it->second;
      freeStages.erase(it);
      return p;
    }
    op.stageBytes = bytes;
    return device.allocateHost(bytes);
  }

  /// A staging buffer holding a copy of `bytes` of device memory at `data`
  /// (the copy waits for the kernels that write it).
  void *stageOut(const void *data, int64_t bytes, Op &op) {
    void *stage = takeStage(bytes, op);
    device.toHost(stage, data, bytes);
    return stage;
  }

  MPI_Op sumOf(DType type) const {
    return type == DType::BF16 ? bf16Sum : MPI_SUM;
  }

  /// In-place reduce-scatter of `size` blocks of `block` elements: the
  /// sum of this rank's block left in its place.
  Request reduceScatterOn(GroupOf g, void *data, int64_t block, DType type,
                          std::string what) {
    const int64_t blockBytes = block * elementBytes(type);
    auto *mine = static_cast<char *>(data) + g.rank * blockBytes;
    Op op;
    void *buffer = data;
    if (staged) {
      buffer = op.stage = stageOut(data, g.size * blockBytes, op);
      // MPI leaves the sum at the front; it goes back to this rank's block.
      op.done = [this, mine, stage = op.stage, blockBytes] {
        device.toDevice(mine, stage, blockBytes);
      };
    } else if (g.rank > 0) {
      op.done = [mine, data, blockBytes] {
        std::memcpy(mine, data, size_t(blockBytes));
      };
    }
    MPI_Ireduce_scatter_block(MPI_IN_PLACE, buffer, mpiCount(block),
                              mpiType(type), sumOf(type), g.comm, &op.request);
    op.what = std::move(what);
    return start(std::move(op));
  }

  /// In-place all-gather: this rank's block sent from its place, the
  /// others' filled in.
  Request allgatherOn(GroupOf g, void *data, int64_t block, DType type,
                      std::string what) {
    const int64_t blockBytes = block * elementBytes(type),
                  all = g.size * blockBytes;
    Op op;
    void *buffer = data;
    if (staged) {
      buffer = op.stage = takeStage(all, op);
      const int64_t at = g.rank * blockBytes;
      device.toHost(static_cast<char *>(op.stage) + at,
                    static_cast<const char *>(data) + at, blockBytes);
      op.done = [this, data, stage = op.stage, all] {
        device.toDevice(data, stage, all);
      };
    }
    MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buffer, mpiCount(block),
                   mpiType(type), g.comm, &op.request);
    op.what = std::move(what);
    return start(std::move(op));
  }

  Request allreduceOn(MPI_Comm group, void *data, int64_t count, DType type,
                      std::string what, MPI_Op reduce = MPI_OP_NULL) {
    Op op;
    op.what = std::move(what);
    void *buffer = data;
    if (staged) {
      const int64_t bytes = count * elementBytes(type);
      buffer = op.stage = stageOut(data, bytes, op);
      op.done = [this, data, stage = op.stage, bytes] {
        device.toDevice(data, stage, bytes);
      };
    }
    MPI_Iallreduce(MPI_IN_PLACE, buffer, mpiCount(count), mpiType(type),
                   reduce == MPI_OP_NULL ? sumOf(type) : reduce, group,
                   &op.request);
    return start(std::move(op));
  }

  Device &device;
  const bool staged;
  /// One tag for every message: MPI then matches by order per pair, as
  /// NCCL does (HYPIPE_ORDERED_LINKS=1, for tests).
  bool orderedLinks = false;
  MPI_Op bf16Sum = MPI_OP_NULL;
  std::vector<MPI_Comm> groups;
  std::vector<std::string> groupWhat; ///< per group: its wait, named
  std::multimap<int64_t, void *> freeStages;
};

} // namespace

std::unique_ptr<Transport> makeTransport(CommKind kind, Comm &comm,
                                         Device &device) {
  switch (kind) {
  case CommKind::Mpi:
    if (!device.host())
      throw RuntimeError("error: --comm mpi needs tensors in host memory; "
                         "they are on " +
                         device.describe() + "\nhelp: use --comm mpi-staged");
    return std::make_unique<MpiTransport>(comm, device, false);
  case CommKind::MpiStaged:
    return std::make_unique<MpiTransport>(comm, device, true);
  case CommKind::Nccl:
    return makeNcclTransport(comm, device);
  case CommKind::Auto:
  case CommKind::CudaIpc:
    break;
  }
  throw RuntimeError(fmt::format(
      "error: no transport for --comm {} (resolve it first)\nhelp: this is a "
      "bug in hypipe; please report it",
      schedule::commKindName(kind)));
}

} // namespace hypipe::rt
