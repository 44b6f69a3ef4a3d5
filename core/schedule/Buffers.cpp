//===- Buffers.cpp - the per-microbatch buffers a rank holds at its peak --===//

#include "core/schedule/Buffers.h"
#include "core/Saturating.h"

#include <algorithm>

namespace hypipe::schedule {

RankBuffers rankBuffers(const std::vector<Action> &program, int64_t numStages) {
  RankBuffers peaks;
  std::map<int64_t, int64_t> slots, recompute;
  int64_t out = 0;
  // A recompute buffer: `held` of the stage's are taken, and one more now.
  auto needRecompute = [&](int64_t stage, int64_t held) {
    int64_t &peak = peaks.recomputeSlots[stage];
    peak = std::max(peak, held);
  };
  auto take = [&] {
    ++out;
    peaks.activationBuffers = std::max(peaks.activationBuffers, out);
  };
  const int64_t last = numStages - 1;
  for (const Action &a : program) {
    switch (a.op) {
    case Op::RecvF:
    case Op::RecvB:
      take();
      break;
    case Op::F: {
      int64_t &peak = peaks.savedSlots[a.stage];
      peak = std::max(peak, ++slots[a.stage]);
      needRecompute(a.stage, recompute[a.stage] + 1); // borrowed for the F
      if (a.stage != last)
        take(); // the output
      if (a.stage != 0)
        --out; // the input, read
      break;
    }
    case Op::B:
    case Op::I:
    case Op::W:
      if (a.op != Op::W) {
        if (a.stage != 0)
          take(); // the input gradient
        if (a.stage != last)
          --out; // the output's gradient, read
      }
      if (a.op != Op::I)
        --slots[a.stage];
      // Taken at the start of I or B, given back at the end of W or B.
      if (a.op == Op::I)
        needRecompute(a.stage, ++recompute[a.stage]);
      else if (a.op == Op::W)
        --recompute[a.stage];
      else
        needRecompute(a.stage, recompute[a.stage] + 1);
      break;
    default:
      // A send keeps its buffer out until the step ends, past the peak.
      break;
    }
  }
  return peaks;
}

int64_t peakTensorBytes(const std::vector<StageBuffers> &stages,
                        const RankBuffers &walked, int64_t activationFloats,
                        double bytesPerParameter) {
  double params = 0, floats = 0, scratch = 0;
  for (const StageBuffers &s : stages) {
    scratch = std::max(scratch, double(s.scratchFloats));
    floats += double(s.optimizerFloats);
    auto most = [&](const std::map<int64_t, int64_t> &slots) {
      auto it = slots.find(s.stage);
      return double(it == slots.end() ? 0 : it->second);
    };
    params += double(s.params);
    // Packed: the open microbatch's tensors whole, the others packed (the
    // most in flight comes right after an F, which leaves its own open).
    const double saved = s.stashFloats > 0
                             ? double(s.savedFloats) +
                                   std::max(most(walked.savedSlots) - 1, 0.0) *
                                       double(s.stashFloats)
                             : most(walked.savedSlots) * double(s.savedFloats);
    floats += double(s.workspaceFloats) + double(s.checkFloats) + saved +
              most(walked.recomputeSlots) * double(s.recomputeFloats);
  }
  floats +=
      scratch + double(walked.activationBuffers) * double(activationFloats);
  return saturatingCeil(params * bytesPerParameter + 4.0 * floats);
}

} // namespace hypipe::schedule
