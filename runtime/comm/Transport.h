//===- Transport.h - how a run's tensors move between ranks ---------------===//
//
// One interface for every way tensors cross ranks: point-to-point sends and
// receives posted where the schedule program writes them, and the sums and
// gathers of data parallelism and tied parameters. Buffers are the device's
// (host memory on the cpu target, GPU memory on cuda); payloads are fp32 or
// bf16 (bf16 collectives add in fp32 and round each partial sum, as NCCL
// does). An operation starts when called and is complete after waitAll; on a
// GPU it is ordered after the kernels already queued on the compute stream
// that produce its buffer, and the kernels queued after its wait see its
// result.
//
//   Mpi        host memory, MPI's nonblocking calls (the cpu target).
//   MpiStaged  device memory through pinned host staging buffers: any
//              number of ranks may share one GPU. On the cpu target the
//              device is host memory and the staging copies are plain
//              copies, so CI runs the whole path.
//   Nccl       one rank per GPU; communicators from a unique id broadcast
//              over MPI (NcclTransport.cpp, built with CUDA and NCCL).
//
// Collectives over the data-parallel group use NCCL's in-place conventions:
// a reduce-scatter over dpSize() blocks of `block` elements leaves this
// rank's summed block where it was (block dpRank()); an all-gather sends
// this rank's block from there and fills the others.
//
// Matching: MPI matches a receive to a send by (peer, tag); NCCL by order
// per peer pair. Programs run over nccl must receive from each peer in the
// order that peer sends (schedule::receiveInSendOrder).
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_COMM_TRANSPORT_H
#define HYPIPE_RUNTIME_COMM_TRANSPORT_H

#include "core/model/TensorParallel.h"
#include "core/schedule/CommKind.h"
#include "runtime/comm/Comm.h"
#include "runtime/formats/StageProgram.h"
#include "runtime/kernels/Target.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace hypipe::rt {

using rt::CollectiveKind;
using schedule::CommKind;

class Transport {
public:
  /// A started operation; waitAll or testAll completes it.
  using Request = int64_t;
  /// A group made by makeGroup; kNoGroup on ranks outside it.
  using Group = int;
  static constexpr Group kNoGroup = -1;

  virtual ~Transport() = default;
  virtual CommKind kind() const = 0;
  /// True when a receive takes the next message on its link whatever its
  /// tag (NCCL; MPI under HYPIPE_ORDERED_LINKS=1, which tests use to run
  /// that discipline on the cpu target): programs must then receive in the
  /// order their peers send (schedule::receiveInSendOrder).
  virtual bool matchesByOrder() const { return false; }

  /// Sets up the links to the world ranks this rank sends to and receives
  /// from (its program's peers), before the first transfer; collective
  /// between the two ranks of each link. MPI needs none.
  virtual void connect(const std::vector<int> &sendTo,
                       const std::vector<int> &receiveFrom) {
    (void)sendTo;
    (void)receiveFrom;
  }

  /// `count` elements of `type` to world rank `peer`; `data` must stay as
  /// it is until the send completes.
  virtual Request isend(const void *data, int64_t count, DType type, int peer,
                        int tag) = 0;
  /// Fills `data` from world rank `peer`; read it after the wait.
  virtual Request irecv(void *data, int64_t count, DType type, int peer,
                        int tag) = 0;
  /// In-place sum over the data-parallel group.
  virtual Request iallreduceDp(void *data, int64_t count, DType type) = 0;
  /// In-place reduce-scatter and all-gather over the data-parallel group of
  /// dpSize() blocks of `block` elements (conventions above).
  virtual Request ireduceScatterDp(void *data, int64_t block, DType type) = 0;
  virtual Request iallgatherDp(void *data, int64_t block, DType type) = 0;
  /// A tensor-parallel layer's collective over this rank's tensor-parallel
  /// group (core/model/TensorParallel.h): `count` elements in place -- the
  /// whole tensor; a reduce-scatter and an all-gather work on tpSize()
  /// blocks of count / tpSize() with the data-parallel ones' conventions.
  virtual Request itensorParallel(CollectiveKind kind, void *data,
                                  int64_t count, DType type) = 0;
  /// An all-to-all over this rank's tensor-parallel group with counts the
  /// layer's data decides: `sendCounts[p]` elements of `type` from `send` to
  /// tp rank p and `recvCounts[p]` from p into `recv`, each buffer's blocks
  /// one after another in rank order. Every rank's counts match its peers'
  /// (each knows them: no exchange of counts).
  virtual Request iallToAllTp(const void *send,
                              const std::vector<int64_t> &sendCounts,
                              void *recv,
                              const std::vector<int64_t> &recvCounts,
                              DType type) = 0;
  /// The same two over this rank's expert tp-ep group (Comm::expertGroup:
  /// Megatron-LM's tp-ep group, a MoE layer's whose experts spread over
  /// data-parallel replicas; the tensor-parallel group when they do not),
  /// and the in-place sum over its expert-data-parallel group
  /// (Comm::expertDpGroup; the data-parallel group when they do not). Over
  /// several replicas only the MPI transports run them.
  virtual Request iexpertParallel(CollectiveKind kind, void *data,
                                  int64_t count, DType type);
  virtual Request iallToAllExpert(const void *send,
                                  const std::vector<int64_t> &sendCounts,
                                  void *recv,
                                  const std::vector<int64_t> &recvCounts,
                                  DType type);
  virtual Request iallreduceExpertDp(void *data, int64_t count, DType type);
  /// The distributed optimizer over an expert grid spread over data-
  /// parallel replicas (Optimizer.h): an in-place reduce-scatter or all-
  /// gather (`kind`) of the group's size of blocks of `block` elements, with
  /// the data-parallel ones' conventions, over the expert-data-parallel
  /// group or over the m replicas the grid spans (Comm::expertReplicaGroup).
  /// Only the MPI transports run them.
  enum class ExpertShardGroup { ExpertDp, Replicas };
  virtual Request iexpertShard(ExpertShardGroup group, CollectiveKind kind,
                               void *data, int64_t block, DType type);
  /// The group of pipeline ranks `ppRanks` (sorted, at least two) of this
  /// rank's pipeline; collective over the world.
  virtual Group makeGroup(const std::vector<int64_t> &ppRanks) = 0;
  /// In-place sum over `group` (nothing on kNoGroup); a group of two adds
  /// in one order only, so both members get the same bits.
  virtual Request iallreduce(Group group, void *data, int64_t count,
                             DType type) = 0;

