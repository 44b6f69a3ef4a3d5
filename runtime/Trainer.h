//===- Trainer.h - run one rank's schedule program, step after step
//--------===//
//
// Interprets the rank's program (F, B, I, W on its stages, in the verified
// order), accumulates gradients over the microbatches, reduces tied
// embedding gradients, clips by the global norm and steps AdamW with fp32
// state under warm-up + cosine learning-rate decay.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_TRAINER_H
#define HYPIPE_RUNTIME_TRAINER_H

#include "runtime/Artifact.h"
#include "runtime/Data.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace hypipe::rt {

struct StepStats {
  int64_t step = 0;
  double loss = 0, auxLoss = 0, lr = 0, gradNorm = 0;
  double seconds = 0, tokensPerSecond = 0;
};

/// Learning rate of step `step` (1-based): linear warm-up from 0, then
/// cosine decay to min_lr at the last step (Megatron's schedule).
double learningRate(const TrainingConfig &config, int64_t step);

class Trainer {
public:
  /// Loads `ppRank`'s stage libraries and initialises its parameters.
  Trainer(Artifact &artifact, int64_t ppRank, const TextDataset &data);

  /// Runs training step `step` (1-based). With `dumpPath`, writes the
  /// parameters before the update, the gradients and the batch to a
  /// safetensors file (for reference checks) before clipping.
  StepStats step(int64_t step, const std::string &dumpPath = "");

private:
  struct StageState {
    StageEntry *entry;
    std::vector<float> params, grads, adamM, adamV, workspace;
    std::vector<std::vector<float>> slots;
    std::vector<int> freeSlots;
  };

  void runProgram(int64_t step, double &loss, double &aux);
  void reduceTiedGradients();
  double gradNorm() const;
  void optimizerStep(int64_t step, double lr, double clipScale);
  void dump(const std::string &path, double loss, double aux);

  Artifact &artifact;
  int64_t ppRank;
  const TextDataset &data;
  std::vector<StageState> stages;      ///< this rank's, by vp_stage
  std::vector<int32_t> tokens, labels; ///< [microbatches][batch * seq]
  /// Parameters that appear in more than one local stage (tied embedding):
  /// (stage, offset) of each copy, by name.
  std::map<std::string, std::vector<std::pair<size_t, int64_t>>> copies;
};

} // namespace hypipe::rt

#endif
