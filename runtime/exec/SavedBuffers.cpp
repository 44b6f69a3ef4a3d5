//===- SavedBuffers.cpp - a stage's saved tensors between its passes ------===//

#include "runtime/exec/SavedBuffers.h"

#include "runtime/formats/RuntimeError.h"

#include <fmt/format.h>

#include <algorithm>

namespace hypipe::rt {

float *MicrobatchBuffers::take(int64_t mb) {
  int slot;
  if (free.empty()) {
    slot = int(buffers.size());
    buffers.emplace_back(*device, floats);
  } else {
    slot = free.back();
    free.pop_back();
  }
  taken[mb] = slot;
  return buffers[size_t(slot)].data();
}

void MicrobatchBuffers::release(int64_t mb) {
  free.push_back(taken.at(mb));
  taken.erase(mb);
}

void MicrobatchBuffers::handOver(int64_t from, int64_t to) {
  const int slot = taken.at(from);
  taken.erase(from);
  taken[to] = slot;
}

SavedStash::SavedStash(Device &device, const StageProgram &program,
                       int64_t floats)
    : device(device), program(program), openBuffer(device, floats),
      slotFloats(stashSlotBytes(program) / 4), slots(device, slotFloats) {}

float *SavedStash::open(int64_t mb, const TokenShape &t, bool fresh) {
  if (anyOpen && openMb == mb && !fresh)
    return openBuffer.data();
  float *open = openBuffer.data();
  auto packedBytes = [&](int64_t m) { return stashBytes(runs.at(m)); };
  // The open microbatch, packed in place at the buffer's front: to a slot
  // of its own, or (below) into the slot of the one that opens.
  if (anyOpen)
    device.packSaved(open, runs.at(openMb));
  if (fresh) {
    if (anyOpen)
      device.copy(slots.take(openMb), open, packedBytes(openMb));
    std::vector<StashRun> &r = runs[mb] = stashRuns(program, t);
    if (stashBytes(r) > slotBytes())
      throw RuntimeError(fmt::format(
          "error: a microbatch of {} tokens saves {} packed bytes, more than "
          "the {} of the program's capacity\nhelp: this is a bug in hypipe; "
          "please report it",
          t.tokens(), stashBytes(r), slotBytes()));
  } else if (anyOpen) {
    device.swapBytes(open, slots.of(mb),
                     std::max(packedBytes(openMb), packedBytes(mb)));
    slots.handOver(mb, openMb);
    device.unpackSaved(open, runs.at(mb));
  } else {
    device.copy(open, slots.of(mb), packedBytes(mb));
    slots.release(mb);
    device.unpackSaved(open, runs.at(mb));
  }
  anyOpen = true;
  openMb = mb;
  return open;
}

void SavedStash::release(int64_t mb) {
  if (anyOpen && openMb == mb)
    anyOpen = false;
  else if (slots.holds(mb))
    slots.release(mb);
  runs.erase(mb);
}

} // namespace hypipe::rt
