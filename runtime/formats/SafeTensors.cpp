//===- SafeTensors.cpp - read and write the safetensors format ------------===//

#include "runtime/formats/SafeTensors.h"

#include "core/io/Files.h"

#include "runtime/formats/Artifact.h"
#include "runtime/formats/FileCheck.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
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

void SafeTensorsWriter::addBf16(const std::string &name,
                                const std::vector<int64_t> &shape,
                                const uint16_t *data) {
  tensors[name] = {"BF16", shape, data, numel(shape) * sizeof(uint16_t)};
}

WrittenFile SafeTensorsWriter::write(const std::string &path) const {
  nlohmann::json header = nlohmann::json::object();
  size_t offset = 0;
  for (const auto &[name, t] : tensors) {
    header[name] = {{"dtype", t.dtype},
                    {"shape", t.shape},
                    {"data_offsets", {offset, offset + t.bytes}}};
    offset += t.bytes;
  }
  std::vector<std::pair<const void *, size_t>> data;
  for (const auto &[name, t] : tensors)
    data.push_back({t.data, t.bytes});
  std::map<std::string, std::string> withChecksum = meta;
  withChecksum["checksum"] = checksumOf(data);
  header["__metadata__"] = withChecksum;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  uint64_t length = text.size();
  std::vector<std::pair<const void *, size_t>> pieces = {
      {&length, sizeof(length)}, {text.data(), text.size()}};
  pieces.insert(pieces.end(), data.begin(), data.end());
  writeFileAtomically(path, "checkpoint file", pieces);
  WrittenFile written{checksumOf(pieces), 0};
  for (auto [p, n] : pieces)
    written.bytes += n;
  return written;
}

void writeFileAtomically(
    const std::string &path, std::string_view what,
    const std::vector<std::pair<const void *, size_t>> &pieces) {
  if (auto err = files::writeAtomically(path, what, pieces))
    throw RuntimeError("error: " + toString(err));
}

namespace {

size_t dtypeBytes(const std::string &dtype) {
  static const std::map<std::string, size_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"I64", 8}, {"U64", 8},     {"F64", 8}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

/// The name as it may appear in a message: at most 80 bytes.
std::string shown(const std::string &name) {
  return name.size() <= 80 ? name : name.substr(0, 77) + "...";
}

} // namespace

namespace {

RuntimeError corruptFile(const std::string &path, const std::string &why) {
  return RuntimeError(fmt::format(
      "error: '{}' is not a valid safetensors file: {}\nhelp: the file is "
      "truncated, corrupt or was not written as safetensors; use an "
      "earlier checkpoint",
      path, why));
}

/// The header's JSON: an object, no name twice (JSON parsers keep the first
/// or the last, so the callback sees every key before the DOM merges them),
/// no deeper than tensor entries nest.
nlohmann::json parseHeaderJson(std::string_view text, const std::string &path) {
  std::vector<std::vector<std::string>> keys;
  std::string duplicate;
  int deepest = 0;
  auto callback = [&](int depth, nlohmann::json::parse_event_t event,
                      nlohmann::json &parsed) {
    using E = nlohmann::json::parse_event_t;
    deepest = std::max(deepest, depth);
    if (event == E::object_start)
      keys.emplace_back();
    else if (event == E::object_end && !keys.empty())
      keys.pop_back();
    else if (event == E::key && !keys.empty() && parsed.is_string()) {
      std::string k = parsed.get<std::string>();
      auto &seen = keys.back();
      if (duplicate.empty() &&
          std::find(seen.begin(), seen.end(), k) != seen.end())
        duplicate = k;
      seen.push_back(std::move(k));
    }
    return true;
  };
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text.begin(), text.end(), callback);
  } catch (const nlohmann::json::exception &e) {
    std::string what = e.what();
    throw corruptFile(path, fmt::format("the header is not valid JSON ({})",
                                        what.substr(0, 200)));
  }
  if (!header.is_object())
    throw corruptFile(path, "the header is not a JSON object");
  if (!duplicate.empty())
    throw corruptFile(
        path, fmt::format("the header names '{}' twice", shown(duplicate)));
  if (deepest > 3)
    throw corruptFile(path, "the header nests deeper than tensor entries do");
  return header;
}

