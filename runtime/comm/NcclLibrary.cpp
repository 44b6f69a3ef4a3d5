//===- NcclLibrary.cpp - NCCL, loaded when a run first uses it ------------===//

#include "runtime/comm/NcclLibrary.h"
#include "runtime/comm/Transport.h"

#include "runtime/formats/RuntimeError.h"

#include <fmt/format.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

namespace hypipe::rt {

namespace {

constexpr const char *kSoname = "libnccl.so.2";

/// Where to look: the loader's own search (LD_LIBRARY_PATH, its cache), then
/// the directory NCCL was found in at build time, then the toolkit's.
std::vector<std::string> candidates() {
  std::vector<std::string> out = {kSoname};
#ifdef HYPIPE_NCCL_DIR
  out.push_back(std::string(HYPIPE_NCCL_DIR) + "/" + kSoname);
#endif
  const char *cuda = std::getenv("CUDA_HOME");
  std::string toolkit = std::string(cuda && *cuda ? cuda : "/usr/local/cuda") +
                        "/lib64/" + kSoname;
  if (std::find(out.begin(), out.end(), toolkit) == out.end())
    out.push_back(std::move(toolkit));
  return out;
}

struct Loaded {
  NcclLibrary functions;
  std::string error; ///< empty when every entry point resolved
};

Loaded load() {
  Loaded loaded;
  void *handle = nullptr;
  std::string said;
  for (const std::string &path : candidates()) {
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle)
      break;
    const char *why = dlerror();
    said += fmt::format("\n  {}: {}", path, why ? why : "not loaded");
  }
  if (!handle) {
    loaded.error = fmt::format("{} cannot be loaded:{}", kSoname, said);
    return loaded;
  }
#define HYPIPE_NCCL_RESOLVE(name)                                              \
  loaded.functions.name =                                                      \
      reinterpret_cast<decltype(&::name)>(dlsym(handle, #name));               \
  if (!loaded.functions.name && loaded.error.empty())                          \
    loaded.error = fmt::format("the {} found lacks {} (NCCL older than 2.18)", \
                               kSoname, #name);
  HYPIPE_NCCL_FUNCTIONS(HYPIPE_NCCL_RESOLVE)
#undef HYPIPE_NCCL_RESOLVE
  return loaded;
}

const Loaded &loadedOnce() {
  static const Loaded loaded = load();
  return loaded;
}

} // namespace

std::string ncclUnavailable() { return loadedOnce().error; }

const NcclLibrary &ncclLibrary() {
  const Loaded &loaded = loadedOnce();
  if (!loaded.error.empty())
    throw RuntimeError(fmt::format(
        "error: --comm nccl: {}\nhelp: put the directory that holds {} on "
        "LD_LIBRARY_PATH (a pip install keeps it in "
        "site-packages/nvidia/nccl/lib), or run with --comm mpi-staged",
        loaded.error, kSoname));
  return loaded.functions;
}

} // namespace hypipe::rt
