//===- Comm.cpp - the ranks of one run and how they talk ------------------===//

#include "runtime/comm/Comm.h"
#include "core/model/RankGrid.h"
#include "runtime/kernels/cpu/Profile.h"

#include "runtime/formats/Artifact.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include <climits>
#include <cstdlib>
#include <unistd.h>

namespace hypipe::rt {

int mpiCount(int64_t count) {
  if (count < 0 || count > INT_MAX)
    throw RuntimeError(fmt::format(
        "error: a transfer of {} elements exceeds MPI's int count\nhelp: "
        "use a smaller micro_batch_size or seq_length per stage",
        count));
  return int(count);
}

bool launchedByMpi() {
  for (const char *var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK",
                          "PMI_SIZE", "SLURM_PROCID"})
    if (std::getenv(var))
      return true;
  return false;
}

namespace {
std::string thisHost() {
  char name[256] = {0};
  if (gethostname(name, sizeof name - 1) != 0)
    return "?";
  return name;
}
} // namespace

Comm::Comm(int *argc, char ***argv) {
  hosts = {thisHost()};
  if (!launchedByMpi())
    return;
  MPI_Init(argc, argv);
  mpi = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &worldRank);
  MPI_Comm_size(MPI_COMM_WORLD, &worldSize);
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, worldRank,
                      MPI_INFO_NULL, &nodeComm);
  MPI_Comm_rank(nodeComm, &nodeIndex);
  MPI_Comm_size(nodeComm, &nodeCount);
  hosts = allgatherText(MPI_COMM_WORLD, worldSize, thisHost());
  MPI_Comm_dup(MPI_COMM_WORLD, &rollCallComm);
  // A lost peer makes a roll-call send fail: say so as an answer missing,
  // not by ending the process before it names anyone.
  MPI_Comm_set_errhandler(rollCallComm, MPI_ERRORS_RETURN);
}

std::pair<double, double> Comm::measureLink(int64_t bytes) {
  double fit[2] = {0, 0};
  if (!mpi || worldSize < 2)
    return {0, 0};
  std::vector<char> buffer(size_t(std::max<int64_t>(bytes, 8)), 1);
  bool failed = false;
  // One leg: spun on (poll's sleeps after 5 ms would be timed as the
  // link's), falling back to poll's watched wait after a second.
  auto leg = [&](bool send, int n) {
    MPI_Request r = MPI_REQUEST_NULL;
    const int rc = send ? MPI_Isend(buffer.data(), n, MPI_BYTE, 1 - worldRank,
                                    1, rollCallComm, &r)
                        : MPI_Irecv(buffer.data(), n, MPI_BYTE, 1 - worldRank,
                                    1, rollCallComm, &r);
    if (rc != MPI_SUCCESS) {
      failed = true;
      return;
    }
    int done = 0;
    for (const double until = MPI_Wtime() + 1; !done && MPI_Wtime() < until;)
      MPI_Test(&r, &done, MPI_STATUS_IGNORE);
    if (!done)
      wait(&r, 1, "the link measurement between ranks 0 and 1");
  };
  auto oneWay = [&](int n, int repeats) {
    std::vector<double> times;
    for (int i = 0; i < repeats && worldRank < 2 && !failed; ++i) {
      const double start = MPI_Wtime();
      leg(worldRank == 0, n);
      leg(worldRank != 0, n);
      times.push_back((MPI_Wtime() - start) / 2);
    }
    std::sort(times.begin(), times.end());
    return times.empty() ? 0.0 : times[times.size() / 2];
  };
  const double latency = oneWay(8, 51);
  const double large = oneWay(int(buffer.size()), 9);
  // No link when a transfer failed or the large message was no slower than
  // the small one (noise: the fit would be meaningless).
  if (worldRank == 0 && !failed && large > latency) {
    fit[0] = double(buffer.size()) / (large - latency);
    fit[1] = latency;
  }
  MPI_Request r;
  MPI_Ibcast(fit, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD, &r);
  wait(&r, 1, "rank 0's link measurement");
  return {fit[0], fit[1]};
}

std::vector<int> Comm::silentRanks(double seconds) {
  std::vector<int> silent;
  if (!mpi)
    return silent;
  // One message each way with every other rank; sends that cannot go
  // (a lost peer) are left behind: the run ends right after this.
  static const int here = 1;
  std::vector<int> &heard = rollCallHeard;
  heard.assign(size_t(worldSize), 0);
  std::vector<MPI_Request> receives;
  std::vector<int> from;
  for (int r = 0; r < worldSize; ++r) {
    if (r == worldRank)
      continue;
    MPI_Request send;
    MPI_Isend(&here, 1, MPI_INT, r, 0, rollCallComm, &send);
    MPI_Request_free(&send);
    receives.emplace_back();
    from.push_back(r);
    MPI_Irecv(&heard[size_t(r)], 1, MPI_INT, r, 0, rollCallComm,
              &receives.back());
  }
  using Clock = std::chrono::steady_clock;
  const Clock::time_point end =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(seconds));
  int done = 0;
  while (Clock::now() < end) {
    MPI_Testall(int(receives.size()), receives.data(), &done,
                MPI_STATUSES_IGNORE);
    if (done)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (size_t i = 0; i < from.size(); ++i)
    if (!heard[size_t(from[i])])
      silent.push_back(from[i]);
  // Receives still open are withdrawn, so a later roll call matches only
  // its own answers.
  for (MPI_Request &r : receives)
    if (r != MPI_REQUEST_NULL) {
      MPI_Cancel(&r);
      MPI_Request_free(&r);
    }
  return silent;
}

