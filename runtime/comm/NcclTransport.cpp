//===- NcclTransport.cpp - tensors between GPUs over NCCL -----------------===//
//
// One rank per GPU. The communicators:
//   - the world's, from a unique id rank 0 makes and broadcasts over MPI;
//   - the data-parallel group's and each tied-parameter group's, split from
//     it (ncclCommSplit);
//   - one per direction of each pipeline link (this rank to a peer, a peer
//     to this rank), two ranks each, from ids the pair exchange over MPI.
//     NCCL runs the operations of a communicator in the order they were
//     issued, whatever their streams: with one communicator per pair, a
//     send to the peer queued behind a receive from it would wait for that
//     receive, and two ranks that each send before receiving would wait for
//     each other. One communicator per direction keeps each direction a
//     FIFO of its own (what the programs' order per pair needs:
//     schedule::receiveInSendOrder).
// Every communicator has its own stream. An operation waits (an event) for
// the compute stream's work queued before it, and records an event after
// itself; test() polls that event and, while it has not fired, the
// communicators' asynchronous errors: an error aborts every communicator
// and throws, and the rank's failure ends the run as any rank error does.
//
// Built with CUDA and NCCL; its checks on a GPU are the GPU kit's
// `transports` suite (communicator size 1) and, on a node with several
// GPUs, ctest -L gpu-multi (docs/cuda.md).
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/NcclLibrary.h"
#include "runtime/comm/Transport.h"
#include "runtime/formats/RuntimeError.h"
#include "runtime/kernels/cuda/Context.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <map>

namespace hypipe::rt {

namespace {

/// NCCL's entry points (loaded on the first use: NcclLibrary.h).
const NcclLibrary &lib() { return ncclLibrary(); }

void check(ncclResult_t status, const char *what) {
  if (status != ncclSuccess && status != ncclInProgress)
    throw RuntimeError(fmt::format(
        "error: NCCL: {}: {}\nhelp: NCCL_DEBUG=WARN shows NCCL's own account; "
        "--comm mpi-staged runs without NCCL",
        what, lib().ncclGetErrorString(status)));
}

ncclDataType_t ncclType(DType type) {
  return type == DType::BF16 ? ncclBfloat16 : ncclFloat32;
}

int64_t elementBytes(DType type) { return type == DType::BF16 ? 2 : 4; }

/// An operation of NcclTransport in flight.
struct NcclOp {
  void *done = nullptr; ///< recorded on the link's stream after the op
  std::string what;     ///< for describe()
};

class NcclTransport final : public PendingTransport<NcclOp> {
  using Op = NcclOp;

public:
  explicit NcclTransport(Comm &comm)
      : PendingTransport<NcclOp>(comm), compute(cuda::streamHandle()) {
    ncclUniqueId id{};
    if (comm.rank() == 0)
      check(lib().ncclGetUniqueId(&id), "ncclGetUniqueId");
    if (comm.distributed())
      MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm.world());
    world = add(nullptr);
    check(lib().ncclCommInitRank(&links[world].comm, comm.size(), id,
                                 comm.rank()),
          "ncclCommInitRank (the world)");
    dp = add(nullptr);
    check(lib().ncclCommSplit(links[world].comm, comm.dpColor(),
                              int(comm.dpRank()), &links[dp].comm, nullptr),
          "ncclCommSplit (the data-parallel group)");
    tp = add(nullptr);
    check(lib().ncclCommSplit(links[world].comm, comm.tpColor(),
                              int(comm.tpRank()), &links[tp].comm, nullptr),
          "ncclCommSplit (the tensor-parallel group)");
  }

  ~NcclTransport() override {
    // Operations still in flight (an exception unwinding, a failed peer):
    // abort, which does not wait for them; destroy only a quiet
    // communicator. Communicators go before their streams.
    if (failed || !ops.empty() || std::uncaught_exceptions() > 0)
      abortAll();
    lib().ncclGroupStart();
    for (Link &l : links)
      if (l.comm)
        lib().ncclCommDestroy(l.comm);
    lib().ncclGroupEnd();
    for (Link &l : links)
      if (l.stream)
        cuda::destroyStream(l.stream);
    for (auto &[id, op] : ops)
      cuda::destroyEvent(op.done);
    for (void *e : events)
      cuda::destroyEvent(e);
  }