/// One tensor's entry: a known dtype, a shape of non-negative sizes whose
/// bytes do not overflow, [begin, end) spanning exactly those bytes inside
/// the data section.
SafeTensorsEntry parseEntry(const std::string &name, const nlohmann::json &t,
                            uint64_t dataBytes, const std::string &path) {
  auto bad = [&](const std::string &why) {
    return corruptFile(path, fmt::format("tensor '{}' {}", shown(name), why));
  };
  if (!t.is_object() || !t.contains("dtype") || !t.contains("shape") ||
      !t.contains("data_offsets"))
    throw bad("lacks dtype, shape or data_offsets");
  const auto &dtype = t["dtype"], &shape = t["shape"],
             &offsets = t["data_offsets"];
  if (!dtype.is_string() || !dtypeBytes(dtype.get<std::string>()))
    throw bad(fmt::format("has unknown dtype {}", dtype.dump().substr(0, 40)));
  SafeTensorsEntry e;
  e.dtype = dtype.get<std::string>();
  if (!shape.is_array())
    throw bad("has a shape that is not a list");
  uint64_t bytes = dtypeBytes(e.dtype);
  for (const auto &d : shape) {
    if (!d.is_number_integer() ||
        (d.is_number_unsigned() && d.get<uint64_t>() > uint64_t(INT64_MAX)) ||
        d.get<int64_t>() < 0)
      throw bad(fmt::format("has a shape entry {} that is not a "
                            "non-negative integer",
                            d.dump().substr(0, 40)));
    e.shape.push_back(d.get<int64_t>());
    if (__builtin_mul_overflow(bytes, uint64_t(e.shape.back()), &bytes))
      throw bad("has a shape whose size overflows 64 bits");
  }
  if (!offsets.is_array() || offsets.size() != 2 ||
      !offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned())
    throw bad("has data_offsets that are not [begin, end]");
  e.begin = offsets[0].get<uint64_t>();
  e.end = offsets[1].get<uint64_t>();
  if (e.end < e.begin)
    throw bad(fmt::format("ends (byte {}) before it begins (byte {})", e.end,
                          e.begin));
  if (e.end - e.begin != bytes)
    throw bad(fmt::format("spans {} bytes, but {} {} needs {}", e.end - e.begin,
                          e.dtype, fmt::join(e.shape, "x"), bytes));
  if (e.end > dataBytes)
    throw bad(fmt::format("runs past the end of the file (byte {} of a "
                          "{}-byte data section)",
                          e.end, dataBytes));
  return e;
}

/// The tensors tile the data section: in order, no overlap, no gap,
/// nothing after the last.
void checkTiling(const SafeTensorsHeader &h, const std::string &path) {
  std::vector<std::pair<const std::string *, const SafeTensorsEntry *>> order;
  for (const auto &[name, entry] : h.entries)
    order.push_back({&name, &entry});
  std::sort(order.begin(), order.end(), [](const auto &a, const auto &b) {
    const SafeTensorsEntry &x = *a.second, &y = *b.second;
    return x.begin != y.begin ? x.begin < y.begin : x.end < y.end;
  });
  uint64_t at = 0;
  for (const auto &[name, e] : order) {
    if (e->begin != at)
      throw corruptFile(
          path,
          fmt::format("tensor '{}' begins at byte {} of the data "
                      "section, where {} was expected ({})",
                      shown(*name), e->begin, at,
                      e->begin < at ? "it overlaps the tensor before it"
                                    : "bytes between tensors belong to none"));
    at = e->end;
  }
  if (at != h.dataBytes)
    throw corruptFile(path, fmt::format("the tensors cover {} bytes of a "
                                        "{}-byte data section",
                                        at, h.dataBytes));
}

} // namespace

SafeTensorsHeader parseSafeTensorsHeader(std::string_view start,
                                         uint64_t fileSize,
                                         const std::string &path) {
  if (fileSize < 8 || start.size() < 8)
    throw corruptFile(path, "shorter than its 8-byte header length");
  uint64_t length = 0;
  std::memcpy(&length, start.data(), 8);
  if (length > kMaxSafeTensorsHeader)
    throw corruptFile(path,
                      fmt::format("a header of {} bytes (at most {} are read)",
                                  length, kMaxSafeTensorsHeader));
  if (length > fileSize - 8 || length > start.size() - 8)
    throw corruptFile(path, fmt::format("header of {} bytes in a file of {}",
                                        length, fileSize));
  nlohmann::json header = parseHeaderJson(start.substr(8, length), path);

  SafeTensorsHeader h;
  h.dataStart = 8 + length;
  h.dataBytes = fileSize - h.dataStart;
  for (auto &item : header.items()) {
    const std::string &name = item.key();
    const nlohmann::json &t = item.value();
    if (name != "__metadata__") {
      h.entries.emplace(name, parseEntry(name, t, h.dataBytes, path));
      continue;
    }
    if (!t.is_object())
      throw corruptFile(path, "__metadata__ is not an object of strings");
    for (auto &[k, v] : t.items()) {
      if (!v.is_string())
        throw corruptFile(
            path, fmt::format("metadata '{}' is not a string", shown(k)));
      h.metadata[k] = v.get<std::string>();
    }
  }
  checkTiling(h, path);
  return h;
}

