//===- cuda_ipc.cu - CUDA IPC between two processes on one GPU ------------===//
//
// Shows that two processes on GPU 0 share device memory and order their work
// through CUDA IPC, the way two pipeline ranks on one GPU would hand
// activations over without a host copy. The process forks before any CUDA
// call; then
//   1. the parent fills a 256 MiB buffer with pattern A and sends its
//      cudaIpcMemHandle and the cudaIpcEventHandle of an interprocess event
//      through a pipe;
//   2. the child opens both, checks every word of pattern A, spins 100 ms on
//      the GPU, writes pattern B, records the shared event and tells the
//      parent without synchronising;
//   3. the parent waits on the event (cudaEventSynchronize) and checks every
//      word of pattern B: a pass shows that the IPC event orders work across
//      the processes (without it, the parent would read A behind the spin);
//   4. the child copies its own 256 MiB buffer (pattern C) into the parent's
//      buffer, event-timed, and the parent checks pattern C.
// Figure: `@figure ipc_copy_gbs X GB/s`, bytes copied (each read once and
// written once) per second, median of 10 after 2 warm-ups.
// Usage: cuda_ipc
//
//===----------------------------------------------------------------------===//
#include "probe.cuh"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

constexpr uint64_t kBytes = uint64_t(256) << 20;
constexpr uint64_t kWords = kBytes / sizeof(uint32_t);
constexpr uint32_t kSeedA = 0xA, kSeedB = 0xB, kSeedC = 0xC;

/// Parent to child: what to open.
struct Export {
  cudaIpcMemHandle_t memory;
  cudaIpcEventHandle_t event;
};

/// Either direction: a step done, with the copy rate when it is the copy.
enum class Step : int32_t { Written = 1, Verified, Copied, Done };
struct Message {
  Step step;
  double gbs;
};

/// Moves all `n` bytes between `fd` and `p` with `io` (read or write),
/// again after a signal; false when the other process has gone.
template <class Io, class Byte>
bool transferAll(Io io, int fd, Byte *p, size_t n) {
  while (n > 0) {
    ssize_t k = io(fd, p, n);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return false;
    p += k;
    n -= size_t(k);
  }
  return true;
}

bool writeAll(int fd, const void *data, size_t n) {
  return transferAll(write, fd, static_cast<const char *>(data), n);
}

bool readAll(int fd, void *data, size_t n) {
  return transferAll(read, fd, static_cast<char *>(data), n);
}

/// Holds the GPU for about `ns` nanoseconds, so that work queued behind it
/// is still pending when the other process looks.
__global__ void spinKernel(uint64_t ns) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  while (now - start < ns);
}

/// False when the other process has gone.
bool send(int fd, Step step, double gbs = 0) {
  Message m{step, gbs};
  return writeAll(fd, &m, sizeof(m));
}

int child(int fromParent, int toParent) {
  if (!probe::gpuVisible())
    std::exit(probe::kSkipped);
  Export handles;
  if (!readAll(fromParent, &handles, sizeof(handles)))
    probe::fail("child: the parent went away before sending its handles");
  PROBE_CUDA(cudaSetDevice(0));
  cudaStream_t stream;
  PROBE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  void *opened = nullptr;
  PROBE_CUDA(cudaIpcOpenMemHandle(&opened, handles.memory,
                                  cudaIpcMemLazyEnablePeerAccess));
  auto *shared = static_cast<uint32_t *>(opened);
  cudaEvent_t event;
  PROBE_CUDA(cudaIpcOpenEventHandle(&event, handles.event));

  std::string bad = probe::checkPattern(shared, kWords, kSeedA, stream);
  if (!bad.empty())
    probe::fail("child: reading the parent's buffer through IPC: " + bad);
  std::printf("child: read pattern A, all %llu words, through the IPC "
              "handle\n",
              (unsigned long long)kWords);

  spinKernel<<<1, 1, 0, stream>>>(100'000'000);
  probe::checkLaunch("spinKernel");
  probe::fillPattern(shared, kWords, kSeedB, stream);
  PROBE_CUDA(cudaEventRecord(event, stream));
  if (!send(toParent, Step::Written))
    probe::fail("child: the parent went away before pattern B");

  Message m;
  if (!readAll(fromParent, &m, sizeof(m)) || m.step != Step::Verified)
    probe::fail("child: the parent did not confirm pattern B");

  uint32_t *own = nullptr;
  PROBE_CUDA(cudaMalloc(&own, kBytes));
  probe::fillPattern(own, kWords, kSeedC, stream);
  double ms = probe::medianMs(stream, 2, 10, 1, [&](int) {
    PROBE_CUDA(
        cudaMemcpyAsync(shared, own, kBytes, cudaMemcpyDeviceToDevice, stream));
  });
  PROBE_CUDA(cudaStreamSynchronize(stream));
  if (!send(toParent, Step::Copied, double(kBytes) / (ms * 1e-3) / 1e9))
    probe::fail("child: the parent went away before pattern C");

  if (!readAll(fromParent, &m, sizeof(m)) || m.step != Step::Done)
    probe::fail("child: the parent did not finish");
  PROBE_CUDA(cudaFree(own));
  PROBE_CUDA(cudaEventDestroy(event));
  PROBE_CUDA(cudaIpcCloseMemHandle(opened));
  PROBE_CUDA(cudaStreamDestroy(stream));
  return probe::kPassed;
}