std::vector<std::string> Comm::allgatherOnNode(const std::string &text) {
  if (!mpi)
    return {text};
  return allgatherText(nodeComm, nodeCount, text);
}

std::vector<std::string> Comm::allgatherText(MPI_Comm group, int members,
                                             const std::string &text) {
  const int n = mpiCount(int64_t(text.size()));
  std::vector<int> sizes(static_cast<size_t>(members));
  MPI_Request r;
  MPI_Iallgather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, group, &r);
  wait(&r, 1, "every rank's host name");
  std::vector<int> displs(sizes.size());
  int total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    displs[i] = total;
    total += sizes[i];
  }
  std::string all(size_t(total), '\0');
  MPI_Iallgatherv(text.data(), n, MPI_CHAR, all.data(), sizes.data(),
                  displs.data(), MPI_CHAR, group, &r);
  wait(&r, 1, "every rank's host name");
  std::vector<std::string> out;
  for (size_t i = 0; i < sizes.size(); ++i)
    out.push_back(all.substr(size_t(displs[i]), size_t(sizes[i])));
  return out;
}

Comm::~Comm() {
  if (!mpi)
    return;
  if (ppComm != MPI_COMM_NULL)
    MPI_Comm_free(&ppComm);
  if (dpComm != MPI_COMM_NULL)
    MPI_Comm_free(&dpComm);
  if (tpComm != MPI_COMM_NULL)
    MPI_Comm_free(&tpComm);
  if (expertComm != MPI_COMM_NULL)
    MPI_Comm_free(&expertComm);
  if (expertDpComm != MPI_COMM_NULL)
    MPI_Comm_free(&expertDpComm);
  if (expertReplicaComm != MPI_COMM_NULL)
    MPI_Comm_free(&expertReplicaComm);
  if (nodeComm != MPI_COMM_NULL)
    MPI_Comm_free(&nodeComm);
  if (rollCallComm != MPI_COMM_NULL)
    MPI_Comm_free(&rollCallComm);
  MPI_Finalize();
}

void Comm::setGrid(int64_t ppSize, int64_t dpSize, int64_t tpSize) {
  pp = ppSize;
  dp = dpSize;
  tp = tpSize;
  const RankGrid grid = RankGrid::megatron(tp, dp, pp);
  pp_rank = grid.coordinate(worldRank, "pp");
  dp_rank = grid.coordinate(worldRank, "dp");
  tp_rank = grid.coordinate(worldRank, "tp");
  if (!mpi)
    return;
  MPI_Comm_split(MPI_COMM_WORLD, pipelineColor(), int(pp_rank), &ppComm);
  MPI_Comm_split(MPI_COMM_WORLD, dpColor(), int(dp_rank), &dpComm);
  MPI_Comm_split(MPI_COMM_WORLD, tpColor(), int(tp_rank), &tpComm);
}

void Comm::setExpertGroup(int64_t replicas) {
  if (replicas < 1 || dp % replicas != 0)
    throw RuntimeError(fmt::format(
        "error: an expert grid over {} data-parallel replicas does not fit "
        "{} of them\nhelp: recompile the artifact (parallel.ep and "
        "parallel.etp, with etp x ep dividing tp x dp)",
        replicas, dp));
  expert_replicas = replicas;
  if (!mpi || replicas == 1)
    return;
  // Colours: the tp-ep group by (pp, dp / m); the expert-data-parallel
  // group by (pp, dp mod m, tp); the replicas' group by (pp, dp / m, tp).
  MPI_Comm_split(MPI_COMM_WORLD,
                 int(pp_rank * (dp / replicas) + dp_rank / replicas),
                 int(expertRank()), &expertComm);
  MPI_Comm_split(MPI_COMM_WORLD,
                 int((pp_rank * replicas + dp_rank % replicas) * tp + tp_rank),
                 int(expertDpRank()), &expertDpComm);
  MPI_Comm_split(
      MPI_COMM_WORLD,
      int((pp_rank * (dp / replicas) + dp_rank / replicas) * tp + tp_rank),
      int(expertReplicaRank()), &expertReplicaComm);
}

