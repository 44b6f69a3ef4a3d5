//===- mpi_share_gpu.cu - two MPI ranks share GPU 0 -----------------------===//
//
// Shows that two MPI ranks (each its own process and CUDA context) can both
// run on GPU 0 and exchange device data staged through host memory, the path
// hypipe's pipeline ranks take when MPI is not CUDA-aware:
//   - each rank fills 64 MiB on the device with its own pattern, copies it
//     to pinned host memory, MPI_Sendrecv's it with the peer, copies the
//     peer's data up and checks every word on the device;
//   - a staged ping-pong: rank 0 copies down, sends, rank 1 receives, copies
//     up, copies down and sends back, rank 0 receives and copies up; the
//     bounced data is checked on both ranks after the timing.
// Figure (rank 0 only): `@figure mpi_staged_gbs X GB/s`, 2 x 64 MiB per
// round trip over the round trip's MPI_Wtime (host-side, since the trip
// crosses processes), median of 10 after 3 warm-ups.
// A failed CUDA or MPI call aborts the job (MPI_Abort) so that no rank waits
// on a peer that left; a mismatch is agreed by both ranks and exits 1; with
// no GPU on either rank both exit 77.
// Usage: mpirun -np 2 mpi_share_gpu
//
//===----------------------------------------------------------------------===//
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include "probe.cuh"

namespace {

constexpr uint64_t kBytes = uint64_t(64) << 20;
constexpr uint64_t kWords = kBytes / sizeof(uint32_t);

void checkMpi(int status, const char *call) {
  if (status == MPI_SUCCESS)
    return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(status, text, &length);
  probe::fail(std::string(call) + ": " + std::string(text, size_t(length)));
}

#define PROBE_MPI(call) checkMpi((call), #call)

/// True on every rank when some rank passes true.
bool anyRank(bool mine) {
  int in = mine, out = 0;
  PROBE_MPI(MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  return out != 0;
}

uint32_t seedOf(int rank) { return uint32_t(rank) + 1; }

} // namespace

int main(int argc, char **argv) {
  PROBE_MPI(MPI_Init(&argc, &argv));
  probe::exitHook = [](int code) { MPI_Abort(MPI_COMM_WORLD, code); };
  // Errors come back as codes, to be named by PROBE_MPI.
  PROBE_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  int rank = 0, size = 0;
  PROBE_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  PROBE_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
  if (anyRank(!probe::gpuVisible())) {
    if (rank == 0)
      std::printf("SKIPPED: no GPU visible on some rank\n");
    MPI_Finalize();
    return probe::kSkipped;
  }
  if (size != 2)
    probe::fail("run with exactly 2 ranks (mpirun -np 2), not " +
                std::to_string(size));
  const int peer = 1 - rank;
  PROBE_CUDA(cudaSetDevice(0));
  if (rank == 0)
    probe::printDevice(0);
  cudaStream_t stream;
  PROBE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  uint32_t *mine = nullptr, *theirs = nullptr, *sendHost = nullptr,
           *recvHost = nullptr;
  PROBE_CUDA(cudaMalloc(&mine, kBytes));
  PROBE_CUDA(cudaMalloc(&theirs, kBytes));
  PROBE_CUDA(cudaMallocHost(&sendHost, kBytes));
  PROBE_CUDA(cudaMallocHost(&recvHost, kBytes));
  const int count = int(kBytes);

  // Exchange: each rank ends with the peer's pattern in `theirs`.
  probe::fillPattern(mine, kWords, seedOf(rank), stream);
  PROBE_CUDA(cudaMemsetAsync(theirs, 0, kBytes, stream));
  PROBE_CUDA(
      cudaMemcpyAsync(sendHost, mine, kBytes, cudaMemcpyDeviceToHost, stream));
  PROBE_CUDA(cudaStreamSynchronize(stream));
  PROBE_MPI(MPI_Sendrecv(sendHost, count, MPI_BYTE, peer, 0, recvHost, count,
                         MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  PROBE_CUDA(cudaMemcpyAsync(theirs, recvHost, kBytes, cudaMemcpyHostToDevice,
                             stream));
  std::string bad = probe::checkPattern(theirs, kWords, seedOf(peer), stream);
  if (!bad.empty())
    std::fprintf(stderr, "rank %d: the peer's data after MPI_Sendrecv: %s\n",
                 rank, bad.c_str());
  if (anyRank(!bad.empty())) {
    if (rank == 0)
      std::fprintf(stderr, "FAILED: exchange through host memory\n");
    MPI_Finalize();
    return probe::kFailed;
  }
  std::printf("rank %d: the peer's %llu words arrived intact on GPU 0\n", rank,
              (unsigned long long)kWords);

  // Staged ping-pong; synchronous copies (pinned memory) so that the host
  // clock brackets the device work.
  PROBE_CUDA(cudaMemsetAsync(theirs, 0, kBytes, stream));
  PROBE_CUDA(cudaStreamSynchronize(stream));
  std::vector<double> seconds;
  for (int i = 0; i < 3 + 10; ++i) {
    PROBE_MPI(MPI_Barrier(MPI_COMM_WORLD));
    double start = MPI_Wtime();
    if (rank == 0) {
      PROBE_CUDA(cudaMemcpy(sendHost, mine, kBytes, cudaMemcpyDeviceToHost));
      PROBE_MPI(MPI_Send(sendHost, count, MPI_BYTE, peer, 1, MPI_COMM_WORLD));
      PROBE_MPI(MPI_Recv(recvHost, count, MPI_BYTE, peer, 2, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE));
      PROBE_CUDA(cudaMemcpy(theirs, recvHost, kBytes, cudaMemcpyHostToDevice));
    } else {
      PROBE_MPI(MPI_Recv(recvHost, count, MPI_BYTE, peer, 1, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE));
      PROBE_CUDA(cudaMemcpy(theirs, recvHost, kBytes, cudaMemcpyHostToDevice));
      PROBE_CUDA(cudaMemcpy(sendHost, theirs, kBytes, cudaMemcpyDeviceToHost));
      PROBE_MPI(MPI_Send(sendHost, count, MPI_BYTE, peer, 2, MPI_COMM_WORLD));
    }
    if (i >= 3)
      seconds.push_back(MPI_Wtime() - start);
  }
  // Both ranks now hold rank 0's pattern in `theirs`.
  bad = probe::checkPattern(theirs, kWords, seedOf(0), stream);
  if (!bad.empty())
    std::fprintf(stderr, "rank %d: after the ping-pong: %s\n", rank,
                 bad.c_str());
  if (anyRank(!bad.empty())) {
    if (rank == 0)
      std::fprintf(stderr, "FAILED: staged ping-pong data\n");
    MPI_Finalize();
    return probe::kFailed;
  }
  if (rank == 0) {
    double gbs = 2.0 * double(kBytes) / probe::median(seconds) / 1e9;
    std::printf("staged ping-pong, 64 MiB each way (D2H, MPI, H2D): %.2f "
                "GB/s\n",
                gbs);
    probe::figure("mpi_staged_gbs", gbs, "GB/s");
    std::printf("PASSED: two MPI ranks share GPU 0\n");
  }
  PROBE_CUDA(cudaFreeHost(sendHost));
  PROBE_CUDA(cudaFreeHost(recvHost));
  PROBE_CUDA(cudaFree(mine));
  PROBE_CUDA(cudaFree(theirs));
  PROBE_CUDA(cudaStreamDestroy(stream));
  PROBE_MPI(MPI_Finalize());
  return probe::kPassed;
}
