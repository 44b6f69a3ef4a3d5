//===- Checkpointer.h - a rank's save and resume through Checkpoint.h -----===//
//
// What Megatron's checkpointing.py does for a run: saves the parameters and
// AdamW moments of this rank's stages (gathered from the distributed
// optimizer's shards) as one safetensors file per pipeline rank plus an
// index, resumes from a checkpoint of any layout of the same model, takes
// starting weights from one, and writes the reference dump of a step.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_EXEC_CHECKPOINTER_H
#define HYPIPE_RUNTIME_EXEC_CHECKPOINTER_H

#include "runtime/exec/Optimizer.h"
#include "runtime/exec/Stage.h"
#include "runtime/exec/StepBatch.h"
#include "runtime/formats/Checkpoint.h"

#include <string>
#include <vector>

namespace hypipe::rt {

class Comm;

class Checkpointer {
public:
  Checkpointer(const Artifact &artifact, std::vector<Stage> &stages,
               AdamWOptimizer &optimizer, Transport &transport, Comm &comm);

  /// Saves parameters and AdamW state after step `step` to
  /// `root`/step_NNNNNNNN and points `root`/latest at it (collective;
  /// Checkpoint.h). Throws CollectiveError, leaving the previous checkpoint
  /// as it was, when any rank fails to write.
  void save(const std::string &root, int64_t step);
  /// Restores parameters and AdamW state from a checkpoint (root, step
  /// directory or merged file, of any layout of the same model) and returns
  /// the step it was saved after; `saved` becomes the artifact's training
  /// settings with the checkpointed run's learning-rate schedule and AdamW
  /// settings (those it records: its lr decay end, 0 when not recorded).
  /// Throws CollectiveError.
  int64_t resume(const std::string &path, TrainingConfig &saved);
  /// Replaces the parameters with those of a checkpoint (any layout of the
  /// same layers, or a `hypipe ckpt import` file); the optimizer state and
  /// the step stay fresh. Throws CollectiveError.
  void initFrom(const std::string &path);
  /// Writes the parameters, the (summed) gradients and `batch` of step
  /// `step` with its losses to a safetensors file, for reference checks.
  void dump(const std::string &path, int64_t step, const StepLosses &losses,
            double mtpObjective, const StepBatch &batch);

private:
  /// The stages' parameters and moments on the ranks that write (empty
  /// elsewhere), three buffers a stage; the first non-finite parameter
  /// is reported in `error`.
  std::vector<std::vector<float>> gatherState(int64_t step, std::string &error);
  /// Tensor parallelism: tp rank 0 of the writing replica gathers its
  /// group's buffers (`perStage` a stage in `host`: parameters and moments,
  /// or parameters and gradients) and lays each parameter's whole tensor
  /// out in them (in the stage's parameter order, `at` each one's offset);
  /// the other ranks' `host` ends empty.
  void gatherShards(std::vector<std::vector<float>> &host,
                    std::vector<std::vector<int64_t>> &at, size_t perStage);
  /// Writes this rank's file (replica 0 of each pipeline rank); returns
  /// "FILE BYTES CHECKSUM", or sets `error`.
  std::string writeFile(const std::string &dir,
                        const std::vector<std::vector<float>> &host,
                        const std::vector<std::vector<int64_t>> &at,
                        const CheckpointInfo &info, std::string &error);
  /// Rank 0: the index over every writer's file, and `latest`.
  void writeIndex(const std::string &root, const std::string &name,
                  const CheckpointInfo &info,
                  const std::vector<std::string> &writtenByRank,
                  std::string &error);
  int64_t readState(const std::string &path, TrainingConfig &saved);
  /// Parameter `p`'s tensor `name` from `ckpt`: this rank's shard of the
  /// whole tensor the checkpoint holds, into `dst` (p.numel floats).
  void readShard(CheckpointReader &ckpt, const std::string &name,
                 const ParamEntry &p, float *dst) const;

  const Artifact &artifact;
  std::vector<Stage> &stages;
  AdamWOptimizer &optimizer;
  Transport &transport;
  Comm &comm;
};

} // namespace hypipe::rt

#endif
