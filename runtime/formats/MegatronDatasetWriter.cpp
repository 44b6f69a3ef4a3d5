//===- MegatronDatasetWriter.cpp - Megatron-LM's .bin/.idx, written -------===//

#include "runtime/formats/MegatronDatasetWriter.h"

#include "core/io/Files.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace hypipe::rt {

namespace {

/// Appends `tokens` to `out` as `Item`s, little-endian as on the machines
/// hypipe runs on (and as numpy's tofile writes them for Megatron).
template <typename Item>
void appendAs(const std::vector<int32_t> &tokens, std::vector<char> &out) {
  const size_t at = out.size();
  out.resize(at + tokens.size() * sizeof(Item));
  for (size_t i = 0; i < tokens.size(); ++i) {
    const Item item = Item(tokens[i]);
    std::memcpy(out.data() + at + i * sizeof(Item), &item, sizeof(Item));
  }
}

void encodeTokens(int dtypeCode, const std::vector<int32_t> &tokens,
                  std::vector<char> &out) {
  switch (dtypeCode) {
  case kMegatronUInt8:
    return appendAs<uint8_t>(tokens, out);
  case kMegatronInt8:
    return appendAs<int8_t>(tokens, out);
  case kMegatronInt16:
    return appendAs<int16_t>(tokens, out);
  case kMegatronUInt16:
    return appendAs<uint16_t>(tokens, out);
  case kMegatronInt64:
    return appendAs<int64_t>(tokens, out);
  default:
    return appendAs<int32_t>(tokens, out);
  }
}

/// Writes and closes `file` (taken), syncing it to disk; errno on failure.
int finish(std::FILE *&file) {
  int err = 0;
  if (std::fflush(file) != 0 || ::fsync(fileno(file)) != 0)
    err = errno;
  if (std::fclose(file) != 0 && err == 0)
    err = errno;
  file = nullptr;
  return err;
}

} // namespace

MegatronDatasetWriter::MegatronDatasetWriter(std::string prefix, int dtypeCode)
    : bin(prefix + ".bin"), idx(prefix + ".idx"),
      binTemporary(files::siblingTemporary(bin)),
      idxTemporary(files::siblingTemporary(idx)) {
  built.dtypeCode = dtypeCode;
  built.itemSize = megatronItemSize(dtypeCode);
  built.documents = {0};
}

Expected<std::unique_ptr<MegatronDatasetWriter>>
MegatronDatasetWriter::create(const std::string &prefix, int dtypeCode) {
  std::unique_ptr<MegatronDatasetWriter> writer(
      new MegatronDatasetWriter(prefix, dtypeCode));
  for (const std::string *path : {&writer->bin, &writer->idx}) {
    if (auto err = files::checkOutputDirectoryExists(*path, "the output"))
      return err;
    if (auto err = files::checkFileOutput(*path, "the output"))
      return err;
  }
  writer->binFile = std::fopen(writer->binTemporary.c_str(), "wbx");
  if (!writer->binFile)
    return writer->failure("create", writer->binTemporary, errno);
  return writer;
}

MegatronDatasetWriter::~MegatronDatasetWriter() {
  if (binFile)
    std::fclose(binFile);
  if (!committed) {
    ::unlink(binTemporary.c_str());
    ::unlink(idxTemporary.c_str());
  }
}

Error MegatronDatasetWriter::failure(const std::string &step,
                                     const std::string &path, int err) {
  return Error(
      Problem{fmt::format("cannot {} '{}': {}", step, path, std::strerror(err)),
              fmt::format("check free space and permissions of the output's "
                          "directory; an earlier '{}' and '{}' are untouched",
                          bin, idx),
              std::nullopt, 1});
}

Error MegatronDatasetWriter::addDocument(
    const std::vector<int32_t> &tokens,
    const std::vector<int32_t> &sequenceLengths) {
  encoded.clear();
  encodeTokens(built.dtypeCode, tokens, encoded);
  if (!encoded.empty() &&
      std::fwrite(encoded.data(), 1, encoded.size(), binFile) != encoded.size())
    return failure("write", binTemporary, errno);
  // Megatron's pointers are each sequence's byte offset in the .bin.
  for (int32_t length : sequenceLengths) {
    built.lengths.push_back(length);
    built.pointers.push_back(int64_t(written));
    written += uint64_t(length) * uint64_t(built.itemSize);
  }
  built.documents.push_back(int64_t(built.lengths.size()));
  return Error::success();
}

Error MegatronDatasetWriter::commit() {
  if (int err = finish(binFile))
    return failure("write", binTemporary, err);
  const std::string bytes = serializeMegatronIndex(built);
  std::FILE *idxFile = std::fopen(idxTemporary.c_str(), "wbx");
  if (!idxFile)
    return failure("create", idxTemporary, errno);
  const bool complete =
      std::fwrite(bytes.data(), 1, bytes.size(), idxFile) == bytes.size();
  const int writeErr = errno;
  if (int err = finish(idxFile); err || !complete)
    return failure("write", idxTemporary, complete ? err : writeErr);
  // The index last: a reader that finds the new index finds the new tokens.
  if (::rename(binTemporary.c_str(), bin.c_str()) != 0)
    return failure("rename the finished .bin onto", bin, errno);
  if (::rename(idxTemporary.c_str(), idx.c_str()) != 0)
    return failure("rename the finished .idx onto", idx, errno);
  committed = true;
  return Error::success();
}

} // namespace hypipe::rt
