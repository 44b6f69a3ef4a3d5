//===- Checkpoint.cpp - save, find, read and merge checkpoints ------------===//

#include "runtime/Checkpoint.h"

#include "runtime/Artifact.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <fstream>

namespace hypipe::rt {

namespace {

constexpr const char *kFormat = "hypipe-checkpoint";
constexpr int kVersion = 1;

bool isDirectory(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool exists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

int64_t toInt(const std::map<std::string, std::string> &m,
              const std::string &key, const std::string &file) {
  auto it = m.find(key);
  try {
    if (it != m.end())
      return std::stoll(it->second);
  } catch (const std::exception &) {
  }
  throw RuntimeError(fmt::format(
      "error: '{}' has no valid '{}' in its metadata\nhelp: it was not "
      "written by hypipe-run (use hypipe ckpt merge for a single file)",
      file, key));
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
  if (toInt(m, "version", file) != kVersion)
    throw RuntimeError(fmt::format(
        "error: '{}' is checkpoint version {}; this hypipe reads version "
        "{}\nhelp: resume with the hypipe that wrote it",
        file, m.at("version"), kVersion));
  CheckpointInfo info;
  info.step = toInt(m, "step", file);
  info.consumedSamples = toInt(m, "consumed_samples", file);
  info.globalBatch = toInt(m, "global_batch", file);
  info.seed = toInt(m, "seed", file);
  auto get = [&](const char *k) {
    auto it = m.find(k);
    return it == m.end() ? std::string() : it->second;
  };
  info.model = get("model");
  info.pattern = get("pattern");
  info.layout = get("layout");
  return info;
}

} // namespace

std::map<std::string, std::string> CheckpointInfo::metadata() const {
  return {{"format", kFormat},
          {"version", std::to_string(kVersion)},
          {"step", std::to_string(step)},
          {"consumed_samples", std::to_string(consumedSamples)},
          {"global_batch", std::to_string(globalBatch)},
          {"seed", std::to_string(seed)},
          {"model", model},
          {"pattern", pattern},
          {"layout", layout}};
}

std::string stepDirectoryName(int64_t step) {
  return fmt::format("step_{:08d}", step);
}

CheckpointReader::CheckpointReader(const std::string &path) {
  std::string dir = path;
  if (!exists(path))
    throw RuntimeError(fmt::format(
        "error: no checkpoint at '{}'\nhelp: pass the --save directory of an "
        "earlier run, one of its step_* directories, or a merged file",
        path));
  if (!isDirectory(path)) {
    where = path;
    files.push_back(std::make_unique<SafeTensorsFile>(path));
    meta = infoFrom(files[0]->metadata(), path);
    for (const std::string &name : files[0]->names())
      byName[name] = files[0].get();
    return;
  }
  if (!exists(dir + "/index.json")) {
    std::ifstream latest(dir + "/latest");
    std::string name;
    if (!(latest >> name))
      throw RuntimeError(fmt::format(
          "error: '{}' has neither index.json nor latest\nhelp: pass a "
          "directory written by hypipe-run --save (a run that never saved "
          "leaves none)",
          path));
    dir += "/" + name;
  }
  where = dir;
  std::string indexPath = dir + "/index.json";
  std::ifstream in(indexPath);
  nlohmann::json index = nlohmann::json::parse(in, nullptr, false);
  if (!in || index.is_discarded() || !index.is_object() ||
      !index.contains("metadata") || !index.contains("weight_map"))
    throw RuntimeError(fmt::format(
        "error: '{}' is missing, truncated or corrupt\nhelp: use an earlier "
        "checkpoint (step directories are complete once latest names them)",
        indexPath));
  std::map<std::string, std::string> m;
  for (auto &[k, v] : index["metadata"].items())
    if (v.is_string())
      m[k] = v.get<std::string>();
  meta = infoFrom(m, indexPath);
  std::map<std::string, const SafeTensorsFile *> opened;
  for (auto &[name, file] : index["weight_map"].items()) {
    if (!file.is_string())
      throw RuntimeError(fmt::format(
          "error: '{}' maps '{}' to no file\nhelp: use an earlier checkpoint",
          indexPath, name));
    std::string f = file.get<std::string>();
    if (!opened.count(f)) {
      files.push_back(std::make_unique<SafeTensorsFile>(dir + "/" + f));
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
  auto it = byName.find(name);
  if (it == byName.end())
    throw RuntimeError(fmt::format(
        "error: checkpoint '{}' has no tensor '{}'\nhelp: it was saved from "
        "another model; check the spec's pattern and sizes",
        where, name));
  it->second->read(name, shape, out);
}

void writeCheckpointIndex(const std::string &dir, const CheckpointInfo &info,
                          const std::map<std::string, std::string> &weightMap,
                          int64_t pp, int64_t vpp, int64_t dp,
                          const std::string &schedule, int64_t microbatches) {
  nlohmann::ordered_json index;
  index["metadata"] = info.metadata();
  index["layout"] = {{"pp", pp},
                     {"vpp", vpp},
                     {"dp", dp},
                     {"schedule", schedule},
                     {"microbatches", microbatches}};
  index["weight_map"] = weightMap;
  std::string text = index.dump(1) + "\n";
  writeFileAtomically(dir + "/index.json", {{text.data(), text.size()}});
}

void markLatest(const std::string &root, const std::string &stepDir) {
  std::string text = stepDir + "\n";
  writeFileAtomically(root + "/latest", {{text.data(), text.size()}});
}

int64_t mergeCheckpoint(const std::string &path, const std::string &out) {
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
