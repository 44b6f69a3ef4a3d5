//===- Data.cpp - training data: text bytes or Megatron's indexed dataset -===//

#include "runtime/Data.h"

#include "runtime/Artifact.h"
#include "runtime/Init.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

namespace hypipe::rt {

void Dataset::sample(uint64_t seed, int64_t index, int32_t *tokens,
                     int32_t *labels) const {
  uint64_t span = uint64_t(count - seq);
  int64_t offset =
      int64_t(splitmix64(splitmix64(seed) ^ uint64_t(index)) % span);
  for (int64_t i = 0; i < seq; ++i) {
    tokens[i] = int32_t(at(offset + i));
    labels[i] = int32_t(at(offset + i + 1));
  }
}

void Dataset::validate(const std::string &path, int64_t vocab) {
  if (count < seq + 1)
    throw RuntimeError(fmt::format(
        "error: training data '{}' has {} tokens, fewer than one sample "
        "(seq_length {} + 1)\nhelp: use more data or a shorter "
        "training.seq_length",
        path, count, seq));
  std::vector<double> counts(size_t(vocab), 0.0);
  for (int64_t i = 0; i < count; ++i) {
    int64_t t = at(i);
    if (t < 0 || t >= vocab)
      throw RuntimeError(fmt::format(
          "error: training data '{}': token {} at position {} is outside "
          "the model's vocabulary [0, {})\nhelp: set model.vocab_size to the "
          "tokenizer's size (at least {})",
          path, t, i, vocab, t + 1));
    counts[size_t(t)] += 1;
  }
  entropy = 0;
  for (double c : counts)
    if (c > 0)
      entropy -= c / double(count) * std::log(c / double(count));
}

TextDataset::TextDataset(const std::string &path, int64_t seqLength,
                         int64_t vocab)
    : Dataset(seqLength) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw RuntimeError(fmt::format(
        "error: cannot read training data '{}'\nhelp: set data.path in the "
        "spec (relative to the spec file) or pass --data FILE",
        path));
  if (vocab < 256)
    throw RuntimeError(fmt::format(
        "error: byte-level text data needs vocab_size >= 256, the model has "
        "{}\nhelp: set model.vocab_size: 256",
        vocab));
  data.assign(std::istreambuf_iterator<char>(in),
              std::istreambuf_iterator<char>());
  count = int64_t(data.size());
  validate(path, vocab);
}

namespace {

/// Megatron's DType codes and their item sizes; 0 for the float types,
/// which cannot hold token ids.
int itemSizeOf(int code) {
  switch (code) {
  case 1: // uint8
  case 2: // int8
    return 1;
  case 3: // int16
  case 8: // uint16
    return 2;
  case 4: // int32
    return 4;
  case 5: // int64
    return 8;
  default:
    return 0;
  }
}

std::string withoutSuffix(const std::string &path) {
  for (const char *suffix : {".bin", ".idx"})
    if (path.size() > 4 && path.compare(path.size() - 4, 4, suffix) == 0)
      return path.substr(0, path.size() - 4);
  return path;
}

} // namespace