  CommKind kind() const override { return CommKind::Nccl; }
  bool matchesByOrder() const override { return true; }

  void connect(const std::vector<int> &sendTo,
               const std::vector<int> &receiveFrom) override {
    // Each sender makes the id of its direction and gives it to the peer.
    std::vector<ncclUniqueId> out(sendTo.size()), in(receiveFrom.size());
    std::vector<MPI_Request> requests;
    for (size_t i = 0; i < sendTo.size(); ++i) {
      check(lib().ncclGetUniqueId(&out[i]), "ncclGetUniqueId");
      requests.emplace_back();
      MPI_Isend(&out[i], sizeof(ncclUniqueId), MPI_BYTE, sendTo[i], kIdTag,
                comm.world(), &requests.back());
    }
    for (size_t i = 0; i < receiveFrom.size(); ++i) {
      requests.emplace_back();
      MPI_Irecv(&in[i], sizeof(ncclUniqueId), MPI_BYTE, receiveFrom[i], kIdTag,
                comm.world(), &requests.back());
    }
    MPI_Waitall(int(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
    // Both ends of every link at once, in one group: the order in which
    // the ranks reach their links does not matter.
    check(lib().ncclGroupStart(), "ncclGroupStart");
    for (size_t i = 0; i < sendTo.size(); ++i) {
      const int l = add(nullptr);
      sends[sendTo[i]] = l;
      check(lib().ncclCommInitRank(&links[l].comm, 2, out[i], kSender),
            "ncclCommInitRank (a pipeline link)");
    }
    for (size_t i = 0; i < receiveFrom.size(); ++i) {
      const int l = add(nullptr);
      receives[receiveFrom[i]] = l;
      check(lib().ncclCommInitRank(&links[l].comm, 2, in[i], kReceiver),
            "ncclCommInitRank (a pipeline link)");
    }
    check(lib().ncclGroupEnd(), "ncclGroupEnd (the pipeline links)");
  }

  Request isend(const void *data, int64_t count, DType type, int peer,
                int) override {
    const int l = linkTo(sends, peer, "sends to");
    Link &link = ready(l);
    check(lib().ncclSend(data, size_t(count), ncclType(type), kReceiver,
                         link.comm, static_cast<cudaStream_t>(link.stream)),
          "ncclSend");
    return finish(l, "sending to " + rankText(peer));
  }

  Request irecv(void *data, int64_t count, DType type, int peer, int) override {
    const int l = linkTo(receives, peer, "receives from");
    Link &link = ready(l);
    check(lib().ncclRecv(data, size_t(count), ncclType(type), kSender,
                         link.comm, static_cast<cudaStream_t>(link.stream)),
          "ncclRecv");
    return finish(l, "receiving from " + rankText(peer));
  }

  Request iallreduceDp(void *data, int64_t count, DType type) override {
    return allreduceOn(dp, data, count, type,
                       "the data-parallel all-reduce with " + dpPeersText());
  }

  Request ireduceScatterDp(void *data, int64_t block, DType type) override {
    Link &link = ready(dp);
    void *mine =
        static_cast<char *>(data) + comm.dpRank() * block * elementBytes(type);
    check(lib().ncclReduceScatter(data, mine, size_t(block), ncclType(type),
                                  ncclSum, link.comm,
                                  static_cast<cudaStream_t>(link.stream)),
          "ncclReduceScatter");
    return finish(dp, "the data-parallel reduce-scatter with " + dpPeersText());
  }

  Request iallgatherDp(void *data, int64_t block, DType type) override {
    Link &link = ready(dp);
    const void *mine = static_cast<const char *>(data) +
                       comm.dpRank() * block * elementBytes(type);
    check(lib().ncclAllGather(mine, data, size_t(block), ncclType(type),
                              link.comm,
                              static_cast<cudaStream_t>(link.stream)),
          "ncclAllGather");
    return finish(dp, "the data-parallel all-gather with " + dpPeersText());
  }

  Request itensorParallel(CollectiveKind kind, void *data, int64_t count,
                          DType type) override {
    std::string what = std::string("the tensor-parallel ") +
                       collectiveKindName(kind) + " with " + tpPeersText();
    const int64_t block = count / comm.tpSize();
    void *mine =
        static_cast<char *>(data) + comm.tpRank() * block * elementBytes(type);
    switch (kind) {
    case CollectiveKind::AllReduce:
      return allreduceOn(tp, data, count, type, std::move(what));
    case CollectiveKind::AllReduceMax:
      return allreduceOn(tp, data, count, type, std::move(what), ncclMax);
    case CollectiveKind::AllGather: {
      Link &link = ready(tp);
      check(lib().ncclAllGather(mine, data, size_t(block), ncclType(type),
                                link.comm,
                                static_cast<cudaStream_t>(link.stream)),
            "ncclAllGather");
      break;
    }
    case CollectiveKind::ReduceScatter: {
      Link &link = ready(tp);
      check(lib().ncclReduceScatter(data, mine, size_t(block), ncclType(type),
                                    ncclSum, link.comm,
                                    static_cast<cudaStream_t>(link.stream)),
            "ncclReduceScatter");
      break;
    }
    case CollectiveKind::AllToAll:
      throw RuntimeError("error: the tensor-parallel all_to_all needs its "
                         "counts\nhelp: this is a bug in hypipe; please "
                         "report it");
    }
    return finish(tp, std::move(what));
  }

  /// NCCL has no all-to-all: a send and a receive to each peer in one
  /// group (its documented way), on the tensor-parallel communicator.
  Request iallToAllTp(const void *send, const std::vector<int64_t> &sendCounts,
                      void *recv, const std::vector<int64_t> &recvCounts,
                      DType type) override {
    Link &link = ready(tp);
    const auto stream = static_cast<cudaStream_t>(link.stream);
    const int64_t bytes = elementBytes(type);
    int64_t sendAt = 0, recvAt = 0;
    check(lib().ncclGroupStart(), "ncclGroupStart");
    // The group is ended whatever a call inside it throws.
    struct GroupEnd {
      bool ended = false;
      ~GroupEnd() {
        if (!ended)
          lib().ncclGroupEnd();
      }
    } open;
    for (int p = 0; p < int(comm.tpSize()); ++p) {
      const int64_t out = sendCounts.at(size_t(p)),
                    in = recvCounts.at(size_t(p));
      if (out > 0)
        check(lib().ncclSend(static_cast<const char *>(send) + sendAt * bytes,
                             size_t(out), ncclType(type), p, link.comm, stream),
              "ncclSend");
      if (in > 0)
        check(lib().ncclRecv(static_cast<char *>(recv) + recvAt * bytes,
                             size_t(in), ncclType(type), p, link.comm, stream),
              "ncclRecv");
      sendAt += out;
      recvAt += in;
    }
    open.ended = true;
    check(lib().ncclGroupEnd(), "ncclGroupEnd");
    return finish(tp, "the tensor-parallel all_to_all with " + tpPeersText());
  }

  Group makeGroup(const std::vector<int64_t> &ppRanks) override {
    const bool member = std::find(ppRanks.begin(), ppRanks.end(),
                                  comm.ppRank()) != ppRanks.end();
    ncclComm_t c = nullptr;
    // Groups are per pipeline: members of one dp column share a color.
    check(
        lib().ncclCommSplit(links[world].comm,
                            member ? comm.pipelineColor() : NCCL_SPLIT_NOCOLOR,
                            int(comm.ppRank()), &c, nullptr),
        "ncclCommSplit (a tied-parameter group)");
    if (!member)
      return kNoGroup;
    const int group = add(c);
    groupWhat[group] = tiedSumText(ppRanks);
    return group;
  }

  Request iallreduce(Group group, void *data, int64_t count,
                     DType type) override {
    if (group == kNoGroup)
      return nothingPending();
    return allreduceOn(group, data, count, type, groupWhat.at(int(group)));
  }

protected:
  bool complete(Op &op) override {
    if (!cuda::eventDone(op.done)) {
      pollErrors();
      return false;
    }
    // Kernels queued from now on read what it wrote.
    cuda::streamWaitEvent(compute, op.done);
    events.push_back(op.done);
    return true;
  }

private:
  static constexpr int kIdTag = 7001;
  /// The ranks of a link's two-rank communicator: the sender makes its id.
  static constexpr int kSender = 0, kReceiver = 1;

  struct Link {
    ncclComm_t comm = nullptr;
    void *stream = nullptr;
  };

  std::map<int, std::string> groupWhat; ///< per tied group: its wait, named
  int add(ncclComm_t c) {
    links.push_back({c, cuda::createStream()});
    return int(links.size()) - 1;
  }

  int linkTo(const std::map<int, int> &byPeer, int peer, const char *what) {
    auto it = byPeer.find(peer);
    if (it == byPeer.end())
      throw RuntimeError(fmt::format(
          "error: rank {} {} rank {}, which its program does not name\nhelp: "
          "the artifact's program is out of order; recompile it",
          comm.rank(), what, peer));
    return it->second;
  }

  void *event() {
    if (events.empty())
      return cuda::createEvent();
    void *e = events.back();
    events.pop_back();
    return e;
  }

  /// Link `l`'s stream, after the compute stream's work so far.
  Link &ready(int l) {
    void *before = event();
    cuda::recordEvent(before, compute);
    cuda::streamWaitEvent(links[l].stream, before);
    events.push_back(before); // reusable: the wait is queued
    return links[l];
  }

  /// Aborts every communicator (once) and forgets it.
  void abortAll() {
    for (Link &l : links)
      if (l.comm) {
        lib().ncclCommAbort(l.comm);
        l.comm = nullptr;
      }
  }

  Request finish(int l, std::string what) {
    Op op{event(), std::move(what)};
    cuda::recordEvent(op.done, links[l].stream);
    return start(std::move(op));
  }

  Request allreduceOn(int l, void *data, int64_t count, DType type,
                      std::string what, ncclRedOp_t reduce = ncclSum) {
    Link &link = ready(l);
    check(lib().ncclAllReduce(data, data, size_t(count), ncclType(type), reduce,
                              link.comm,
                              static_cast<cudaStream_t>(link.stream)),
          "ncclAllReduce");
    return finish(l, std::move(what));
  }

  /// A communicator's asynchronous error (a lost peer, a network fault):
  /// every communicator is aborted, so no kernel stays waiting, and the
  /// rank fails (which ends the run).
  void pollErrors() {
    for (Link &l : links) {
      if (!l.comm)
        continue;
      ncclResult_t async = ncclSuccess;
      if (lib().ncclCommGetAsyncError(l.comm, &async) != ncclSuccess ||
          (async != ncclSuccess && async != ncclInProgress)) {
        failed = true;
        abortAll(); // no kernel stays waiting on the lost peer
        throw RuntimeError(fmt::format(
            "error: NCCL: a transfer failed on rank {}: {}\nhelp: the "
            "messages of the other ranks name the cause; NCCL_DEBUG=WARN "
            "shows NCCL's own account",
            comm.rank(), lib().ncclGetErrorString(async)));
      }
    }
  }

  void *compute;
  std::vector<Link> links;
  int world = -1, dp = -1, tp = -1;
  std::map<int, int> sends, receives; ///< world rank -> link
  std::vector<void *> events;         ///< free for reuse
  bool failed = false;
};

} // namespace

std::unique_ptr<Transport> makeNcclTransport(Comm &comm, Device &device) {
  if (device.host())
    throw RuntimeError("error: --comm nccl moves GPU memory, and this run's "
                       "tensors are in host memory\nhelp: use --comm mpi");
  return std::make_unique<NcclTransport>(comm);
}

} // namespace hypipe::rt
