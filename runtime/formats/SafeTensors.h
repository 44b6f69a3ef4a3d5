//===- SafeTensors.h - read and write the safetensors format --------------===//
//
// 8-byte little-endian header length, a JSON header naming every tensor's
// dtype, shape and byte range, then the raw data. Only F32, BF16 and I32
// are written; files are written atomically (temporary file, fsync, rename),
// with the checksum of their data section in the metadata (`checksum`).
// The reader checks everything the format guarantees before it reads a
// byte of data (docs/security.md lists the checks).
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_FORMATS_SAFETENSORS_H
#define HYPIPE_RUNTIME_FORMATS_SAFETENSORS_H

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hypipe::rt {

struct TensorView {
  std::string dtype; ///< "F32", "BF16" or "I32"
  std::vector<int64_t> shape;
  const void *data = nullptr;
  size_t bytes = 0;
};

/// What was written: the whole file's checksum and size.
struct WrittenFile {
  std::string checksum;
  uint64_t bytes = 0;
};

class SafeTensorsWriter {
public:
  void add(const std::string &name, const std::vector<int64_t> &shape,
           const float *data);
  void add(const std::string &name, const std::vector<int64_t> &shape,
           const int32_t *data);
  /// bfloat16 bits (core/numeric/Bf16.h), written as "BF16".
  void addBf16(const std::string &name, const std::vector<int64_t> &shape,
               const uint16_t *data);
  void metadata(const std::string &key, const std::string &value) {
    meta[key] = value;
  }
  /// Throws RuntimeError on I/O failure; `path` is untouched then.
  WrittenFile write(const std::string &path) const;

private:
  std::map<std::string, TensorView> tensors;
  std::map<std::string, std::string> meta;
};

/// One tensor of a safetensors header: its byte range in the data section.
struct SafeTensorsEntry {
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

/// A checked safetensors header.
struct SafeTensorsHeader {
  uint64_t dataStart = 0; ///< 8 + the header's length
  uint64_t dataBytes = 0; ///< the data section's size
  std::map<std::string, SafeTensorsEntry> entries;
  std::map<std::string, std::string> metadata;
};

/// The largest header accepted (as the reference implementation's).
inline constexpr uint64_t kMaxSafeTensorsHeader = 100'000'000;

/// Parses and checks the header of a safetensors file of `fileSize` bytes
/// whose first bytes are `start` (at least 8 + the header's length of them,
/// or the whole file): a bounded, well-formed JSON object with unique UTF-8
/// names; known dtypes; non-negative shapes whose byte size does not
/// overflow and equals the tensor's range; ranges in order, not
/// overlapping, covering the data section exactly; string metadata. Throws
/// RuntimeError naming `path`, the tensor and the violation.
SafeTensorsHeader parseSafeTensorsHeader(std::string_view start,
                                         uint64_t fileSize,
                                         const std::string &path);

/// Reads a safetensors file: the header is parsed and every tensor's byte
/// range checked against the file size when it is opened, so a truncated
/// or corrupt file is refused before anything is read from it.
class SafeTensorsFile {
public:
  /// Throws RuntimeError naming the file and what is wrong with it. With
  /// `verifyChecksum`, a `checksum` in the metadata is checked against the
  /// data section (a caller that checked the whole file already passes
  /// false).
  explicit SafeTensorsFile(const std::string &path, bool verifyChecksum = true);

  bool has(const std::string &name) const { return header.entries.count(name); }
  std::vector<std::string> names() const;
  const std::vector<int64_t> &shape(const std::string &name) const;
  /// Reads tensor `name`, which must have `shape`, into `out` as float32:
  /// F32 as stored, BF16 widened (exactly; what Hugging Face checkpoints
  /// hold). Other dtypes are refused.
  void read(const std::string &name, const std::vector<int64_t> &shape,
            float *out) const;
  const std::map<std::string, std::string> &metadata() const {
    return header.metadata;
  }
  const std::string &filename() const { return path; }

private:
  std::string path;
  SafeTensorsHeader header;
};

/// Writes `pieces` to `path` through a temporary file beside it, fsync and
/// rename (core/io/Files.h), so `path` holds either its old or its complete
/// new contents; `what` names the file in messages. Throws RuntimeError
/// (and removes the temporary file) on failure, or when `path` is not a
/// regular file.
void writeFileAtomically(
    const std::string &path, std::string_view what,
    const std::vector<std::pair<const void *, size_t>> &pieces);

} // namespace hypipe::rt

#endif
