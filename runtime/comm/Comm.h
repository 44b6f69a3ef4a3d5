//===- Comm.h - the ranks of one run and how they talk --------------------===//
//
// A run is a grid of pp x dp ranks. World rank r is pipeline rank r / dp and
// data-parallel rank r % dp (Megatron's default order: data parallelism
// varies fastest, pipeline slowest). Launched by mpirun or srun, MPI is
// initialised and the world size comes from the launcher; started by hand,
// the run is one process and MPI is never touched.
//
// Point-to-point transfers use the world communicator with the peer's
// world rank; collectives use the pipeline group (same dp rank), the
// data-parallel group (same pp rank) or a tied-parameter group.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_COMM_COMM_H
#define HYPIPE_RUNTIME_COMM_COMM_H

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace hypipe::rt {

/// True when the environment names a launcher's rank (Open MPI, PMIx, PMI,
/// Slurm), so MPI must be initialised.
bool launchedByMpi();

/// This process's index among the ranks of its node (Open MPI, Slurm,
/// MPICH, torchrun's variable); 0 when started by hand. Picks its GPU.
int localRank();

class Comm {
public:
  /// Initialises MPI when launchedByMpi(); otherwise a single process.
  Comm(int *argc, char ***argv);
  ~Comm();
  Comm(const Comm &) = delete;
  Comm &operator=(const Comm &) = delete;

  int rank() const { return worldRank; }
  int size() const { return worldSize; }
  bool distributed() const { return mpi; }

  /// Splits the world into a pp x dp grid; size() must equal pp * dp.
  void setGrid(int64_t pp, int64_t dp);
  int64_t ppRank() const { return pp_rank; }
  int64_t dpRank() const { return dp_rank; }
  int64_t ppSize() const { return pp; }
  int64_t dpSize() const { return dp; }
  /// World rank of pipeline rank `ppPeer` in this rank's pipeline.
  int worldRankOf(int64_t ppPeer) const { return int(ppPeer * dp + dp_rank); }

  // Point to point (world ranks). A send stays pending until wait()ed; the
  // buffer must live until then.
  using Request = MPI_Request;
  Request isend(const float *data, int64_t count, int peer, int tag);
  void recv(float *data, int64_t count, int peer, int tag);
  /// Posts a receive; complete it with waitAll before reading `data`.
  Request irecv(float *data, int64_t count, int peer, int tag);
  /// Completes `requests` and clears them.
  void waitAll(std::vector<Request> &requests);
  /// Drives pending transfers without blocking; true when all are done.
  bool testAll(std::vector<Request> &requests);

  /// Non-blocking in-place sum over the data-parallel group.
  Request iallreduceDp(float *data, int64_t count);
  /// The distributed optimizer's collectives over the data-parallel group,
  /// on a buffer of dpSize() blocks of `block` floats, block d belonging to
  /// dp rank d. Reduce-scatter: the sum of everyone's block dpRank() lands
  /// in block 0 of `data` (MPI's in-place convention; the rest is left
  /// as it was). All-gather: every rank's own block, to everyone.
  Request ireduceScatterDp(float *data, int64_t block);
  Request iallgatherDp(float *data, int64_t block);
  /// Data-parallel rank 0 receives every rank's `block` floats into `all`
  /// (dpSize() blocks, in dp order); `all` is ignored elsewhere.
  void gatherDp(const float *block, int64_t count, float *all);

  /// Creates the group of pipeline ranks `ppRanks` (sorted, size >= 2) of
  /// this rank's pipeline; collective over the world. Ranks outside
  /// `ppRanks` get MPI_COMM_NULL.
  MPI_Comm group(const std::vector<int64_t> &ppRanks);
  /// In-place sum over `group`; a group of two adds in one order only, so
  /// every member gets the same bits.
  void allreduce(MPI_Comm group, float *data, int64_t count);

  /// Every rank's `values` (same count on all), in world-rank order.
  std::vector<double> allgather(const std::vector<double> &values);
  /// Rank 0 gets every rank's bytes, in world-rank order; others get {}.
  std::vector<std::string> gatherToRoot(const std::string &bytes);
  void barrier();

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

private:
  /// Completes `n` requests, polling as setWaitHook says.
  void wait(MPI_Request *requests, int n, const std::string &what);

  WaitHook waitHook;
  std::string waitContext;
  bool mpi = false;
  int worldRank = 0, worldSize = 1;
  int64_t pp = 1, dp = 1, pp_rank = 0, dp_rank = 0;
  MPI_Comm ppComm = MPI_COMM_NULL, dpComm = MPI_COMM_NULL;
  std::vector<MPI_Comm> groups;
};

} // namespace hypipe::rt

#endif
