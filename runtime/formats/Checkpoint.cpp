//===- Checkpoint.cpp - save, find, read and merge checkpoints ------------===//

#include "runtime/formats/Checkpoint.h"

#include "core/Text.h"
#include "core/model/ParameterNames.h"

#include "runtime/formats/Artifact.h"
#include "runtime/formats/FileCheck.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace hypipe::rt {

namespace {

constexpr const char *kFormat = "hypipe-checkpoint";
/// Version 2 records every file's size and checksum in index.json; version
/// 1 (no checksums) is still read.
constexpr int kVersion = 2;
constexpr int kOldestVersion = 1;
/// The most steps, or samples a step, a checkpoint may record.
constexpr int64_t kMaxCount = int64_t(1) << 40;

/// Metadata field `key` as the decimal integer hypipe-run writes, whole:
/// "12abc", " 12" or "1e3" is refused, not read as 12 or 1.
int64_t toInt(const std::map<std::string, std::string> &m,
              const std::string &key, const std::string &file) {
  auto it = m.find(key);
  if (it == m.end())
    throw RuntimeError(fmt::format(
        "error: '{}' has no valid '{}' in its metadata\nhelp: it was not "
        "written by hypipe-run (use hypipe ckpt merge for a single file)",
        file, key));
  const std::string &text = it->second;
  int64_t value = 0;
  auto [end, ec] =
      std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    throw RuntimeError(fmt::format(
        "error: '{}' has no valid '{}' in its metadata: it is not a whole "
        "number\nhelp: the checkpoint was edited or is corrupt; use an "
        "earlier one",
        file, key));
  return value;
}

/// The step by which the saved run's cosine reaches min_lr, in a file of
/// `step` steps: a run writes its step count or training.lr_decay_steps, at
/// least 1; 0 (none) only a file of no step, an import. Another value would
/// silently change the resumed run's rate (-100 was read as "none", and the
/// cosine restarted above min_lr).
int64_t lrDecayStepsOf(const std::map<std::string, std::string> &m,
                       int64_t step, const std::string &file) {
  if (!m.count("lr_decay_steps"))
    return 0; // a checkpoint older than the field
  const int64_t least = step > 0 ? 1 : 0;
  int64_t steps = toInt(m, "lr_decay_steps", file);
  if (steps < least || steps > kMaxCount)
    throw RuntimeError(fmt::format(
        "error: '{}' records lr_decay_steps {} in its metadata, and a run of "
        "{} steps writes a step count from {} to 2^40\nhelp: the checkpoint "
        "was edited or is corrupt; use an earlier one",
        file, steps, step, least));
  return steps;
}

CheckpointInfo infoFrom(const std::map<std::string, std::string> &m,
                        const std::string &file) {
  auto format = m.find("format");
  if (format == m.end() || format->second != kFormat)
    throw RuntimeError(fmt::format(
        "error: '{}' is not a hypipe checkpoint (no format '{}' in its "
        "metadata)\nhelp: pass a directory written by hypipe-run --save, or a "
        "file written by hypipe ckpt merge",
        file, kFormat));
  int64_t version = toInt(m, "version", file);
  if (version < kOldestVersion || version > kVersion)
    throw RuntimeError(fmt::format(
        "error: '{}' is checkpoint version {}; this hypipe reads versions "
        "{} to {}\nhelp: resume with the hypipe that wrote it",
        file, version, kOldestVersion, kVersion));
  CheckpointInfo info;
  info.step = toInt(m, "step", file);
  info.consumedSamples = toInt(m, "consumed_samples", file);
  info.globalBatch = toInt(m, "global_batch", file);
  info.seed = toInt(m, "seed", file);
  // The data position is step x global_batch: both must be what a run can
  // have written, so that a resumed step is never negative or past int64.
  if (info.step < 0 || info.globalBatch < 1 || info.consumedSamples < 0 ||
      info.step > kMaxCount || info.globalBatch > kMaxCount ||
      info.consumedSamples != info.step * info.globalBatch)
    throw RuntimeError(fmt::format(
        "error: '{}' says step {}, global batch {} and {} consumed samples, "
        "which no run writes\nhelp: the checkpoint was edited or is corrupt; "
        "use an earlier one",
        file, info.step, info.globalBatch, info.consumedSamples));
  info.lrDecaySteps = lrDecayStepsOf(m, info.step, file);
  auto get = [&](const char *k) {
    auto it = m.find(k);
    return it == m.end() ? std::string() : it->second;
  };
  info.model = get("model");
  info.pattern = get("pattern");
  info.layout = get("layout");
  info.modelConfig = get("model_config");
  info.optimizerConfig = get("optimizer_config");
  return info;
}

/// The step_NNNNNNNN directories of `root`, oldest first.
std::vector<std::string> stepDirectories(const std::string &root) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto &entry : std::filesystem::directory_iterator(root, ec)) {
    std::string name = entry.path().filename().string();
    if (isStepDirectoryName(name) && entry.is_directory(ec) &&
        !entry.is_symlink(ec))
      out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// The name `root`/latest holds ("" when there is no such file).
std::string latestName(const std::string &root) {
  const std::string path = root + "/latest";
  if (!pathExists(path))
    return std::string();
  std::string text = readFileBounded(path, files::kLatest);
  return std::string(text::trim(text));
}

/// A file against the size and checksum index.json recorded for it.
void checkFile(const std::string &file, const WrittenFile &expected,
               const std::string &indexPath) {
  struct stat st;
  if (::stat(file.c_str(), &st) != 0)
    throw RuntimeError(fmt::format(
        "error: cannot read '{}', which '{}' lists\nhelp: the checkpoint is "
        "incomplete; use an earlier one",
        file, indexPath));
  if (uint64_t(st.st_size) != expected.bytes)
    throw RuntimeError(fmt::format(
        "error: '{}' has {} bytes, '{}' recorded {}\nhelp: the file was "
        "truncated or replaced after it was written; use an earlier "
        "checkpoint",
        file, uint64_t(st.st_size), indexPath, expected.bytes));
  std::string actual = fileChecksum(file);
  if (actual != expected.checksum)
    throw RuntimeError(fmt::format(
        "error: '{}' fails its checksum: the file is {}, '{}' recorded {}\n"
        "help: the file was corrupted after it was written (disk, copy or "
        "edit); use an earlier checkpoint",
        file, actual, indexPath, expected.checksum.substr(0, 80)));
}

} // namespace

