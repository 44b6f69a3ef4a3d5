//===- Comm.h - the ranks of one run and how they talk --------------------===//
//
// A run is a grid of pp x dp ranks. World rank r is pipeline rank r / dp and
// data-parallel rank r % dp (Megatron's default order: data parallelism
// varies fastest, pipeline slowest). Launched by mpirun or srun, MPI is
// initialised and the world size comes from the launcher; started by hand,
// the run is one process and MPI is never touched.
//
// Comm is the run's control plane, in host memory: the grid, agreement
// between ranks, reports to rank 0, barriers, abort and the polling every
// wait goes through. Tensors move through a Transport (Transport.h) built
// on it.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_COMM_COMM_H
#define HYPIPE_RUNTIME_COMM_COMM_H

#include "core/model/TensorParallel.h"

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace hypipe::rt {

/// True when the environment names a launcher's rank (Open MPI, PMIx, PMI,
/// Slurm), so MPI must be initialised.
bool launchedByMpi();

/// `count` as MPI's int element count; throws RuntimeError past INT_MAX.
int mpiCount(int64_t count);

class Comm {
public:
  /// Initialises MPI when launchedByMpi(); otherwise a single process.
  Comm(int *argc, char ***argv);
  ~Comm();
  Comm(const Comm &) = delete;
  Comm &operator=(const Comm &) = delete;

  int rank() const { return worldRank; }
  int size() const { return worldSize; }
  /// This rank's index among the ranks of its node, and their number (MPI's
  /// shared-memory split: right under any launcher and binding; 0 and 1
  /// started by hand). The index picks the rank's GPU.
  int nodeRank() const { return nodeIndex; }
  int nodeSize() const { return nodeCount; }
  /// Every rank of this node's `text`, in node-rank order.
  std::vector<std::string> allgatherOnNode(const std::string &text);
  /// The host world rank `rank` runs on (gathered at start), for messages.
  const std::string &hostOf(int rank) const { return hosts.at(size_t(rank)); }
  bool distributed() const { return mpi; }

  /// Places the ranks on Megatron-LM's grid of tp x dp x pp (order
  /// tp-cp-ep-dp-pp: tp fastest, core/model/RankGrid.h); size() must equal
  /// their product.
  void setGrid(int64_t pp, int64_t dp, int64_t tp = 1);
  int64_t ppRank() const { return pp_rank; }
  int64_t dpRank() const { return dp_rank; }
  int64_t tpRank() const { return tp_rank; }
  int64_t ppSize() const { return pp; }
  int64_t dpSize() const { return dp; }
  int64_t tpSize() const { return tp; }
  /// Megatron-LM's expert grid over `replicas` (m) consecutive data-
  /// parallel replicas (etp x ep = m tp; after setGrid, collective over the
  /// world): the tp-ep group is the m replicas' tensor-parallel groups
  /// (rank (dp rank mod m) tp + tp rank, replica-major) and the expert-
  /// data-parallel group the dp / m ranks of this rank's data-parallel group
  /// at the same place in theirs (by dp rank / m). With m = 1 they are the
  /// tensor- and data-parallel groups.
  void setExpertGroup(int64_t replicas);
  int64_t expertReplicas() const { return expert_replicas; }
  int64_t expertRank() const {
    return (dp_rank % expert_replicas) * tp + tp_rank;
  }
  int64_t expertSize() const { return expert_replicas * tp; }
  int64_t expertDpRank() const { return dp_rank / expert_replicas; }
  int64_t expertDpSize() const { return dp / expert_replicas; }
  MPI_Comm expertGroup() const {
    return expert_replicas > 1 ? expertComm : tpComm;
  }
  MPI_Comm expertDpGroup() const {
    return expert_replicas > 1 ? expertDpComm : dpComm;
  }
  /// The m replicas an expert grid spans, at this rank's tensor-parallel
  /// rank (by dp rank mod m): the data-parallel group's part inside the
  /// tp-ep group, which the distributed optimizer's dense parts are summed
  /// and gathered over after the expert-data-parallel step (Optimizer.h).
  /// MPI_COMM_NULL where m is 1.
  MPI_Comm expertReplicaGroup() const { return expertReplicaComm; }
  int64_t expertReplicaRank() const { return dp_rank % expert_replicas; }
  /// The group a parameter (the manifest's ParamEntry) is cut over and
  /// this rank's place in it: an expert's, its layer's tp-ep group; the
  /// others', the tensor-parallel group (TensorParallel.h's holdsParam
  /// and forEachParamShardRun take them).
  template <class P> int64_t paramRanks(const P &p) const {
    return p.expertRank >= 0 ? expertSize() : tp;
  }
  template <class P> int64_t paramRank(const P &p) const {
    return p.expertRank >= 0 ? expertRank() : tp_rank;
  }
  /// Whether this rank holds (a shard of) the parameter.
  template <class P> bool holds(const P &p) const {
    return holdsParam(p, paramRanks(p), paramRank(p));
  }
  /// The world rank at (ppRank, dpRank, tpRank) of the grid.
  int worldRankAt(int64_t ppAt, int64_t dpAt, int64_t tpAt) const {
    return int((ppAt * dp + dpAt) * tp + tpAt);
  }
  /// World rank of pipeline rank `ppPeer` in this rank's pipeline.
  int worldRankOf(int64_t ppPeer) const {
    return worldRankAt(ppPeer, dp_rank, tp_rank);
  }
  /// Numbers that tell the groups of one kind apart (communicator colours):
  /// this rank's data-parallel group (its pp and tp ranks), its pipeline
  /// (its dp and tp ranks) and its tensor-parallel group (pp and dp).
  int dpColor() const { return int(pp_rank * tp + tp_rank); }
  int pipelineColor() const { return int(dp_rank * tp + tp_rank); }
  int tpColor() const { return int(pp_rank * dp + dp_rank); }

  /// The MPI communicators a transport builds on (MPI_COMM_NULL in a
  /// single process): the world, the data-parallel group (same pp and tp
  /// ranks, by dp rank), the pipeline group (same dp and tp ranks, by pp
  /// rank) and the tensor-parallel group (same pp and dp ranks, by tp rank).
  MPI_Comm world() const { return mpi ? MPI_COMM_WORLD : MPI_COMM_NULL; }
  MPI_Comm dpGroup() const { return dpComm; }
  MPI_Comm pipelineGroup() const { return ppComm; }
  MPI_Comm tpGroup() const { return tpComm; }

  /// Data-parallel rank 0 receives every rank's `block` floats into `all`
  /// (dpSize() blocks, in dp order); `all` is ignored elsewhere. Host
  /// memory (the checkpoint's optimizer state).
  void gatherDp(const float *block, int64_t count, float *all);
  /// The same over the tensor-parallel group: tp rank 0 receives.
  void gatherTp(const float *block, int64_t count, float *all);
  /// The same over the expert tp-ep group (the tensor-parallel group where
  /// it spans one replica): its rank 0 receives.
  void gatherExpert(const float *block, int64_t count, float *all);
  /// The same over the expert-data-parallel group: its rank 0 receives.
  void gatherExpertDp(const float *block, int64_t count, float *all);

  /// Every rank's `values` (same count on all), in world-rank order.
  std::vector<double> allgather(const std::vector<double> &values);
  /// Rank 0 gets every rank's bytes, in world-rank order; others get {}.
  std::vector<std::string> gatherToRoot(const std::string &bytes);
  void barrier();

  /// A roll call on a communicator of its own: this rank tells every other
  /// it is here and returns, in order, the ranks it has not heard the same
  /// from within `seconds`. Every rank whose watchdog fires calls it, so
  /// the ranks still running name the ones that are not (a lost host, a
  /// stopped or hung process) rather than the collective they all wait in.
  std::vector<int> silentRanks(double seconds);

  /// The link between world ranks 0 and 1: the median one-way time of
  /// ping-pongs of 8 bytes (its latency) and of `bytes` (its bandwidth,
  /// after the latency), on the roll call's communicator when the run's
  /// traffic is done; every rank returns rank 0's figures, {bytes per
  /// second, latency in seconds}. A collective: all ranks call it.
  std::pair<double, double> measureLink(int64_t bytes);

  /// Ends every rank of the run with `code` (after this rank printed why).
  [[noreturn]] void abort(int code);

  /// Waits on transfers and collectives poll: they spin for a few
  /// milliseconds, then sleep between polls (a rank waiting on a stopped
  /// peer does not burn a core), and call `hook` about once a second with
  /// the seconds waited so far and the context; the hook may end the run
  /// (the watchdog, a Ctrl-C while stuck).
  using WaitHook = std::function<void(double waited, const std::string &what)>;
  void setWaitHook(WaitHook hook) { waitHook = std::move(hook); }
  /// What the waits from now on are for, for the hook's messages.
  void setWaitContext(std::string what) { waitContext = std::move(what); }

  /// Calls `done` until it returns true, as the waits above poll; `what`
  /// names the wait for the hook. Every transport waits through here.
  void poll(const std::function<bool()> &done, const std::string &what);

private:
  /// Rank 0 of `group` (of `members`) receives every member's `count`
  /// floats into `all`, in rank order (`what` names the wait).
  void gatherTo0(MPI_Comm group, int64_t members, const float *block,
                 int64_t count, float *all, const std::string &what);
  /// Completes `n` requests, polling as setWaitHook says.
  void wait(MPI_Request *requests, int n, const std::string &what);
  /// Every rank of `group`'s `text`, in rank order.
  std::vector<std::string> allgatherText(MPI_Comm group, int members,
                                         const std::string &text);

  WaitHook waitHook;
  std::string waitContext;
  bool mpi = false;
  int worldRank = 0, worldSize = 1;
  int64_t pp = 1, dp = 1, tp = 1, pp_rank = 0, dp_rank = 0, tp_rank = 0;
  int64_t expert_replicas = 1;
  MPI_Comm ppComm = MPI_COMM_NULL, dpComm = MPI_COMM_NULL,
           tpComm = MPI_COMM_NULL, expertComm = MPI_COMM_NULL,
           expertDpComm = MPI_COMM_NULL, expertReplicaComm = MPI_COMM_NULL;
  /// silentRanks' and measureLink's own: nothing else travels on it.
  MPI_Comm rollCallComm = MPI_COMM_NULL;
  /// silentRanks' receive buffers: a late answer lands here, never in
  /// freed memory.
  std::vector<int> rollCallHeard;
  MPI_Comm nodeComm = MPI_COMM_NULL;
  int nodeIndex = 0, nodeCount = 1;
  std::vector<std::string> hosts; ///< by world rank
};

/// Collective: when any rank's `error` is non-empty, every rank throws a
/// CollectiveError of `what` followed by each distinct message once, with
/// the ranks that raised it (rank 0 prints it).
void agreeAcrossRanks(Comm &comm, const std::string &error,
                      const std::string &what);

/// Runs `work` on every rank and agrees on the RuntimeError it throws
/// (agreeAcrossRanks), so that a fault every rank meets (an edited
/// manifest, missing data) is said once; one process throws it as it is.
void onEveryRank(Comm &comm, const std::string &what,
                 const std::function<void()> &work);

} // namespace hypipe::rt

#endif
