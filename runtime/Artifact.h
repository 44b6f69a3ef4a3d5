//===- Artifact.h - load a compiled artifact (runtime side) ---------------===//
//
// Reads manifest.json, checks its format and version, and loads the stage
// libraries one rank needs, checking each against the manifest. No LLVM or
// MLIR here: only nlohmann-json and dlopen.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_ARTIFACT_H
#define HYPIPE_RUNTIME_ARTIFACT_H

#include "runtime/StageABI.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace hypipe::rt {

/// Manifest format version: `hypipe compile` writes it, hypipe-run refuses
/// any other (docs/artifact.md).
inline constexpr int kArtifactVersion = 1;

/// A user-facing runtime error: the message is complete (what, where, what
/// to do); tools print it and exit 1.
struct RuntimeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// An error every rank of the run raises at the same point with the same
/// message (a diverged loss, a failed checkpoint): rank 0 prints it and all
/// ranks exit together instead of aborting one another.
struct CollectiveError : RuntimeError {
  using RuntimeError::RuntimeError;
};

struct ParamEntry {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0, numel = 0;
  std::string init;
  double initA = 0, initB = 0;
  bool weightDecay = false;
};

struct ActionEntry {
  enum Kind { F, B, I, W, SendF, RecvF, SendB, RecvB } kind;
  int32_t stage = 0, mb = 0, peer = -1;
  std::string text;
};

struct StageEntry {
  int64_t index = 0, ppRank = 0, vpStage = 0;
  std::string library;
  bool hasEmbedding = false, hasHead = false;
  int64_t batch = 0, seq = 0, hidden = 0;
  int64_t numParams = 0, savedFloats = 0, workspaceFloats = 0;
  std::vector<ParamEntry> params;
  // Loaded from `library`.
  void *handle = nullptr;
  hypipe_stage_fn forward = nullptr, backwardInput = nullptr,
                  backwardWeight = nullptr;
};

struct TrainingConfig {
  int64_t seqLength = 0, microBatchSize = 0, steps = 0, seed = 0;
  double lr = 0, minLr = 0, weightDecay = 0, gradClip = 0;
  int64_t warmupSteps = 0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
};

struct Artifact {
  std::string dir;
  std::string modelName, pattern, schedule;
  int64_t pp = 1, vpp = 1, dp = 1, microbatches = 1, vocab = 0;
  int64_t numStages = 0;
  TrainingConfig training;
  std::string dataPath, dataFormat;
  std::vector<StageEntry> stages;                 ///< all stages, by index
  std::vector<std::vector<ActionEntry>> programs; ///< per pp rank

  /// Stages of `ppRank`, in vp_stage order.
  std::vector<StageEntry *> stagesOf(int64_t ppRank);
};

/// Reads and checks `dir`/manifest.json. Throws RuntimeError.
Artifact loadArtifact(const std::string &dir);

/// dlopens the libraries of `ppRank`'s stages and checks each library's
/// hypipe_stage_info against the manifest. Throws RuntimeError.
void loadStageLibraries(Artifact &artifact, int64_t ppRank);

} // namespace hypipe::rt

#endif
