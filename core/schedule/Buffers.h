//===- Buffers.h - the per-microbatch buffers a rank holds at its peak ----===//
//
// hypipe-run's trainer keeps, on each pipeline rank, a saved-tensor slot
// per microbatch of a stage from its F to its B or W (slots are per stage,
// reused by the stage's later microbatches), and takes activation-sized
// buffers from one pool: a stage's output until the next stage reads it,
// each received activation or gradient until it is read, each input
// gradient a B or I writes until it is read, and every sent one until the
// step ends. With activation recompute a stage also keeps a pool of
// recompute buffers (the recomputed layers' saved tensors): a microbatch
// takes one from the start of its I (or B) to the end of its W, and each F
// borrows one for its length. Walking a rank's program with those rules
// gives the most of each it holds at once: with the buffers' sizes, its peak
// tensor memory (runtime/exec/Stage.cpp and Trainer.cpp allocate by these
// rules; the estimate of `hypipe train` and `hypipe plan` is this walk).
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_SCHEDULE_BUFFERS_H
#define HYPIPE_CORE_SCHEDULE_BUFFERS_H

#include "core/schedule/Vocabulary.h"

#include <cstdint>
#include <map>
#include <vector>

namespace hypipe::schedule {

struct RankBuffers {
  /// The most saved slots each stage the program runs holds at once.
  std::map<int64_t, int64_t> savedSlots;
  /// The most recompute buffers each stage's pool holds at once (counted
  /// for every stage; they take memory only where a stage recomputes).
  std::map<int64_t, int64_t> recomputeSlots;
  /// The most activation-sized buffers out of the pool at once.
  int64_t activationBuffers = 0;
};

/// The peaks of one rank's program in a model of `numStages` stages.
RankBuffers rankBuffers(const std::vector<Action> &program, int64_t numStages);

/// One stage's buffers in hypipe-run: its parameters, one microbatch's
/// saved floats, and its workspace floats; with activation recompute, the
/// saved floats are what the forward keeps (the layers not recomputed and
/// each chunk's checkpoint) and one recompute buffer holds the recomputed
/// layers' floats.
struct StageBuffers {
  int64_t stage = 0; ///< its index
  int64_t params = 0, savedFloats = 0, workspaceFloats = 0;
  int64_t recomputeFloats = 0;
  /// A bf16 run's packed saved tensors (runtime/exec/SavedBuffers.h): the
  /// floats of one microbatch's packed slot; the stage then holds one
  /// saved buffer of savedFloats for the open microbatch and a slot for
  /// each other in flight. 0: every microbatch keeps a saved buffer.
  int64_t stashFloats = 0;
  /// The distributed optimizer over an expert grid spread over replicas
  /// (expertShardFloats): the moments' floats beyond those `params` at the
  /// bytes per parameter count, and its scratch (a rank holds its largest
  /// stage's).
  int64_t optimizerFloats = 0, scratchFloats = 0;
  /// A stage with MoE layers: each program layer's router check
  /// (RouterCheck, routerCheckFloats), which the forward sets on a NaN logit.
  int64_t checkFloats = 0;
};

/// The floats a stage's router checks take: none without a MoE layer, else
/// one RouterCheck (an int32 and a float) for each of its `layers` program
/// layers (runtime/exec/Stage.cpp indexes them like the program's layers).
inline int64_t routerCheckFloats(bool hasMoe, int64_t layers) {
  return hasMoe ? 2 * layers : 0;
}

/// Bytes the tensors of a rank holding `stages` take at the peaks `walked`
/// of its program: each stage's parameters at `bytesPerParameter` (with
/// their gradients and optimizer state), its workspace, its most saved
/// slots and recompute buffers, and the pooled buffers of `activationFloats`
/// floats each. The one formula of `hypipe train`'s estimate from a manifest
/// and `hypipe plan`'s from a spec.
int64_t peakTensorBytes(const std::vector<StageBuffers> &stages,
                        const RankBuffers &walked, int64_t activationFloats,
                        double bytesPerParameter);

} // namespace hypipe::schedule

#endif