IndexedDataset::IndexedDataset(const std::string &path, int64_t seqLength,
                               int64_t vocab)
    : Dataset(seqLength) {
  const std::string prefix = withoutSuffix(path);
  const std::string idx = prefix + ".idx", binPath = prefix + ".bin";
  auto bad = [&](const std::string &file, const std::string &why) {
    return RuntimeError(fmt::format(
        "error: '{}' is not a Megatron indexed dataset: {}\nhelp: write it "
        "with Megatron-LM's tools/preprocess_data.py (or IndexedDatasetBuilder"
        "); data.path names the prefix without .bin/.idx",
        file, why));
  };
  std::ifstream in(idx, std::ios::binary | std::ios::ate);
  if (!in)
    throw RuntimeError(fmt::format(
        "error: cannot read '{}'\nhelp: data.path of an indexed dataset is "
        "the prefix of PREFIX.bin and PREFIX.idx",
        idx));
  const uint64_t idxBytes = uint64_t(in.tellg());
  in.seekg(0);
  char magic[9];
  uint64_t version = 0, sequences = 0, docs = 0;
  uint8_t code = 0;
  auto get = [&](void *p, size_t n) {
    return bool(in.read(static_cast<char *>(p), std::streamsize(n)));
  };
  if (!get(magic, 9) || std::memcmp(magic, "MMIDIDX\0\0", 9) != 0)
    throw bad(idx, "it does not start with MMIDIDX");
  if (!get(&version, 8) || version != 1)
    throw bad(idx, fmt::format("version {}, this reader knows 1", version));
  if (!get(&code, 1) || !(itemSize = itemSizeOf(code)))
    throw bad(idx, fmt::format("dtype code {} is not an integer type "
                               "(1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, "
                               "8 uint16)",
                               int(code)));
  dtypeCode = code;
  if (!get(&sequences, 8) || !get(&docs, 8))
    throw bad(idx, "the header is truncated");
  const uint64_t header = 9 + 8 + 1 + 8 + 8;
  if (docs < 1 || (idxBytes - header) / 20 < sequences ||
      idxBytes != header + sequences * 12 + docs * 8)
    throw bad(idx, fmt::format("{} bytes do not hold {} sequences and {} "
                               "document boundaries (truncated?)",
                               idxBytes, sequences, docs));
  lengths.resize(sequences);
  pointers.resize(sequences);
  documents.resize(docs);
  get(lengths.data(), sequences * 4);
  get(pointers.data(), sequences * 8);
  get(documents.data(), docs * 8);

  int fd = ::open(binPath.c_str(), O_RDONLY);
  if (fd < 0)
    throw RuntimeError(fmt::format(
        "error: cannot read '{}'\nhelp: the .bin belongs next to '{}'", binPath,
        idx));
  struct stat st {};
  ::fstat(fd, &st);
  binBytes = size_t(st.st_size);
  starts.resize(sequences + 1, 0);
  for (uint64_t s = 0; s < sequences; ++s) {
    if (lengths[s] < 0 || pointers[s] < 0 ||
        uint64_t(pointers[s]) + uint64_t(lengths[s]) * itemSize > binBytes) {
      ::close(fd);
      throw bad(binPath,
                fmt::format("sequence {} ({} tokens at byte {}) runs past the "
                            "end of the {}-byte file (truncated?)",
                            s, lengths[s], pointers[s], binBytes));
    }
    starts[s + 1] = starts[s] + lengths[s];
  }
  count = starts.back();
  if (binBytes > 0) {
    void *m = ::mmap(nullptr, binBytes, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      ::close(fd);
      throw RuntimeError(fmt::format("error: cannot map '{}': {}\nhelp: "
                                     "check the file",
                                     binPath, std::strerror(errno)));
    }
    bin = static_cast<const uint8_t *>(m);
  }
  ::close(fd);
  validate(prefix, vocab);
}

IndexedDataset::~IndexedDataset() {
  if (bin)
    ::munmap(const_cast<uint8_t *>(bin), binBytes);
}

int64_t IndexedDataset::at(int64_t position) const {
  size_t s = size_t(std::upper_bound(starts.begin(), starts.end(), position) -
                    starts.begin() - 1);
  const uint8_t *p = bin + pointers[s] + (position - starts[s]) * itemSize;
  switch (dtypeCode) {
  case 1:
    return *p;
  case 2:
    return int8_t(*p);
  case 3: {
    int16_t v;
    std::memcpy(&v, p, 2);
    return v;
  }
  case 8: {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
  }
  case 4: {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  default: {
    int64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  }
}

std::unique_ptr<Dataset> openDataset(const std::string &path,
                                     const std::string &format,
                                     int64_t seqLength, int64_t vocab) {
  if (format == "text")
    return std::make_unique<TextDataset>(path, seqLength, vocab);
  if (format == "indexed")
    return std::make_unique<IndexedDataset>(path, seqLength, vocab);
  throw RuntimeError(fmt::format(
      "error: unknown data format '{}'\nhelp: use text or indexed", format));
}

} // namespace hypipe::rt