void Comm::poll(const std::function<bool()> &done, const std::string &what) {
  cpu::ProfileScope scope(cpu::KernelClass::Communication);
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  Clock::time_point nextHook = start + std::chrono::seconds(1);
  std::chrono::microseconds pause(20);
  while (!done()) {
    Clock::time_point t = Clock::now();
    // Spin through the short waits of a healthy pipeline; back off to 1 ms
    // sleeps once a wait has lasted 5 ms.
    if (t - start > std::chrono::milliseconds(5)) {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
    if (waitHook && t >= nextHook) {
      nextHook = t + std::chrono::seconds(1);
      waitHook(std::chrono::duration<double>(t - start).count(),
               waitContext.empty() ? what : waitContext + ", " + what);
    }
  }
}

void Comm::wait(MPI_Request *requests, int n, const std::string &what) {
  poll(
      [&] {
        int done = 0;
        MPI_Testall(n, requests, &done, MPI_STATUSES_IGNORE);
        return done != 0;
      },
      what);
}

void Comm::gatherTo0(MPI_Comm group, int64_t members, const float *block,
                     int64_t count, float *all, const std::string &what) {
  if (members == 1) {
    std::copy(block, block + count, all);
    return;
  }
  MPI_Request r;
  MPI_Igather(block, mpiCount(count), MPI_FLOAT, all, mpiCount(count),
              MPI_FLOAT, 0, group, &r);
  wait(&r, 1, what);
}

void Comm::gatherTp(const float *block, int64_t count, float *all) {
  gatherTo0(tpComm, tp, block, count, all,
            "the checkpoint's gather to tensor-parallel rank 0");
}

void Comm::gatherExpert(const float *block, int64_t count, float *all) {
  gatherTo0(expertGroup(), expertSize(), block, count, all,
            "the checkpoint's gather to the tp-ep group's rank 0");
}

void Comm::gatherExpertDp(const float *block, int64_t count, float *all) {
  gatherTo0(expertDpGroup(), expertDpSize(), block, count, all,
            "the optimizer state's gather to expert-data-parallel rank 0");
}

void Comm::gatherDp(const float *block, int64_t count, float *all) {
  gatherTo0(dpComm, dp, block, count, all,
            "the optimizer state's gather to data-parallel rank 0");
}

std::vector<double> Comm::allgather(const std::vector<double> &values) {
  if (!mpi)
    return values;
  std::vector<double> all(values.size() * size_t(worldSize));
  MPI_Request r;
  MPI_Iallgather(values.data(), int(values.size()), MPI_DOUBLE, all.data(),
                 int(values.size()), MPI_DOUBLE, MPI_COMM_WORLD, &r);
  wait(&r, 1, "every rank at the step's agreement");
  return all;
}

std::vector<std::string> Comm::gatherToRoot(const std::string &bytes) {
  if (!mpi)
    return {bytes};
  int n = mpiCount(int64_t(bytes.size()));
  std::vector<int> sizes(worldRank == 0 ? worldSize : 0);
  MPI_Request r;
  MPI_Igather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, MPI_COMM_WORLD, &r);
  wait(&r, 1, "every rank's report to rank 0");
  std::vector<int> displs(sizes.size());
  int64_t total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    displs[i] = int(total);
    total += sizes[i];
  }
  std::string all(size_t(total), '\0');
  MPI_Igatherv(bytes.data(), n, MPI_CHAR, all.data(), sizes.data(),
               displs.data(), MPI_CHAR, 0, MPI_COMM_WORLD, &r);
  wait(&r, 1, "every rank's report to rank 0");
  std::vector<std::string> out;
  for (size_t i = 0; i < sizes.size(); ++i)
    out.push_back(all.substr(size_t(displs[i]), size_t(sizes[i])));
  return out;
}

void Comm::barrier() {
  if (!mpi)
    return;
  MPI_Request r;
  MPI_Ibarrier(MPI_COMM_WORLD, &r);
  wait(&r, 1, "every rank at a barrier");
}

void Comm::abort(int code) {
  if (mpi)
    MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

void agreeAcrossRanks(Comm &comm, const std::string &error,
                      const std::string &what) {
  std::vector<double> failed = comm.allgather({error.empty() ? 0.0 : 1.0});
  bool any = false;
  for (double f : failed)
    any |= f != 0;
  if (!any)
    return;
  // Rank 0 lists each distinct message once with the ranks that raised it.
  std::vector<std::string> messages = comm.gatherToRoot(error);
  std::vector<std::pair<std::string, std::vector<size_t>>> distinct;
  for (size_t r = 0; r < messages.size(); ++r) {
    std::string m = messages[r];
    if (m.empty())
      continue;
    if (m.rfind("error: ", 0) == 0)
      m = m.substr(7);
    auto it = std::find_if(distinct.begin(), distinct.end(),
                           [&](const auto &d) { return d.first == m; });
    if (it == distinct.end())
      distinct.push_back({m, {r}});
    else
      it->second.push_back(r);
  }
  std::string text = what;
  for (const auto &[m, ranks] : distinct)
    text += fmt::format("\n[rank{} {}] {}", ranks.size() > 1 ? "s" : "",
                        fmt::join(ranks, ","), m);
  throw CollectiveError(text);
}

void onEveryRank(Comm &comm, const std::string &what,
                 const std::function<void()> &work) {
  if (!comm.distributed())
    return work();
  std::string error;
  try {
    work();
  } catch (const RuntimeError &e) {
    error = e.what();
  }
  agreeAcrossRanks(comm, error, what);
}

} // namespace hypipe::rt
