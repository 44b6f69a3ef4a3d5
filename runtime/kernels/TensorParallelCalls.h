//===- TensorParallelCalls.h - a kernel call's tensor-parallel collectives ===//
//
// A layer split over tensor-parallel ranks (core/model/TensorParallel.h)
// joins its partial results with collectives between its GEMMs. The
// trainer hands the stage its group (TensorParallelGroup, over the run's
// transport); the interpreter gives each kernel call a TensorParallelCalls
// with the collectives its program lists for that call, and the layer's
// recipe runs each through it in order: one the program does not list next
// is an error, as is one it lists and the recipe leaves out, so the program
// the compiler wrote is what runs.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_TENSORPARALLELCALLS_H
#define HYPIPE_RUNTIME_KERNELS_TENSORPARALLELCALLS_H

#include "core/model/TensorParallel.h"
#include "runtime/formats/RuntimeError.h"

#include <cstdint>
#include <string>
#include <vector>

namespace hypipe::rt {

/// This rank's tensor-parallel group, as a stage's kernels see it.
class TensorParallelGroup {
public:
  virtual ~TensorParallelGroup() = default;
  virtual int64_t size() const = 0;
  virtual int64_t rank() const = 0;
  /// Runs `kind` over `count` floats of device memory in place (the whole
  /// tensor: TensorParallel.h's conventions), complete for the kernels
  /// queued after it when it returns.
  virtual void run(CollectiveKind kind, float *data, int64_t count) = 0;
  /// An all-to-all of device memory: `sendCounts[p]` floats from `send` to
  /// rank p, `recvCounts[p]` from p into `recv` (blocks one after another
  /// in rank order), complete as run's.
  virtual void allToAll(const float *send,
                        const std::vector<int64_t> &sendCounts, float *recv,
                        const std::vector<int64_t> &recvCounts) = 0;
};

inline std::string collectiveText(const Collective &c) {
  return std::string(collectiveKindName(c.kind)) + ":" +
         std::to_string(c.perToken);
}

class TensorParallelCalls {
public:
  /// `listed`: the call's collectives in its program; `tokens` the call's;
  /// `layer` and `pass` name the call in errors.
  TensorParallelCalls(TensorParallelGroup &group,
                      const std::vector<Collective> &listed, int64_t tokens,
                      bool sequenceParallel, int32_t layer, const char *pass)
      : group(group), listed(listed), tokens(tokens),
        sequence(sequenceParallel), layer(layer), pass(pass) {}

  int64_t size() const { return group.size(); }
  int64_t rank() const { return group.rank(); }
  /// Megatron-LM's sequence parallelism: the layer's input and output hold
  /// this rank's tp-th of the call's tokens.
  bool sequenceParallel() const { return sequence; }

  /// Collective `kind` of the call's [tokens, perToken] tensor at `data`.
  void run(CollectiveKind kind, float *data, int64_t perToken) {
    expect({kind, perToken});
    group.run(kind, data, tokens * perToken);
  }

  /// The all-to-all its program lists next, of rows of `perRow` floats:
  /// `sendRows[p]` rows from `send` to rank p, `recvRows[p]` from p into
  /// `recv` (TensorParallelGroup::allToAll's blocks).
  void allToAll(const float *send, const std::vector<int64_t> &sendRows,
                float *recv, const std::vector<int64_t> &recvRows,
                int64_t perRow) {
    expect({CollectiveKind::AllToAll, perRow});
    std::vector<int64_t> out(sendRows), in(recvRows);
    for (int64_t &n : out)
      n *= perRow;
    for (int64_t &n : in)
      n *= perRow;
    group.allToAll(send, out, recv, in);
  }

  /// Throws unless every listed collective ran.
  void finish() const {
    if (next != listed.size())
      throw RuntimeError("error: " + callText() +
                         " left out the tensor-parallel "
                         "collective " +
                         collectiveText(listed[next]) +
                         " its program lists\nhelp: the artifact was compiled "
                         "by another hypipe; recompile it");
  }

private:
  /// Takes `c` off the program's list; throws unless it is next there.
  void expect(const Collective &c) {
    if (next >= listed.size() || !(listed[next] == c))
      throw RuntimeError(
          "error: " + callText() + " runs the tensor-parallel collective " +
          collectiveText(c) + " where its program lists " +
          (next < listed.size() ? collectiveText(listed[next]) : "none") +
          "\nhelp: the artifact was compiled by another hypipe; recompile it");
    ++next;
  }

  std::string callText() const {
    return "layer " + std::to_string(layer) + "'s " + pass + " call";
  }

  TensorParallelGroup &group;
  const std::vector<Collective> &listed;
  int64_t tokens;
  bool sequence;
  int32_t layer;
  const char *pass;
  size_t next = 0;
};

/// What a recipe calls: collective `kind` of its [tokens, perToken] tensor
/// when the layer is split (tp non-null), nothing otherwise.
inline void tensorParallel(TensorParallelCalls *tp, CollectiveKind kind,
                           float *data, int64_t perToken) {
  if (tp)
    tp->run(kind, data, perToken);
}

} // namespace hypipe::rt

#endif
