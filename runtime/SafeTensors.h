//===- SafeTensors.h - read and write the safetensors format
//---------------===//
//
// 8-byte little-endian header length, a JSON header naming every tensor's
// dtype, shape and byte range, then the raw data. Only F32 and I32 are
// written; files are written atomically (temporary file, fsync, rename).
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_SAFETENSORS_H
#define HYPIPE_RUNTIME_SAFETENSORS_H

#include <cstdint>
#include <map>
#include <string>
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

} // namespace hypipe::rt

#endif