std::map<std::string, std::string> CheckpointInfo::metadata() const {
  std::map<std::string, std::string> m = {
      {"format", kFormat},
      {"version", std::to_string(kVersion)},
      {"step", std::to_string(step)},
      {"consumed_samples", std::to_string(consumedSamples)},
      {"global_batch", std::to_string(globalBatch)},
      {"seed", std::to_string(seed)},
      {"lr_decay_steps", std::to_string(lrDecaySteps)},
      {"model", model},
      {"pattern", pattern},
      {"layout", layout}};
  if (!modelConfig.empty())
    m["model_config"] = modelConfig;
  if (!optimizerConfig.empty())
    m["optimizer_config"] = optimizerConfig;
  return m;
}

std::string stepDirectoryName(int64_t step) {
  return fmt::format("step_{:08d}", step);
}

bool isStepDirectoryName(std::string_view name) {
  return name.size() == 13 && name.substr(0, 5) == "step_" &&
         name.find_first_not_of("0123456789", 5) == std::string_view::npos;
}

CheckpointReader::Index
CheckpointReader::parseIndex(const std::string &text,
                             const std::string &indexPath) {
  auto corrupt = [&](const std::string &why) {
    return RuntimeError(fmt::format(
        "error: '{}' is corrupt: {}\nhelp: use an earlier checkpoint (step "
        "directories are complete once latest names them)",
        indexPath, why));
  };
  nlohmann::json index = nlohmann::json::parse(text, nullptr, false);
  if (index.is_discarded() || !index.is_object())
    throw corrupt("it is not a JSON object (truncated?)");
  Index out;
  auto object = [&](const char *key) -> const nlohmann::json & {
    auto it = index.find(key);
    if (it == index.end() || !it->is_object())
      throw corrupt(fmt::format("it has no '{}' object", key));
    return *it;
  };
  for (auto &[k, v] : object("metadata").items())
    if (v.is_string())
      out.metadata[k] = v.get<std::string>();
  int64_t version = toInt(out.metadata, "version", indexPath);
  for (auto &[name, file] : object("weight_map").items()) {
    if (!file.is_string() || !isPlainName(file.get<std::string>()))
      throw RuntimeError(fmt::format(
          "error: '{}' maps tensor '{}' to {}, which is not a file name "
          "inside the step directory\nhelp: index.json was not written by "
          "hypipe or was tampered with; use another checkpoint",
          indexPath, name.substr(0, 80), file.dump().substr(0, 200)));
    out.weightMap[name] = file.get<std::string>();
  }
  if (version < 2)
    return out;
  for (auto &[name, f] : object("files").items()) {
    if (!isPlainName(name))
      throw corrupt(fmt::format("'files' names '{}', which is not a file name "
                                "inside the step directory",
                                name.substr(0, 200)));
    auto checksum = f.find("checksum");
    auto bytes = f.find("bytes");
    if (!f.is_object() || checksum == f.end() || !checksum->is_string() ||
        bytes == f.end() || !bytes->is_number_unsigned())
      throw corrupt(fmt::format("file '{}' has no checksum and size", name));
    out.files[name] = {checksum->get<std::string>(), bytes->get<uint64_t>()};
  }
  for (const auto &[tensor, file] : out.weightMap)
    if (!out.files.count(file))
      throw corrupt(fmt::format("tensor '{}' lies in '{}', which has no "
                                "checksum in 'files'",
                                tensor.substr(0, 80), file));
  return out;
}

