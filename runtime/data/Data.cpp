//===- Data.cpp - training data: text bytes or Megatron's indexed dataset -===//

#include "runtime/data/Data.h"

#include "core/Random.h"
#include "runtime/formats/Artifact.h"
#include "runtime/formats/FileCheck.h"
#include "runtime/formats/MegatronIndex.h"

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
    tokens[i] = int32_t(at(firstToken + offset + i));
    labels[i] = int32_t(at(firstToken + offset + i + 1));
  }
}

void Dataset::keepPart(const DataSplit &split, SplitPart,
                       const std::string &path) {
  throw RuntimeError(fmt::format(
      "error: --split {}: text data '{}' has no documents to split into "
      "train, validation and test parts\nhelp: split Megatron's indexed data "
      "(data.format: indexed; `hypipe data prepare` makes it from JSON "
      "Lines), or train without --split",
      split.text, path));
}

void Dataset::keepTokens(int64_t first, int64_t tokens) {
  firstToken = first;
  count = tokens;
  std::vector<double> counts(size_t(vocabSize), 0.0);
  for (int64_t i = 0; i < count; ++i)
    counts[size_t(at(firstToken + i))] += 1;
  entropy = 0;
  for (double c : counts)
    if (c > 0)
      entropy -= c / double(count) * std::log(c / double(count));
}

void Dataset::validate(const std::string &path, int64_t vocab) {
  if (count < seq + 1)
    throw RuntimeError(fmt::format(
        "error: training data '{}' has {} tokens, fewer than one sample "
        "(seq_length {} + 1)\nhelp: use more data or a shorter "
        "training.seq_length",
        path, count, seq));
  for (int64_t i = 0; i < count; ++i) {
    int64_t t = at(i);
    if (t < 0)
      throw RuntimeError(fmt::format(
          "error: training data '{}': token {} at position {} is negative, "
          "and token ids start at 0\nhelp: the data was written with a "
          "signed dtype its ids overflowed, or is corrupt: prepare it again "
          "(hypipe data prepare, or Megatron-LM's preprocess_data.py)",
          path, t, i));
    if (t >= vocab)
      throw RuntimeError(fmt::format(
          "error: training data '{}': token {} at position {} is outside "
          "the model's vocabulary [0, {})\nhelp: set model.vocab_size to the "
          "tokenizer's size (at least {})",
          path, t, i, vocab, t + 1));
  }
  vocabSize = vocab;
  keepTokens(0, count);
}

TextDataset::TextDataset(const std::string &path, int64_t seqLength,
                         int64_t vocab)
    : Dataset(seqLength) {
  requireRegularFile(path, "training data",
                     "set data.path in the spec (or --data) to a file");
  if (!pathExists(path))
    throw RuntimeError(fmt::format(
        "error: cannot read training data '{}'\nhelp: set data.path in the "
        "spec (relative to the spec file) or pass --data FILE",
        path));
  if (vocab < 256)
    throw RuntimeError(fmt::format(
        "error: byte-level text data needs vocab_size >= 256, the model has "
        "{}\nhelp: set model.vocab_size: 256",
        vocab));
  bytes = readFileBounded(path, files::kTrainingData);
  count = int64_t(bytes.size());
  validate(path, vocab);
}

namespace {

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
  requireRegularFile(idx, "the index", kMegatronIndexHelp);
  std::ifstream in(idx, std::ios::binary);
  if (!in)
    throw RuntimeError(fmt::format(
        "error: cannot read '{}'\nhelp: data.path of an indexed dataset is "
        "the prefix of PREFIX.bin and PREFIX.idx",
        idx));
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  MegatronIndex index = parseMegatronIndex(bytes, idx);

  // O_NONBLOCK: opening a FIFO nobody writes would block every rank; the
  // check below refuses it (the index's own check: requireRegularFile).
  int fd = ::open(binPath.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    throw RuntimeError(fmt::format(
        "error: cannot read '{}'\nhelp: the .bin belongs next to '{}'", binPath,
        idx));
  struct stat st {};
  ::fstat(fd, &st);
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw RuntimeError(
        fmt::format("error: '{}' is not a regular file\nhelp: {}", binPath,
                    kMegatronIndexHelp));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  binBytes = size_t(st.st_size);
  try {
    starts = checkMegatronBin(index, binBytes, binPath);
  } catch (...) {
    ::close(fd);
    throw;
  }
  count = starts.back();
  itemSize = index.itemSize;
  dtypeCode = index.dtypeCode;
  lengths = std::move(index.lengths);
  pointers = std::move(index.pointers);
  documents = std::move(index.documents);
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

void IndexedDataset::keepPart(const DataSplit &split, SplitPart part,
                              const std::string &path) {
  // megatron-core's GPTDataset splits the index's sequences (one per
  // document unless the preprocessor split sentences).
  const auto [first, last] = split.documentRange(part, numSequences());
  const int64_t tokens = starts[size_t(last)] - starts[size_t(first)];
  if (tokens < seq + 1)
    throw RuntimeError(fmt::format(
        "error: --split {}: the {} part of '{}' is sequences [{}, {}) of {}, "
        "{} tokens, fewer than one sample (seq_length {} + 1)\nhelp: give "
        "the {} part a larger weight, or use more data",
        split.text, splitPartName(part), path, first, last, numSequences(),
        tokens, seq, splitPartName(part)));
  keepTokens(starts[size_t(first)], tokens);
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

std::unique_ptr<Dataset> openDataset(const std::string &path, DataFormat format,
                                     int64_t seqLength, int64_t vocab) {
  if (format == DataFormat::Text)
    return std::make_unique<TextDataset>(path, seqLength, vocab);
  if (format == DataFormat::Indexed)
    return std::make_unique<IndexedDataset>(path, seqLength, vocab);
  throw RuntimeError(
      fmt::format("error: unknown data format '{}'\nhelp: use text or indexed",
                  dataFormatName(format)));
}

} // namespace hypipe::rt
