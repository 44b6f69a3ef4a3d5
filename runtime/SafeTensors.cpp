//===- SafeTensors.cpp - read and write the safetensors format
//-------------===//

#include "runtime/SafeTensors.h"

#include "runtime/Artifact.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

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
  std::vector<std::pair<const void *, size_t>> pieces = {
      {&length, sizeof(length)}, {text.data(), text.size()}};
  for (const auto &[name, t] : tensors)
    pieces.push_back({t.data, t.bytes});
  writeFileAtomically(path, pieces);
}

void writeFileAtomically(
    const std::string &path,
    const std::vector<std::pair<const void *, size_t>> &pieces) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  auto failWith = [&](const char *what) {
    int err = errno;
    if (fd >= 0)
      ::close(fd);
    ::unlink(tmp.c_str());
    throw RuntimeError(fmt::format(
        "error: cannot {} '{}': {}\nhelp: check free space and permissions "
        "of the directory; the previous file at '{}' is untouched",
        what, tmp, std::strerror(err), path));
  };
  if (fd < 0)
    failWith("create");
  for (auto [p, n] : pieces) {
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
  }
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
  // Make the rename itself durable.
  std::string dir = path.substr(0, path.find_last_of('/') + 1);
  if (int d = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY); d >= 0) {
    ::fsync(d);
    ::close(d);
  }
}

SafeTensorsFile::SafeTensorsFile(const std::string &path) : path(path) {
  auto corrupt = [&](const std::string &why) {
    return RuntimeError(fmt::format(
        "error: '{}' is not a valid safetensors file: {}\nhelp: the file is "
        "truncated or corrupt; use an earlier checkpoint",
        path, why));
  };
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    throw RuntimeError(
        fmt::format("error: cannot read '{}'\nhelp: check the path", path));
  uint64_t size = uint64_t(in.tellg()), length = 0;
  in.seekg(0);
  if (size < 8 || !in.read(reinterpret_cast<char *>(&length), 8))
    throw corrupt("shorter than its 8-byte header length");
  if (length > size - 8)
    throw corrupt(
        fmt::format("header of {} bytes in a file of {}", length, size));
  std::string text(length, '\0');
  in.read(text.data(), std::streamsize(length));
  nlohmann::json header = nlohmann::json::parse(text, nullptr, false);
  if (header.is_discarded() || !header.is_object())
    throw corrupt("the header is not a JSON object");
  dataStart = 8 + length;
  for (auto &[name, t] : header.items()) {
    if (name == "__metadata__") {
      if (t.is_object())
        for (auto &[k, v] : t.items())
          if (v.is_string())
            meta[k] = v.get<std::string>();
      continue;
    }
    Entry e;
    try {
      e.dtype = t.at("dtype").get<std::string>();
      e.shape = t.at("shape").get<std::vector<int64_t>>();
      auto offsets = t.at("data_offsets").get<std::vector<uint64_t>>();
      if (offsets.size() != 2)
        throw corrupt(fmt::format("tensor '{}' has no [begin, end]", name));
      e.begin = offsets[0];
      e.end = offsets[1];
    } catch (const nlohmann::json::exception &) {
      throw corrupt(
          fmt::format("tensor '{}' lacks dtype, shape or offsets", name));
    }
    size_t itemBytes = e.dtype == "F32" || e.dtype == "I32" ? 4 : 0;
    if (e.end < e.begin || dataStart + e.end > size ||
        (itemBytes && e.end - e.begin != numel(e.shape) * itemBytes))
      throw corrupt(fmt::format("tensor '{}' runs past the end of the file "
                                "or does not match its shape",
                                name));
    entries[name] = e;
  }
}

std::vector<std::string> SafeTensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto &[name, e] : entries)
    out.push_back(name);
  return out;
}

const std::vector<int64_t> &
SafeTensorsFile::shape(const std::string &name) const {
  return entries.at(name).shape;
}

void SafeTensorsFile::read(const std::string &name,
                           const std::vector<int64_t> &shape,
                           float *out) const {
  auto it = entries.find(name);
  if (it == entries.end())
    throw RuntimeError(fmt::format(
        "error: '{}' has no tensor '{}'\nhelp: the checkpoint belongs to "
        "another model; check the spec",
        path, name));
  const Entry &e = it->second;
  if (e.dtype != "F32" || e.shape != shape)
    throw RuntimeError(fmt::format(
        "error: tensor '{}' in '{}' is {} {}, the model needs F32 {}\nhelp: "
        "the checkpoint belongs to another model; check the spec",
        name, path, e.dtype, fmt::join(e.shape, "x"), fmt::join(shape, "x")));
  std::ifstream in(path, std::ios::binary);
  in.seekg(std::streamoff(dataStart + e.begin));
  if (!in.read(reinterpret_cast<char *>(out), std::streamsize(e.end - e.begin)))
    throw RuntimeError(fmt::format(
        "error: cannot read tensor '{}' from '{}'\nhelp: the file is "
        "truncated; use an earlier checkpoint",
        name, path));
}

} // namespace hypipe::rt
