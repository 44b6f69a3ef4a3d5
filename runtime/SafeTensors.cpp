//===- SafeTensors.cpp - read and write the safetensors format
//-------------===//

#include "runtime/SafeTensors.h"

#include "runtime/Artifact.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace hypipe::rt {

namespace {
size_t numel(const std::vector<int64_t> &shape) {
  size_t n = 1;
  for (int64_t d : shape)
    n *= size_t(d);
  return n;
}
} // namespace

void SafeTensorsWriter::add(const std::string &name,
                            const std::vector<int64_t> &shape,
                            const float *data) {
  tensors[name] = {"F32", shape, data, numel(shape) * sizeof(float)};
}

void SafeTensorsWriter::add(const std::string &name,
                            const std::vector<int64_t> &shape,
                            const int32_t *data) {
  tensors[name] = {"I32", shape, data, numel(shape) * sizeof(int32_t)};
}

void SafeTensorsWriter::write(const std::string &path) const {
  nlohmann::json header = nlohmann::json::object();
  size_t offset = 0;
  for (const auto &[name, t] : tensors) {
    header[name] = {{"dtype", t.dtype},
                    {"shape", t.shape},
                    {"data_offsets", {offset, offset + t.bytes}}};
    offset += t.bytes;
  }
  if (!meta.empty())
    header["__metadata__"] = meta;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  uint64_t length = text.size();

  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  auto failWith = [&](const char *what) {
    int err = errno;
    if (fd >= 0)
      ::close(fd);
    ::unlink(tmp.c_str());
    throw RuntimeError(fmt::format(
        "error: cannot {} '{}': {}\nhelp: check free space and permissions "
        "of the directory",
        what, tmp, std::strerror(err)));
  };
  if (fd < 0)
    failWith("create");
  auto put = [&](const void *p, size_t n) {
    const char *c = static_cast<const char *>(p);
    while (n > 0) {
      ssize_t w = ::write(fd, c, n);
      if (w < 0) {
        if (errno == EINTR)
          continue;
        failWith("write");
      }
      c += w;
      n -= size_t(w);
    }
  };
  put(&length, sizeof(length));
  put(text.data(), text.size());
  for (const auto &[name, t] : tensors)
    put(t.data, t.bytes);
  if (::fsync(fd) != 0)
    failWith("sync");
  if (::close(fd) != 0) {
    fd = -1;
    failWith("close");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    fd = -1;
    failWith("rename");
  }
}

} // namespace hypipe::rt
