//===- kernel_times.cpp - every kernel's GPU time, as CSV, from CUPTI -----===//
//
// A CUPTI injection library: the CUDA driver loads it into any CUDA program
// started with CUDA_INJECTION64_PATH=/path/libkernel_times.so and calls
// InitializeInjection during cuInit. It records every kernel, memcpy and
// memset through CUPTI's activity API (CONCURRENT_KERNEL, MEMCPY, MEMSET:
// GPU start and end timestamps, without serialising kernels) and, at exit,
// flushes CUPTI and writes one CSV row per activity to $HYPIPE_KERNEL_TIMES
// (default kernel_times.csv; "%p" in it becomes the process id, for
// several ranks):
//   kind,name,start_ns,end_ns,stream,grid,block
// kind is kernel, memcpy or memset; a kernel's name is demangled
// (abi::__cxa_demangle, the mangled name when that fails) and CSV-quoted;
// a copy is named "memcpy <HtoD|DtoH|DtoD|...> <bytes>", a fill
// "memset <bytes>"; grid and block are "XxYxZ" (empty for copies).
// classify_kernels.py sums the CSV by hypipe kernel class.
// Records arrive only if the program exits normally (atexit): a crash or
// _exit loses them. Failures are reported on stderr and never stop the
// program.
//
//===----------------------------------------------------------------------===//
#include <cupti.h>

#include <cxxabi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unistd.h>
#include <unordered_map>
#include <vector>

namespace {

struct Activity {
  const char *kind;
  std::string name; // mangled for kernels: demangled when written
  uint64_t start, end;
  uint32_t stream;
  std::string grid, block;
};

struct Recorder {
  std::mutex mutex;
  std::vector<Activity> activities;
  size_t dropped = 0;
};

Recorder &recorder() {
  static Recorder *r = new Recorder; // never destroyed: used at exit
  return *r;
}

bool ok(CUptiResult status, const char *call) {
  if (status == CUPTI_SUCCESS)
    return true;
  const char *text = nullptr;
  if (cuptiGetResultString(status, &text) != CUPTI_SUCCESS)
    text = "unknown CUPTI error";
  std::fprintf(stderr, "kernel_times: %s: %s\n", call, text);
  return false;
}

#define CUPTI_OK(call) ok((call), #call)

constexpr size_t kBufferBytes = size_t(8) << 20;

void CUPTIAPI bufferRequested(uint8_t **buffer, size_t *size,
                              size_t *maxNumRecords) {
  *buffer = static_cast<uint8_t *>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *maxNumRecords = 0; // as many as fit
}

std::string dims(int32_t x, int32_t y, int32_t z) {
  return std::to_string(x) + "x" + std::to_string(y) + "x" + std::to_string(z);
}

const char *copyKindName(uint8_t kind) {
  switch (kind) {
  case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
    return "HtoD";
  case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
    return "DtoH";
  case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
    return "HtoA";
  case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
    return "AtoH";
  case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
    return "AtoA";
  case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
    return "AtoD";
  case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
    return "DtoA";
  case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
    return "DtoD";
  case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
    return "HtoH";
  case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
    return "PtoP";
  default:
    return "unknown";
  }
}

Activity fromRecord(const CUpti_Activity *record) {
  switch (record->kind) {
  case CUPTI_ACTIVITY_KIND_KERNEL:
  case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
    auto *k = reinterpret_cast<const CUpti_ActivityKernel10 *>(record);
    return {"kernel",
            k->name ? k->name : "?",
            k->start,
            k->end,
            k->streamId,
            dims(k->gridX, k->gridY, k->gridZ),
            dims(k->blockX, k->blockY, k->blockZ)};
  }
  case CUPTI_ACTIVITY_KIND_MEMCPY: {
    auto *m = reinterpret_cast<const CUpti_ActivityMemcpy6 *>(record);
    return {"memcpy",
            std::string("memcpy ") + copyKindName(m->copyKind) + " " +
                std::to_string(m->bytes),
            m->start,
            m->end,
            m->streamId,
            "",
            ""};
  }
  case CUPTI_ACTIVITY_KIND_MEMSET: {
    auto *m = reinterpret_cast<const CUpti_ActivityMemset4 *>(record);
    return {"memset",    "memset " + std::to_string(m->bytes),
            m->start,    m->end,
            m->streamId, "",
            ""};
  }
  default:
    return {nullptr, "", 0, 0, 0, "", ""};
  }
}