SafeTensorsFile::SafeTensorsFile(const std::string &path, bool verifyChecksum)
    : path(path) {
  requireRegularFile(path, "the safetensors file",
                     "pass a checkpoint directory or a .safetensors file");
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    throw RuntimeError(
        fmt::format("error: cannot read '{}'\nhelp: check the path", path));
  const uint64_t size = uint64_t(in.tellg());
  in.seekg(0);
  std::string start(std::min<uint64_t>(size, 8), '\0');
  in.read(start.data(), std::streamsize(start.size()));
  if (start.size() == 8) {
    uint64_t length = 0;
    std::memcpy(&length, start.data(), 8);
    if (length <= std::min(kMaxSafeTensorsHeader, size - 8)) {
      start.resize(8 + length);
      in.read(start.data() + 8, std::streamsize(length));
    }
  }
  header = parseSafeTensorsHeader(start, size, path);
  auto recorded = header.metadata.find("checksum");
  if (verifyChecksum && recorded != header.metadata.end()) {
    std::string actual = fileChecksum(path, header.dataStart, header.dataBytes);
    if (actual != recorded->second)
      throw RuntimeError(fmt::format(
          "error: '{}' fails its checksum: the data is {}, the header "
          "recorded {}\nhelp: the file was corrupted after it was written "
          "(disk, copy or edit); use an earlier checkpoint",
          path, actual, recorded->second.substr(0, 80)));
  }
}

std::vector<std::string> SafeTensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto &[name, e] : header.entries)
    out.push_back(name);
  return out;
}

const std::vector<int64_t> &
SafeTensorsFile::shape(const std::string &name) const {
  return header.entries.at(name).shape;
}

void SafeTensorsFile::read(const std::string &name,
                           const std::vector<int64_t> &shape,
                           float *out) const {
  auto it = header.entries.find(name);
  if (it == header.entries.end())
    throw RuntimeError(fmt::format(
        "error: '{}' has no tensor '{}'\nhelp: the checkpoint belongs to "
        "another model; check the spec",
        path, name));
  const SafeTensorsEntry &e = it->second;
  if ((e.dtype != "F32" && e.dtype != "BF16") || e.shape != shape) {
    // The vocabulary's rows alone differ: another padding (Megatron-LM's
    // make_vocab_size_divisible_by x tp), not another model.
    const bool vocabRows = e.shape.size() == 2 && shape.size() == 2 &&
                           e.shape[1] == shape[1] && e.shape[0] != shape[0] &&
                           (name.find("word_embeddings") != std::string::npos ||
                            name.find("output_layer") != std::string::npos);
    throw RuntimeError(fmt::format(
        "error: tensor '{}' in '{}' is {} {}, the model needs F32 {}\nhelp: "
        "{}",
        name, path, e.dtype, fmt::join(e.shape, "x"), fmt::join(shape, "x"),
        vocabRows
            ? fmt::format(
                  "the vocabulary is padded to a multiple of "
                  "make_vocab_size_divisible_by x tp (docs/spec.md): the "
                  "checkpoint's run padded it to {} rows, this one to {}; "
                  "give make_vocab_size_divisible_by "
                  "(--make-vocab-size-divisible-by) a value that pads both "
                  "alike",
                  e.shape[0], shape[0])
            : std::string("the checkpoint belongs to another model; check "
                          "the spec")));
  }
  std::ifstream in(path, std::ios::binary);
  in.seekg(std::streamoff(header.dataStart + e.begin));
  const uint64_t bytes = e.end - e.begin;
  bool ok;
  if (e.dtype == "F32") {
    ok = bool(in.read(reinterpret_cast<char *>(out), std::streamsize(bytes)));
  } else {
    // bfloat16 is the top half of a float32: widening is exact.
    std::vector<uint16_t> half(bytes / 2);
    ok = bool(
        in.read(reinterpret_cast<char *>(half.data()), std::streamsize(bytes)));
    for (size_t i = 0; ok && i < half.size(); ++i) {
      uint32_t bits = uint32_t(half[i]) << 16;
      std::memcpy(out + i, &bits, sizeof bits);
    }
  }
  if (!ok)
    throw RuntimeError(fmt::format(
        "error: cannot read tensor '{}' from '{}'\nhelp: the file is "
        "truncated; use an earlier checkpoint",
        name, path));
}

} // namespace hypipe::rt