  /// Completes `requests` (polling through Comm::poll, so the wait hook
  /// sees a stuck wait) and clears them.
  void waitAll(std::vector<Request> &requests);
  /// Drives `requests` without blocking and drops those complete; true
  /// when none is left.
  bool testAll(std::vector<Request> &requests);

protected:
  explicit Transport(Comm &comm) : comm(comm) {}
  /// Drives request `r`; true once it is complete (its result in place),
  /// after which `r` is forgotten.
  virtual bool test(Request r) = 0;
  /// What pending request `r` waits for, for the watchdog's message
  /// ("receiving from rank 3 on host n3").
  virtual std::string describe(Request r) const = 0;
  /// "rank 3 on host n3".
  std::string rankText(int rank) const;
  /// The other members of this rank's data-parallel (tensor-parallel)
  /// group, as rankText.
  std::string dpPeersText() const;
  std::string tpPeersText() const;
  /// What a sum over the tied-parameter group of pipeline ranks `ppRanks`
  /// waits for: the other members in this rank's data-parallel column, as
  /// rankText ("the tied-parameter sum with rank 3 on host n3").
  std::string tiedSumText(const std::vector<int64_t> &ppRanks) const;

  Comm &comm;
};

/// A transport that keeps its pending operations by request, each with what
/// it waits for (`Op::what`, for the watchdog): describe() reads them, and
/// test() drives one through complete() and forgets it once it is done.
template <typename Op> class PendingTransport : public Transport {
protected:
  using Transport::Transport;
  /// Drives `op`; true once it is complete (its result in place).
  virtual bool complete(Op &op) = 0;
  /// Keeps `op` pending; its request.
  Request start(Op op) {
    const Request id = next++;
    ops.emplace(id, std::move(op));
    return id;
  }
  /// A request with nothing to wait for: test() finds no operation.
  Request nothingPending() { return next++; }

  std::string describe(Request r) const final {
    auto it = ops.find(r);
    return it == ops.end() ? "a finished transfer" : it->second.what;
  }
  bool test(Request r) final {
    auto it = ops.find(r);
    if (it == ops.end())
      return true;
    if (!complete(it->second))
      return false;
    ops.erase(it);
    return true;
  }

  std::map<Request, Op> ops;

private:
  Request next = 0;
};

/// The transport `kind` resolves to for this run (resolveComm first);
/// `device` is where the trainer's tensors live. Throws RuntimeError with a
/// message for users when the kind cannot run here.
std::unique_ptr<Transport> makeTransport(CommKind kind, Comm &comm,
                                         Device &device);

/// The transport a run uses: `requested` resolved (`auto`: mpi on the cpu
/// target; on cuda nccl when this node's `localRanks` ranks open `gpus`
/// distinct GPUs, one each, mpi-staged when they share) or checked (cuda-ipc is
/// not built; nccl needs the cuda target and a GPU per rank; mpi cannot
/// move GPU memory). Throws RuntimeError saying what to use instead.
CommKind resolveComm(CommKind requested, bool cudaTarget, int localRanks,
                     int gpus);

/// Empty when NCCL can be used: hypipe was built with it and libnccl.so.2
/// loads (NcclLibrary.h: hypipe-run is not linked to it); else why not.
std::string ncclUnavailable();
/// The Nccl transport (NcclTransport.cpp; throws RuntimeError when hypipe
/// was built without NCCL). Collective over the world.
std::unique_ptr<Transport> makeNcclTransport(Comm &comm, Device &device);

} // namespace hypipe::rt

#endif