std::string CheckpointReader::stepDirectoryOf(const std::string &path) {
  if (pathExists(path + "/index.json"))
    return path;
  std::string name = latestName(path);
  if (name.empty() && pathExists(path + "/latest"))
    throw RuntimeError(fmt::format(
        "error: '{}/latest' is empty: it names no step directory\nhelp: "
        "write the name of the step to resume from into it (e.g. {}), or "
        "pass that step directory itself",
        path, stepDirectoryName(1)));
  if (name.empty())
    throw RuntimeError(fmt::format(
        "error: '{}' has neither index.json nor latest\nhelp: pass a "
        "directory written by hypipe-run --save (a run that never saved "
        "leaves none)",
        path));
  if (!isPlainName(name) || name.rfind("step_", 0) != 0)
    throw RuntimeError(fmt::format(
        "error: '{}/latest' names '{}', which is not a step directory of "
        "this checkpoint\nhelp: latest holds one name such as {}; the file "
        "was not written by hypipe or was tampered with",
        path, files::excerpt(name), stepDirectoryName(1)));
  return confinedPath(path, name, "the step directory", path + "/latest");
}

CheckpointReader::Index CheckpointReader::readIndex(const std::string &dir) {
  const std::string indexPath = dir + "/index.json";
  return parseIndex(readFileBounded(indexPath, files::kIndexJson), indexPath);
}

CheckpointInfo readCheckpointInfo(const std::string &path) {
  if (!isDirectory(path))
    return infoFrom(SafeTensorsFile(path, /*verifyChecksum=*/false).metadata(),
                    path);
  std::string dir = CheckpointReader::stepDirectoryOf(path);
  return infoFrom(CheckpointReader::readIndex(dir).metadata,
                  dir + "/index.json");
}

CheckpointReader::CheckpointReader(const std::string &path) {
  std::string dir = path;
  if (!pathExists(path))
    throw RuntimeError(fmt::format(
        "error: no checkpoint at '{}'\nhelp: pass the --save directory of an "
        "earlier run, one of its step_* directories, or a merged file",
        path));
  if (!isDirectory(path)) {
    // A checkpoint directory's `latest` (a name, not tensors) read as a
    // merged file would be a safetensors header of a nonsense length.
    if (std::filesystem::path(path).filename() == "latest")
      throw RuntimeError(fmt::format(
          "error: '{}' is the file that names a checkpoint directory's "
          "latest step, not a checkpoint\nhelp: pass its directory, '{}'",
          path, std::filesystem::path(path).parent_path().string()));
    where = path;
    files.push_back(std::make_unique<SafeTensorsFile>(path));
    meta = infoFrom(files[0]->metadata(), path);
    for (const std::string &name : files[0]->names())
      byName[name] = files[0].get();
    return;
  }
  where = dir = stepDirectoryOf(path);
  const std::string indexPath = dir + "/index.json";
  Index index = readIndex(dir);
  meta = infoFrom(index.metadata, indexPath);
  std::map<std::string, const SafeTensorsFile *> opened;
  for (const auto &[name, f] : index.weightMap) {
    if (!opened.count(f)) {
      std::string file = confinedPath(dir, f, "the tensor file", indexPath);
      bool checked = index.files.count(f) > 0;
      if (checked)
        checkFile(file, index.files.at(f), indexPath);
      files.push_back(std::make_unique<SafeTensorsFile>(file, !checked));
      opened[f] = files.back().get();
    }
    if (!opened[f]->has(name))
      throw RuntimeError(fmt::format(
          "error: '{}/{}' lacks tensor '{}' that index.json places there\n"
          "help: the checkpoint is incomplete; use an earlier one",
          dir, f, name));
    byName[name] = opened[f];
  }
}