void CUPTIAPI bufferCompleted(CUcontext context, uint32_t streamId,
                              uint8_t *buffer, size_t, size_t validSize) {
  Recorder &r = recorder();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    CUpti_Activity *record = nullptr;
    for (;;) {
      CUptiResult status =
          cuptiActivityGetNextRecord(buffer, validSize, &record);
      if (status == CUPTI_ERROR_MAX_LIMIT_REACHED)
        break; // the end of the buffer
      if (!CUPTI_OK(status))
        break;
      Activity a = fromRecord(record);
      if (a.kind)
        r.activities.push_back(std::move(a));
    }
    size_t dropped = 0;
    if (CUPTI_OK(
            cuptiActivityGetNumDroppedRecords(context, streamId, &dropped)))
      r.dropped += dropped;
  }
  std::free(buffer);
}

std::string demangle(const std::string &mangled,
                     std::unordered_map<std::string, std::string> &cache) {
  auto it = cache.find(mangled);
  if (it != cache.end())
    return it->second;
  int status = 0;
  char *text = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  std::string name = status == 0 && text ? text : mangled;
  std::free(text);
  cache.emplace(mangled, name);
  return name;
}

std::string csvField(const std::string &text) {
  if (text.find_first_of(",\"\n") == std::string::npos)
    return text;
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"')
      quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

std::string outputPath() {
  const char *env = std::getenv("HYPIPE_KERNEL_TIMES");
  std::string path = env && *env ? env : "kernel_times.csv";
  size_t at = path.find("%p");
  if (at != std::string::npos)
    path.replace(at, 2, std::to_string(getpid()));
  return path;
}

void flushAndWrite() {
  CUPTI_OK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  Recorder &r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  const std::string path = outputPath();
  std::FILE *out = std::fopen(path.c_str(), "w");
  if (!out) {
    std::perror(("kernel_times: " + path).c_str());
    return;
  }
  std::fprintf(out, "kind,name,start_ns,end_ns,stream,grid,block\n");
  std::unordered_map<std::string, std::string> names;
  for (const Activity &a : r.activities) {
    std::string name = a.kind[0] == 'k' ? demangle(a.name, names) : a.name;
    std::fprintf(out, "%s,%s,%llu,%llu,%u,%s,%s\n", a.kind,
                 csvField(name).c_str(), (unsigned long long)a.start,
                 (unsigned long long)a.end, a.stream, a.grid.c_str(),
                 a.block.c_str());
  }
  if (std::fclose(out) != 0) {
    std::perror(("kernel_times: " + path).c_str());
    return;
  }
  std::fprintf(stderr, "kernel_times: %zu activities written to %s",
               r.activities.size(), path.c_str());
  if (r.dropped)
    std::fprintf(stderr, " (CUPTI dropped %zu more)", r.dropped);
  std::fprintf(stderr, "\n");
}

} // namespace

/// Called by the CUDA driver during cuInit; 1 when recording has started.
extern "C" int InitializeInjection(void) {
  static bool started = false;
  if (started)
    return 1;
  if (!CUPTI_OK(
          cuptiActivityRegisterCallbacks(bufferRequested, bufferCompleted)) ||
      !CUPTI_OK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) ||
      !CUPTI_OK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY)) ||
      !CUPTI_OK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET)))
    return 0;
  // Registered during cuInit, after the handlers the CUDA runtime registers
  // at start-up; exit handlers run last-registered first, so this one runs
  // before the runtime's teardown, while the contexts still exist.
  if (std::atexit(flushAndWrite) != 0) {
    std::fprintf(stderr, "kernel_times: atexit failed; nothing would be "
                         "written\n");
    return 0;
  }
  started = true;
  return 1;
}
