//===- FileCheck.cpp - checksums and confined paths for files we read -----===//

#include "runtime/formats/FileCheck.h"

#include "runtime/formats/RuntimeError.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <xxhash.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>

namespace hypipe::rt {

namespace {

std::string hexOf(XXH128_hash_t h) {
  return fmt::format("xxh3-128:{:016x}{:016x}", h.high64, h.low64);
}

struct StateDeleter {
  void operator()(XXH3_state_t *s) const { XXH3_freeState(s); }
};
using State = std::unique_ptr<XXH3_state_t, StateDeleter>;

State newState() {
  State s(XXH3_createState());
  if (!s || XXH3_128bits_reset(s.get()) != XXH_OK)
    throw RuntimeError("error: out of memory for a checksum state");
  return s;
}

/// realpath(3), or "" when `path` does not exist.
std::string realPath(const std::string &path) {
  char buffer[PATH_MAX];
  return ::realpath(path.c_str(), buffer) ? std::string(buffer) : std::string();
}

} // namespace

std::string
checksumOf(const std::vector<std::pair<const void *, size_t>> &pieces) {
  State s = newState();
  for (auto [p, n] : pieces)
    XXH3_128bits_update(s.get(), p, n);
  return hexOf(XXH3_128bits_digest(s.get()));
}

std::string fileChecksum(const std::string &path, size_t offset, size_t bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in || !in.seekg(std::streamoff(offset)))
    throw RuntimeError(
        fmt::format("error: cannot read '{}'\nhelp: check the path", path));
  State s = newState();
  std::vector<char> buffer(size_t(1) << 20);
  size_t left = bytes;
  while (left > 0 && in) {
    in.read(buffer.data(), std::streamsize(std::min(left, buffer.size())));
    size_t got = size_t(in.gcount());
    XXH3_128bits_update(s.get(), buffer.data(), got);
    left -= got;
    if (got == 0)
      break;
  }
  if (bytes != size_t(-1) && left != 0)
    throw RuntimeError(fmt::format(
        "error: '{}' ended {} bytes early\nhelp: the file is truncated", path,
        left));
  return hexOf(XXH3_128bits_digest(s.get()));
}

void requireRegularFile(const std::string &path, const std::string &what,
                        const std::string &help) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode))
    return;
  throw RuntimeError(fmt::format(
      "error: {} '{}' is {}, not a file\nhelp: {}", what, path,
      S_ISDIR(st.st_mode) ? "a directory" : "a device or pipe", help));
}

bool pathExists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool isDirectory(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool isPlainName(std::string_view name) {
  if (name.empty() || name == "." || name == "..")
    return false;
  for (unsigned char c : name)
    if (c == '/' || c < 0x20 || c == 0x7f)
      return false;
  return true;
}

std::string confinedPath(const std::string &dir, const std::string &relative,
                         const std::string &what, const std::string &from) {
  auto refuse = [&](const std::string &why) {
    return RuntimeError(fmt::format(
        "error: {} names {} '{}', {}\nhelp: such names must stay inside "
        "'{}'; the file was not written by hypipe or was tampered with",
        from, what, relative.substr(0, 200), why, dir));
  };
  size_t start = 0;
  while (true) {
    size_t slash = relative.find('/', start);
    std::string_view part =
        std::string_view(relative).substr(start, slash - start);
    if (!isPlainName(part))
      throw refuse(relative.empty() || relative[0] == '/'
                       ? "which is not a relative path"
                       : "which has a '..', '.', empty or control-character "
                         "component");
    if (slash == std::string::npos)
      break;
    start = slash + 1;
  }
  std::string path = dir + "/" + relative;
  std::string realDir = realPath(dir);
  std::string real = realPath(path);
  if (real.empty()) // missing: its parent must still be inside
    real = realPath(path.substr(0, path.find_last_of('/')));
  if (!realDir.empty() && !real.empty() && real != realDir &&
      real.compare(0, realDir.size() + 1, realDir + "/") != 0)
    throw refuse(fmt::format("which leads outside it (to '{}') through a "
                             "symbolic link",
                             real));
  return path;
}

void throwIfError(Error err) {
  if (err)
    throw RuntimeError("error: " + toString(err));
}

std::string readFileBounded(const std::string &path, files::ReadBound bound) {
  Expected<std::string> text = files::readBounded(path, bound);
  if (!text)
    throwIfError(text.takeError());
  return std::move(*text);
}

void requireOutputFile(const std::string &output, std::string_view what,
                       const std::vector<std::string> &inputs) {
  throwIfError(files::checkFileOutput(output, what));
  throwIfError(files::checkNotAnInput(output, what, inputs));
}

void requireOutputDirectory(const std::string &output, std::string_view what,
                            const std::vector<std::string> &inputs) {
  throwIfError(files::checkDirectoryOutput(output, what));
  throwIfError(files::checkNotAnInput(output, what, inputs));
}

} // namespace hypipe::rt
