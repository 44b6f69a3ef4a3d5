//===- MegatronIndex.cpp - Megatron-LM's .idx file, parsed and checked ----===//

#include "runtime/formats/MegatronIndex.h"

#include "runtime/formats/Artifact.h"

#include <fmt/format.h>

#include <cstring>

namespace hypipe::rt {

const char *const kMegatronIndexHelp =
    "write it with Megatron-LM's tools/preprocess_data.py (or "
    "IndexedDatasetBuilder); data.path names the prefix without .bin/.idx";

namespace {

RuntimeError bad(const std::string &file, const std::string &why) {
  return RuntimeError(
      fmt::format("error: '{}' is not a Megatron indexed dataset: {}\nhelp: {}",
                  file, why, kMegatronIndexHelp));
}

} // namespace

int megatronItemSize(int code) {
  switch (code) {
  case kMegatronUInt8:
  case kMegatronInt8:
    return 1;
  case kMegatronInt16:
  case kMegatronUInt16:
    return 2;
  case kMegatronInt32:
    return 4;
  case kMegatronInt64:
    return 8;
  default: // the float types cannot hold token ids
    return 0;
  }
}

const char *megatronDtypeName(int code) {
  switch (code) {
  case kMegatronUInt8:
    return "uint8";
  case kMegatronInt8:
    return "int8";
  case kMegatronInt16:
    return "int16";
  case kMegatronUInt16:
    return "uint16";
  case kMegatronInt32:
    return "int32";
  case kMegatronInt64:
    return "int64";
  default:
    return "not an integer type";
  }
}

int megatronDtypeCodeFor(int64_t vocabSize) {
  return vocabSize < 65500 ? kMegatronUInt16 : kMegatronInt32;
}

std::string serializeMegatronIndex(const MegatronIndex &index) {
  std::string bytes;
  auto put = [&](const void *p, size_t n) {
    if (n > 0) // an empty vector's data() may be null
      bytes.append(static_cast<const char *>(p), n);
  };
  const uint64_t version = kMegatronIndexVersion;
  const uint8_t code = uint8_t(index.dtypeCode);
  const uint64_t sequences = index.lengths.size(),
                 documents = index.documents.size();
  put(kMegatronIndexMagic.data(), kMegatronIndexMagic.size());
  put(&version, sizeof version);
  put(&code, sizeof code);
  put(&sequences, sizeof sequences);
  put(&documents, sizeof documents);
  put(index.lengths.data(), sequences * sizeof(int32_t));
  put(index.pointers.data(), sequences * sizeof(int64_t));
  put(index.documents.data(), documents * sizeof(int64_t));
  return bytes;
}

MegatronIndex parseMegatronIndex(std::string_view bytes,
                                 const std::string &path) {
  size_t at = 0;
  auto get = [&](void *p, size_t n) {
    if (bytes.size() - at < n)
      return false;
    if (n == 0) // an empty vector's data() may be null: no memcpy
      return true;
    std::memcpy(p, bytes.data() + at, n);
    at += n;
    return true;
  };
  char magic[kMegatronIndexMagic.size()];
  uint64_t version = 0, sequences = 0, docs = 0;
  uint8_t code = 0;
  MegatronIndex index;
  if (!get(magic, sizeof magic) ||
      std::string_view(magic, sizeof magic) != kMegatronIndexMagic)
    throw bad(path, "it does not start with MMIDIDX");
  if (!get(&version, 8) || version != kMegatronIndexVersion)
    throw bad(path, fmt::format("version {}, this reader knows {}", version,
                                kMegatronIndexVersion));
  if (!get(&code, 1) || !(index.itemSize = megatronItemSize(code)))
    throw bad(path, fmt::format("dtype code {} is not an integer type "
                                "(1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, "
                                "8 uint16)",
                                int(code)));
  index.dtypeCode = code;
  if (!get(&sequences, 8) || !get(&docs, 8))
    throw bad(path, "the header is truncated");
  // Each count is bounded by the bytes left before it is multiplied, so
  // nothing below can wrap.
  const uint64_t left = bytes.size() - at;
  if (sequences > left / 12 || docs > left / 8 ||
      left != sequences * (sizeof(int32_t) + sizeof(int64_t)) +
                  docs * sizeof(int64_t))
    throw bad(path, fmt::format("{} bytes do not hold {} sequences and {} "
                                "document boundaries (truncated?)",
                                bytes.size(), sequences, docs));
  index.lengths.resize(sequences);
  index.pointers.resize(sequences);
  index.documents.resize(docs);
  get(index.lengths.data(), sequences * sizeof(int32_t));
  get(index.pointers.data(), sequences * sizeof(int64_t));
  get(index.documents.data(), docs * sizeof(int64_t));
  for (uint64_t s = 0; s < sequences; ++s)
    if (index.lengths[s] < 0 || index.pointers[s] < 0)
      throw bad(path, fmt::format("sequence {} has {} tokens at byte {}", s,
                                  index.lengths[s], index.pointers[s]));
  if (docs < 1 || index.documents.front() != 0 ||
      uint64_t(index.documents.back()) != sequences)
    throw bad(path, fmt::format("its {} document boundaries do not run from "
                                "sequence 0 to the sequence count {}",
                                docs, sequences));
  for (uint64_t d = 1; d < docs; ++d)
    if (index.documents[d] < index.documents[d - 1])
      throw bad(path,
                fmt::format("document boundary {} (sequence {}) comes "
                            "before the one ahead of it (sequence {})",
                            d, index.documents[d], index.documents[d - 1]));
  return index;
}

std::vector<int64_t> checkMegatronBin(const MegatronIndex &index,
                                      uint64_t binBytes,
                                      const std::string &binPath) {
  std::vector<int64_t> starts(index.lengths.size() + 1, 0);
  for (size_t s = 0; s < index.lengths.size(); ++s) {
    uint64_t pointer = uint64_t(index.pointers[s]);
    uint64_t size = uint64_t(index.lengths[s]) * uint64_t(index.itemSize);
    // A pointer between two tokens would read halves of two as one: tokens
    // out of the vocabulary, or worse, silently other ones.
    if (pointer % uint64_t(index.itemSize) != 0)
      throw bad(binPath,
                fmt::format("sequence {} starts at byte {}, which is not a "
                            "whole number of its {}-byte tokens (a damaged "
                            ".idx: Megatron's pointers are token offsets "
                            "times the token size)",
                            s, index.pointers[s], index.itemSize));
    if (pointer > binBytes || size > binBytes - pointer)
      throw bad(binPath,
                fmt::format("sequence {} ({} tokens at byte {}) runs past the "
                            "end of the {}-byte file (truncated?)",
                            s, index.lengths[s], index.pointers[s], binBytes));
    starts[s + 1] = starts[s] + index.lengths[s];
  }
  return starts;
}

} // namespace hypipe::rt
