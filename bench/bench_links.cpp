//===- bench_links.cpp - a link class measured: latency and bandwidth -----===//
//
// Under mpirun with 2 or more ranks: the one-way time of a message between
// ranks 0 and 1 (half a ping-pong, median of repeats) for sizes from 8 bytes
// to 64 MiB, and MPI_Allreduce of fp32 sums over all ranks, each beside
// what core/model/Cluster.h predicts for it with the link fitted here
// (latency: the smallest message; bandwidth: the largest). This is where
// the device table's cpu row comes from (bench/results/cluster.md).
//
//===----------------------------------------------------------------------===//
#include "core/model/Cluster.h"

#include <mpi.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <vector>

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// One-way seconds of `bytes` from rank 0 to 1 (ranks past 1 idle).
double oneWay(int rank, std::vector<char> &buffer, size_t bytes, int repeats) {
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    if (rank == 0) {
      MPI_Send(buffer.data(), int(bytes), MPI_BYTE, 1, 0, MPI_COMM_WORLD);
      MPI_Recv(buffer.data(), int(bytes), MPI_BYTE, 1, 0, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
    } else if (rank == 1) {
      MPI_Recv(buffer.data(), int(bytes), MPI_BYTE, 0, 0, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
      MPI_Send(buffer.data(), int(bytes), MPI_BYTE, 0, 0, MPI_COMM_WORLD);
    }
    times.push_back((MPI_Wtime() - start) / 2);
  }
  double t = median(times);
  MPI_Bcast(&t, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return t;
}

double allReduce(std::vector<float> &data, size_t floats, int repeats) {
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    MPI_Allreduce(MPI_IN_PLACE, data.data(), int(floats), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
    double t = MPI_Wtime() - start, slowest = 0;
    MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    times.push_back(slowest);
  }
  return median(times);
}

} // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) {
    std::fprintf(stderr, "bench-links: run it under mpirun -n 2 (or more)\n");
    MPI_Finalize();
    return 1;
  }
  const size_t most = size_t(64) << 20;
  std::vector<char> buffer(most, 1);
  std::vector<size_t> sizes;
  for (size_t b = 8; b <= most; b *= 8)
    sizes.push_back(b);
  sizes.push_back(most);
  std::vector<double> times;
  for (size_t b : sizes)
    times.push_back(oneWay(rank, buffer, b, b >= (size_t(1) << 20) ? 9 : 101));
  hypipe::Link link{double(sizes.back()) / times.back(), times.front()};
  if (rank == 0) {
    fmt::print("ranks: {}\nfitted link: {:.3g} GB/s, {:.3g} us\n\n", size,
               link.bytesPerSecond / 1e9, link.latencySeconds * 1e6);
    fmt::print("| message | one-way (us) | fitted link (us) | ratio |\n"
               "|---:|---:|---:|---:|\n");
    for (size_t i = 0; i < sizes.size(); ++i) {
      double model = link.seconds(double(sizes[i]));
      fmt::print("| {} B | {:.2f} | {:.2f} | {:.2f} |\n", sizes[i],
                 times[i] * 1e6, model * 1e6, times[i] / model);
    }
    fmt::print("\n| all-reduce, fp32 | measured (ms) | ring model (ms) | ratio "
               "|\n|---:|---:|---:|---:|\n");
  }
  std::vector<float> data(most / 4, 1.0f);
  for (size_t floats : {size_t(1) << 16, size_t(1) << 20, most / 4}) {
    double t = allReduce(data, floats, 7);
    double model = hypipe::allReduceSeconds(size, double(floats) * 4, link);
    if (rank == 0)
      fmt::print("| {} B | {:.3f} | {:.3f} | {:.2f} |\n", floats * 4, t * 1e3,
                 model * 1e3, t / model);
  }
  MPI_Finalize();
  return 0;
}