pid_t childPid = -1;

/// The child's exit, as a sentence; 77 from the child is a skip here too.
[[noreturn]] void childGone(const char *when) {
  int status = 0;
  if (waitpid(childPid, &status, 0) < 0)
    probe::fail(std::string("waitpid: ") + std::strerror(errno));
  if (WIFEXITED(status) && WEXITSTATUS(status) == probe::kSkipped)
    probe::skip("the child process sees no GPU");
  std::string how =
      WIFEXITED(status)
          ? "exited with " + std::to_string(WEXITSTATUS(status))
          : "was killed by signal " + std::to_string(WTERMSIG(status));
  probe::fail(std::string("the child process ") + how + " " + when);
}

int parent(int toChild, int fromChild) {
  if (!probe::gpuVisible()) {
    close(toChild);
    waitpid(childPid, nullptr, 0);
    probe::skip("no GPU visible");
  }
  PROBE_CUDA(cudaSetDevice(0));
  probe::printDevice(0);
  cudaStream_t stream;
  PROBE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  uint32_t *buffer = nullptr;
  PROBE_CUDA(cudaMalloc(&buffer, kBytes));
  probe::fillPattern(buffer, kWords, kSeedA, stream);
  PROBE_CUDA(cudaStreamSynchronize(stream));
  cudaEvent_t event;
  PROBE_CUDA(cudaEventCreateWithFlags(&event, cudaEventInterprocess |
                                                  cudaEventDisableTiming));
  Export handles;
  PROBE_CUDA(cudaIpcGetMemHandle(&handles.memory, buffer));
  PROBE_CUDA(cudaIpcGetEventHandle(&handles.event, event));
  if (!writeAll(toChild, &handles, sizeof(handles)))
    childGone("before taking the handles");

  Message m;
  if (!readAll(fromChild, &m, sizeof(m)) || m.step != Step::Written)
    childGone("before writing pattern B");
  PROBE_CUDA(cudaEventSynchronize(event));
  std::string bad = probe::checkPattern(buffer, kWords, kSeedB, stream);
  if (!bad.empty())
    probe::fail("after waiting on the child's IPC event: " + bad);
  std::printf("parent: pattern B complete after waiting on the IPC event\n");
  if (!send(toChild, Step::Verified))
    childGone("before copying pattern C");

  if (!readAll(fromChild, &m, sizeof(m)) || m.step != Step::Copied)
    childGone("before copying pattern C");
  bad = probe::checkPattern(buffer, kWords, kSeedC, stream);
  if (!bad.empty())
    probe::fail("after the child's copies into the buffer: " + bad);
  std::printf("parent: pattern C complete after the child's copies\n");
  std::printf("device-to-device copy, child into the parent's 256 MiB: "
              "%.1f GB/s\n",
              m.gbs);
  probe::figure("ipc_copy_gbs", m.gbs, "GB/s");
  if (!send(toChild, Step::Done))
    childGone("before the end");

  int status = 0;
  if (waitpid(childPid, &status, 0) < 0)
    probe::fail(std::string("waitpid: ") + std::strerror(errno));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    probe::fail("the child process did not exit cleanly (status " +
                std::to_string(status) + ")");
  PROBE_CUDA(cudaEventDestroy(event));
  PROBE_CUDA(cudaFree(buffer));
  PROBE_CUDA(cudaStreamDestroy(stream));
  std::printf("PASSED: CUDA IPC memory and event handles between two "
              "processes\n");
  return probe::kPassed;
}

} // namespace

int main() {
  int down[2], up[2];
  if (pipe(down) != 0 || pipe(up) != 0)
    probe::fail(std::string("pipe: ") + std::strerror(errno));
  std::signal(SIGPIPE, SIG_IGN); // a gone peer is a failed write, not a kill
  std::fflush(stdout);
  std::fflush(stderr);
  childPid = fork(); // before any CUDA call: a forked CUDA context is unusable
  if (childPid < 0)
    probe::fail(std::string("fork: ") + std::strerror(errno));
  if (childPid == 0) {
    close(down[1]);
    close(up[0]);
    return child(down[0], up[1]);
  }
  close(down[0]);
  close(up[1]);
  return parent(down[1], up[0]);
}
