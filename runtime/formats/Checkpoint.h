//===- Checkpoint.h - save, find, read and merge checkpoints --------------===//
//
// A checkpoint is a directory ROOT/step_NNNNNNNN holding one safetensors
// file per pipeline rank (pp<r>.safetensors: parameters under their
// Megatron names, AdamW moments under optimizer.exp_avg.<name> and
// optimizer.exp_avg_sq.<name>) and index.json naming the file of every
// tensor and each file's size and checksum. ROOT/latest names the newest
// complete step directory; it is replaced (atomically) only after every
// file of the step is on disk. Every name read from index.json or latest
// must stay inside its directory, and every file is checked against its
// checksum before a tensor is read. docs/runtime.md describes the format,
// docs/security.md the checks.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_FORMATS_CHECKPOINT_H
#define HYPIPE_RUNTIME_FORMATS_CHECKPOINT_H

#include "core/schedule/Vocabulary.h"
#include "runtime/formats/SafeTensors.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace hypipe::rt {

/// What a checkpoint says about the run that wrote it.
struct CheckpointInfo {
  int64_t step = 0;            ///< optimizer steps taken
  int64_t consumedSamples = 0; ///< samples drawn so far
  int64_t globalBatch = 0;     ///< samples per step
  int64_t seed = 0;            ///< weights and data order
  /// The step by which the run's learning rate reaches min_lr (0: not
  /// recorded, a checkpoint older than the field).
  int64_t lrDecaySteps = 0;
  std::string model, pattern, layout;
  /// The artifact's `model` object as JSON text (modelJson), so that the
  /// checkpoint exports without its artifact; empty in older checkpoints.
  std::string modelConfig;
  /// The run's learning-rate schedule and AdamW settings as JSON text
  /// (optimizerJson), so that a resumed run keeps them; empty in older
  /// checkpoints.
  std::string optimizerConfig;

  /// As safetensors metadata (all values strings).
  std::map<std::string, std::string> metadata() const;
};

std::string stepDirectoryName(int64_t step);
/// Whether `name` is one stepDirectoryName writes (step_ and 8 digits).
bool isStepDirectoryName(std::string_view name);

/// Opens a checkpoint: a root (through its `latest`), a step directory, or
/// a merged .safetensors file. Throws RuntimeError naming what is missing,
/// truncated or corrupt.
class CheckpointReader {
public:
  explicit CheckpointReader(const std::string &path);

  /// Parses and checks index.json's text (`indexPath` names it in errors):
  /// metadata, a weight map of plain file names, and (version 2) the size
  /// and checksum of every file. Throws RuntimeError.
  struct Index {
    std::map<std::string, std::string> metadata;
    std::map<std::string, std::string> weightMap; ///< tensor -> file
    std::map<std::string, WrittenFile> files;     ///< empty for version 1
  };
  static Index parseIndex(const std::string &text,
                          const std::string &indexPath);
  /// The step directory `path` names: itself when it holds index.json,
  /// else the one its `latest` names, confined to it. Throws RuntimeError.
  static std::string stepDirectoryOf(const std::string &path);
  /// `dir`/index.json, read and parsed. Throws RuntimeError.
  static Index readIndex(const std::string &dir);

  const CheckpointInfo &info() const { return meta; }
  /// Where the tensors come from (the step directory or the file).
  const std::string &location() const { return where; }
  bool has(const std::string &name) const { return byName.count(name); }
  /// Names of the model's parameters (not optimizer state), sorted.
  std::vector<std::string> parameterNames() const;
  const std::vector<int64_t> &shape(const std::string &name) const;
  void read(const std::string &name, const std::vector<int64_t> &shape,
            float *out) const;

private:
  std::string where;
  CheckpointInfo meta;
  std::vector<std::unique_ptr<SafeTensorsFile>> files;
  std::map<std::string, const SafeTensorsFile *> byName;
};

/// What the checkpoint at `path` says about its run, from index.json (or
/// a merged file's header) alone: no tensor file is read or hashed.
/// Throws RuntimeError.
CheckpointInfo readCheckpointInfo(const std::string &path);

/// Writes `dir`/index.json for a step whose rank files (`files`, by name)
/// are complete.
void writeCheckpointIndex(const std::string &dir, const CheckpointInfo &info,
                          const std::map<std::string, std::string> &weightMap,
                          const std::map<std::string, WrittenFile> &files,
                          int64_t pp, int64_t vpp, int64_t dp,
                          schedule::ScheduleKind schedule,
                          int64_t microbatches);

/// Points `root`/latest at `stepDir` (a name inside root), atomically.
void markLatest(const std::string &root, const std::string &stepDir);

/// Removes the oldest step directories of `root` so that `keep` remain
/// (never the one `latest` names); returns the names removed.
std::vector<std::string> pruneCheckpoints(const std::string &root,
                                          int64_t keep);

/// Removes step directories of `root` that have no index.json (a save that
/// did not finish; `latest` never named them); returns their names.
std::vector<std::string> removeIncompleteSteps(const std::string &root);

/// Writes every tensor of the checkpoint at `path` into one safetensors
/// file `out` (parameters under their own names, optimizer state under
/// optimizer.*), with the checkpoint's metadata. Returns the tensor count.
int64_t mergeCheckpoint(const std::string &path, const std::string &out);

} // namespace hypipe::rt

#endif
