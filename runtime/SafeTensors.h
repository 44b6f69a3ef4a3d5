//===- SafeTensors.h - read and write the safetensors format
//---------------===//
//
// 8-byte little-endian header length, a JSON header naming every tensor's
// dtype, shape and byte range, then the raw data. Only F32 and I32 are
// written; files are written atomically (temporary file, fsync, rename).
// The reader checks every byte range before use.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_SAFETENSORS_H
#define HYPIPE_RUNTIME_SAFETENSORS_H

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace hypipe::rt {

struct TensorView {
  std::string dtype; ///< "F32" or "I32"
  std::vector<int64_t> shape;
  const void *data = nullptr;
  size_t bytes = 0;
};

class SafeTensorsWriter {
public:
  void add(const std::string &name, const std::vector<int64_t> &shape,
           const float *data);
  void add(const std::string &name, const std::vector<int64_t> &shape,
           const int32_t *data);
  void metadata(const std::string &key, const std::string &value) {
    meta[key] = value;
  }
  /// Throws RuntimeError on I/O failure; `path` is untouched then.
  void write(const std::string &path) const;

private:
  std::map<std::string, TensorView> tensors;
  std::map<std::string, std::string> meta;
};

/// Reads a safetensors file: the header is parsed and every tensor's byte
/// range checked against the file size when it is opened, so a truncated
/// or corrupt file is refused before anything is read from it.
class SafeTensorsFile {
public:
  /// Throws RuntimeError naming the file and what is wrong with it.
  explicit SafeTensorsFile(const std::string &path);

  bool has(const std::string &name) const { return entries.count(name); }
  std::vector<std::string> names() const;
  const std::vector<int64_t> &shape(const std::string &name) const;
  /// Reads F32 tensor `name`, which must have `shape`, into `out`.
  void read(const std::string &name, const std::vector<int64_t> &shape,
            float *out) const;
  const std::map<std::string, std::string> &metadata() const { return meta; }
  const std::string &filename() const { return path; }

private:
  struct Entry {
    std::string dtype;
    std::vector<int64_t> shape;
    uint64_t begin = 0, end = 0;
  };
  std::string path;
  uint64_t dataStart = 0;
  std::map<std::string, Entry> entries;
  std::map<std::string, std::string> meta;
};

/// Writes `pieces` to `path` through `path`.tmp, fsync and rename, so
/// `path` holds either its old or its complete new contents. Throws
/// RuntimeError (and removes the temporary file) on failure.
void writeFileAtomically(
    const std::string &path,
    const std::vector<std::pair<const void *, size_t>> &pieces);

} // namespace hypipe::rt

#endif
