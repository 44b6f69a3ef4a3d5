//===- Buffers.cpp - the per-microbatch buffers a rank holds at its peak --===//

#include "core/schedule/Buffers.h"
#include "core/Saturating.h"

#include <algorithm>

namespace hypipe::schedule {

RankBuffers rankBuffers(const std::vector<Action> &program, int64_t numStages) {
  RankBuffers peaks;
  std::map<int64_t, int64_t> slots;
  int64_t out = 0;
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
  double params = 0, floats = 0;
  for (const StageBuffers &s : stages) {
    auto slots = walked.savedSlots.find(s.stage);
    params += double(s.params);
    floats += double(s.workspaceFloats) +
              double(slots == walked.savedSlots.end() ? 0 : slots->second) *
                  double(s.savedFloats);
  }
  floats += double(walked.activationBuffers) * double(activationFloats);
  return saturatingCeil(params * bytesPerParameter + 4.0 * floats);
}

} // namespace hypipe::schedule