std::vector<std::string> CheckpointReader::parameterNames() const {
  std::vector<std::string> out;
  for (const auto &[name, file] : byName)
    if (name.rfind("optimizer.", 0) != 0)
      out.push_back(name);
  return out;
}

const std::vector<int64_t> &
CheckpointReader::shape(const std::string &name) const {
  return byName.at(name)->shape(name);
}

void CheckpointReader::read(const std::string &name,
                            const std::vector<int64_t> &shape,
                            float *out) const {
  std::string key = name;
  auto it = byName.find(key);
  if (it == byName.end()) {
    // Written before hypipe took Megatron's hybrid names: the same tensor
    // under its old name (optimizer moments carry the prefix).
    const size_t at = name.rfind("decoder.layers.");
    if (at != std::string::npos) {
      key = name.substr(0, at) + legacyParameterName(name.substr(at));
      it = byName.find(key);
    }
  }
  if (it == byName.end())
    throw RuntimeError(fmt::format(
        "error: checkpoint '{}' has no tensor '{}'\nhelp: it was saved from "
        "another model; check the spec's pattern and sizes",
        where, name));
  it->second->read(key, shape, out);
}

void writeCheckpointIndex(const std::string &dir, const CheckpointInfo &info,
                          const std::map<std::string, std::string> &weightMap,
                          const std::map<std::string, WrittenFile> &files,
                          int64_t pp, int64_t vpp, int64_t dp,
                          schedule::ScheduleKind schedule,
                          int64_t microbatches) {
  nlohmann::ordered_json index;
  index["metadata"] = info.metadata();
  index["layout"] = {{"pp", pp},
                     {"vpp", vpp},
                     {"dp", dp},
                     {"schedule", schedule::scheduleName(schedule)},
                     {"microbatches", microbatches}};
  index["weight_map"] = weightMap;
  nlohmann::ordered_json sums = nlohmann::ordered_json::object();
  for (const auto &[name, f] : files)
    sums[name] = {{"bytes", f.bytes}, {"checksum", f.checksum}};
  index["files"] = sums;
  std::string text = index.dump(1) + "\n";
  writeFileAtomically(dir + "/index.json", "checkpoint index",
                      {{text.data(), text.size()}});
}

void markLatest(const std::string &root, const std::string &stepDir) {
  std::string text = stepDir + "\n";
  writeFileAtomically(root + "/latest", "checkpoint 'latest' file",
                      {{text.data(), text.size()}});
}

std::vector<std::string> pruneCheckpoints(const std::string &root,
                                          int64_t keep) {
  std::vector<std::string> steps = stepDirectories(root), removed;
  const std::string latest = latestName(root);
  int64_t excess = int64_t(steps.size()) - keep;
  for (const std::string &name : steps) {
    if (excess <= 0)
      break;
    if (name == latest)
      continue;
    std::error_code ec;
    std::filesystem::remove_all(root + "/" + name, ec);
    if (!ec) {
      removed.push_back(name);
      --excess;
    }
  }
  return removed;
}

std::vector<std::string> removeIncompleteSteps(const std::string &root) {
  std::vector<std::string> removed;
  const std::string latest = latestName(root);
  for (const std::string &name : stepDirectories(root)) {
    if (name == latest || pathExists(root + "/" + name + "/index.json"))
      continue;
    std::error_code ec;
    std::filesystem::remove_all(root + "/" + name, ec);
    if (!ec)
      removed.push_back(name);
  }
  return removed;
}

int64_t mergeCheckpoint(const std::string &path, const std::string &out) {
  requireOutputFile(out, "the merged checkpoint", {path});
  CheckpointReader ckpt(path);
  SafeTensorsWriter w;
  std::vector<std::vector<float>> buffers;
  std::vector<std::string> names = ckpt.parameterNames();
  for (const std::string &name : ckpt.parameterNames())
    for (const char *prefix : {"optimizer.exp_avg.", "optimizer.exp_avg_sq."})
      if (ckpt.has(prefix + name))
        names.push_back(prefix + name);
  for (const std::string &name : names) {
    const std::vector<int64_t> &shape = ckpt.shape(name);
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    buffers.emplace_back(size_t(n));
    ckpt.read(name, shape, buffers.back().data());
    w.add(name, shape, buffers.back().data());
  }
  for (auto &[k, v] : ckpt.info().metadata())
    w.metadata(k, v);
  w.write(out);
  return int64_t(names.size());
}

} // namespace hypipe::rt
