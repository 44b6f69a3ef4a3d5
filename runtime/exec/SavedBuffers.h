//===- SavedBuffers.h - a stage's saved tensors between its passes --------===//
//
// What a stage's forward keeps for its backward, per microbatch in flight.
// An fp32 run keeps each microbatch's saved buffer whole (MicrobatchBuffers).
// A bf16 run keeps what Megatron's `--bf16` keeps in two bytes in two bytes
// (SavedStash): the kernels compute in float buffers (the CPU's bf16
// emulation, and the CUDA kernels for now: docs/precision.md), so one
// microbatch's saved tensors are open at a time, in one float buffer of the
// stage's saved size, and the others lie packed -- activations and their
// gradients as bf16 (they are bf16 values, so nothing is lost), statistics
// and indices in four bytes (the program's StashRuns).
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_EXEC_SAVEDBUFFERS_H
#define HYPIPE_RUNTIME_EXEC_SAVEDBUFFERS_H

#include "runtime/formats/StageProgram.h"
#include "runtime/kernels/Target.h"

#include <map>
#include <vector>

namespace hypipe::rt {

/// Per-microbatch buffers of one size, taken by a microbatch and given back
/// for the next one: a stage's saved tensors (F to W) and its recompute
/// buffers (I to W, and one borrowed for the length of each F).
class MicrobatchBuffers {
public:
  MicrobatchBuffers() = default;
  MicrobatchBuffers(Device &device, int64_t floats)
      : device(&device), floats(floats) {}
  /// A buffer for microbatch `mb` (a key: any int64), until release(mb).
  float *take(int64_t mb);
  float *of(int64_t mb) { return buffers.at(size_t(taken.at(mb))).data(); }
  void release(int64_t mb);
  bool holds(int64_t mb) const { return taken.count(mb) != 0; }
  /// Microbatch `from`'s buffer is `to`'s now.
  void handOver(int64_t from, int64_t to);
  bool empty() const { return floats == 0; }

private:
  Device *device = nullptr;
  int64_t floats = 0;
  std::vector<DeviceArray<float>> buffers;
  std::vector<int> free;
  std::map<int64_t, int> taken; ///< by microbatch
};

/// A bf16 stage's saved tensors: the open microbatch's in a float buffer,
/// the others packed (one slot each, of the packed size at the program's
/// token capacity). A microbatch opened by F, then I, then W is packed
/// only when another microbatch opens between them. Opening one from its
/// slot packs the open one in place and exchanges the two packed copies
/// (Device::packSaved, swapBytes), so a stage holds one float buffer and a
/// slot for each microbatch in flight but the open one, never more
/// (schedule::peakTensorBytes counts them so).
class SavedStash {
public:
  SavedStash(Device &device, const StageProgram &program, int64_t floats);
  /// The float buffer holding microbatch `mb`'s saved tensors for a pass
  /// over tokens `t`: F (`fresh`) fills it; I and W find what F left (and
  /// I wrote).
  float *open(int64_t mb, const TokenShape &t, bool fresh);
  /// The microbatch's W ran (or an F without a backward): its tensors are
  /// dropped.
  void release(int64_t mb);
  /// Bytes of one packed slot.
  int64_t slotBytes() const { return slotFloats * 4; }

private:
  Device &device;
  const StageProgram &program;
  DeviceArray<float> openBuffer;
  int64_t slotFloats;
  MicrobatchBuffers slots;
  /// The microbatch whose tensors are in openBuffer, if any.
  bool anyOpen = false;
  int64_t openMb = 0;
  /// Each microbatch in flight's runs (they follow its tokens).
  std::map<int64_t, std::vector<StashRun>> runs;
};

} // namespace hypipe::rt

#endif
