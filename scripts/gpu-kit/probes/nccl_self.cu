//===- nccl_self.cu - NCCL works at communicator size 1 -------------------===//
//
// Shows that the node's NCCL (libnccl.so.2, opened with dlopen so that its
// absence is a skip) initialises a one-rank communicator on GPU 0 and runs
// every operation hypipe's pipeline and data-parallel paths use, each
// checked element by element against its input on poisoned outputs:
// a send to self and a receive from self in one group, an all-reduce (sum),
// a reduce-scatter and an all-gather. Prints `@figure nccl_version V -`
// (ncclGetVersion's code, e.g. 22809 for 2.28.9).
// Usage: nccl_self
//
//===----------------------------------------------------------------------===//
#include "probe.cuh"

#include <nccl.h>

#include <dlfcn.h>

#include <cstring>

namespace {

/// The NCCL entry points this probe calls, found in libnccl.so.2 at run time.
struct Nccl {
  decltype(&::ncclGetVersion) getVersion;
  decltype(&::ncclGetErrorString) getErrorString;
  decltype(&::ncclGetUniqueId) getUniqueId;
  decltype(&::ncclCommInitRank) commInitRank;
  decltype(&::ncclCommGetAsyncError) commGetAsyncError;
  decltype(&::ncclCommDestroy) commDestroy;
  decltype(&::ncclGroupStart) groupStart;
  decltype(&::ncclGroupEnd) groupEnd;
  decltype(&::ncclSend) send;
  decltype(&::ncclRecv) recv;
  decltype(&::ncclAllReduce) allReduce;
  decltype(&::ncclReduceScatter) reduceScatter;
  decltype(&::ncclAllGather) allGather;
};

template <class F> void bind(void *lib, const char *symbol, F &fn) {
  fn = reinterpret_cast<F>(dlsym(lib, symbol));
  if (!fn)
    probe::fail(std::string("libnccl.so.2 has no ") + symbol +
                " (NCCL older than 2.7?)");
}

Nccl loadNccl() {
  void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    probe::skip(std::string("libnccl.so.2 not found: ") + dlerror());
  Nccl n{};
  bind(lib, "ncclGetVersion", n.getVersion);
  bind(lib, "ncclGetErrorString", n.getErrorString);
  bind(lib, "ncclGetUniqueId", n.getUniqueId);
  bind(lib, "ncclCommInitRank", n.commInitRank);
  bind(lib, "ncclCommGetAsyncError", n.commGetAsyncError);
  bind(lib, "ncclCommDestroy", n.commDestroy);
  bind(lib, "ncclGroupStart", n.groupStart);
  bind(lib, "ncclGroupEnd", n.groupEnd);
  bind(lib, "ncclSend", n.send);
  bind(lib, "ncclRecv", n.recv);
  bind(lib, "ncclAllReduce", n.allReduce);
  bind(lib, "ncclReduceScatter", n.reduceScatter);
  bind(lib, "ncclAllGather", n.allGather);
  return n;
}

Nccl nccl;

void check(ncclResult_t status, const char *call) {
  if (status != ncclSuccess)
    probe::fail(std::string(call) + ": " + nccl.getErrorString(status));
}

#define PROBE_NCCL(call) check((call), #call)

/// Fails unless the `n` floats at `out` equal those at `expected` bit for
/// bit (a sum over one rank adds nothing, so nothing may round).
void expectEqual(const float *out, const std::vector<float> &expected, size_t n,
                 const char *what, cudaStream_t stream) {
  std::vector<float> host(n);
  PROBE_CUDA(cudaMemcpyAsync(host.data(), out, n * sizeof(float),
                             cudaMemcpyDeviceToHost, stream));
  PROBE_CUDA(cudaStreamSynchronize(stream));
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < n; ++i)
    if (std::memcmp(&host[i], &expected[i], sizeof(float)) != 0 && !bad++)
      first = i;
  if (bad)
    probe::fail(std::string(what) + ": " + std::to_string(bad) + " of " +
                std::to_string(n) + " elements wrong, the first at " +
                std::to_string(first) + " (" + std::to_string(host[first]) +
                " instead of " + std::to_string(expected[first]) + ")");
  std::printf("%s: %zu elements correct\n", what, n);
}

/// Sets every byte of the output to 0xff (a NaN) so that an element the
/// operation did not write cannot pass.
void poison(float *out, size_t n, cudaStream_t stream) {
  PROBE_CUDA(cudaMemsetAsync(out, 0xff, n * sizeof(float), stream));
}

} // namespace

int main() {
  probe::requireGpu();
  nccl = loadNccl();
  int version = 0;
  PROBE_NCCL(nccl.getVersion(&version));
  std::printf("NCCL %d.%d.%d\n", version / 10000, version / 100 % 100,
              version % 100);
  probe::figure("nccl_version", version, "-");

  PROBE_CUDA(cudaSetDevice(0));
  probe::printDevice(0);
  cudaStream_t stream;
  PROBE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  ncclUniqueId id;
  PROBE_NCCL(nccl.getUniqueId(&id));
  ncclComm_t comm;
  PROBE_NCCL(nccl.commInitRank(&comm, 1, id, 0));

  const size_t n = size_t(1) << 20;
  std::vector<float> input(n);
  uint32_t state = 12345;
  for (float &x : input) {
    state = state * 1664525u + 1013904223u;
    x = float(state >> 8) / float(1 << 24) * 2.0f - 1.0f;
    if (x == 0.0f)
      x = 0.5f;
  }
  float *in = nullptr, *out = nullptr;
  PROBE_CUDA(cudaMalloc(&in, n * sizeof(float)));
  PROBE_CUDA(cudaMalloc(&out, n * sizeof(float)));
  PROBE_CUDA(cudaMemcpyAsync(in, input.data(), n * sizeof(float),
                             cudaMemcpyHostToDevice, stream));

  poison(out, n, stream);
  PROBE_NCCL(nccl.groupStart());
  PROBE_NCCL(nccl.send(in, n, ncclFloat32, 0, comm, stream));
  PROBE_NCCL(nccl.recv(out, n, ncclFloat32, 0, comm, stream));
  PROBE_NCCL(nccl.groupEnd());
  expectEqual(out, input, n, "send/recv to self", stream);

  poison(out, n, stream);
  PROBE_NCCL(nccl.allReduce(in, out, n, ncclFloat32, ncclSum, comm, stream));
  expectEqual(out, input, n, "all-reduce (sum) of one rank", stream);

  // One rank receives the whole count of a reduce-scatter and gathers only
  // its own part.
  poison(out, n, stream);
  PROBE_NCCL(
      nccl.reduceScatter(in, out, n, ncclFloat32, ncclSum, comm, stream));
  expectEqual(out, input, n, "reduce-scatter of one rank", stream);

  poison(out, n, stream);
  PROBE_NCCL(nccl.allGather(in, out, n, ncclFloat32, comm, stream));
  expectEqual(out, input, n, "all-gather of one rank", stream);

  ncclResult_t async = ncclSuccess;
  PROBE_NCCL(nccl.commGetAsyncError(comm, &async));
  PROBE_NCCL(async);
  PROBE_NCCL(nccl.commDestroy(comm));
  PROBE_CUDA(cudaFree(in));
  PROBE_CUDA(cudaFree(out));
  PROBE_CUDA(cudaStreamDestroy(stream));
  std::printf("PASSED: NCCL at communicator size 1\n");
  return probe::kPassed;
}
