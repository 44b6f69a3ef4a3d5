//===- StageProgram.h - a stage's kernel program, as data -----------------===//
//
// What `hypipe compile` lowers a pipeline stage to and the manifest carries
// (docs/artifact.md, "kernel program"): the stage's layers, each with its
// kernel, static shape and typed ranges of the stage's parameter and saved
// buffers, and three lists of kernel calls -- forward, input-gradient and
// weight-gradient -- each naming the layer it runs and the activation slots
// it reads and writes. `hypipe-run` executes it over the target's kernels
// (StageInterpreter.h); nothing is generated or compiled per stage.
//
// Every range is in bytes and has a dtype; fp32 is the only dtype the
// kernels take today, so checkStageProgram refuses any other until the
// bf16 kernels exist. LLVM-free: the compiler builds these, the runtime
// reads and checks them.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_FORMATS_STAGEPROGRAM_H
#define HYPIPE_RUNTIME_FORMATS_STAGEPROGRAM_H

#include "core/model/LayerShapes.h"
#include "core/model/Precision.h"
#include "core/model/TensorParallel.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace hypipe::rt {

enum class DType : uint8_t { F32, BF16 };

const char *dtypeName(DType dtype);
std::optional<DType> parseDType(std::string_view name);
int64_t dtypeBytes(DType dtype);

/// The dtype a model trained in `precision` keeps its activations and
/// transfers in.
inline DType activationDType(TrainingPrecision precision) {
  return precision == TrainingPrecision::Bf16 ? DType::BF16 : DType::F32;
}

/// A tensor as a range of one of the stage's buffers.
struct TensorRange {
  int64_t offset = 0; ///< bytes from the buffer's start
  int64_t bytes = 0;
  DType dtype = DType::F32;
  int64_t end() const { return offset + bytes; }
  bool empty() const { return bytes == 0; }
  /// Elements of `dtype` from the buffer's start to `offset`.
  int64_t elementOffset() const { return offset / dtypeBytes(dtype); }
  bool operator==(const TensorRange &o) const {
    return offset == o.offset && bytes == o.bytes && dtype == o.dtype;
  }
};

/// The inverse of layerKindName (LayerShapes.h); nullopt for anything else.
std::optional<LayerKind> parseLayerKind(std::string_view name);

struct ProgramLayer {
  LayerKind kind = LayerKind::Mlp;
  int64_t layer = 0; ///< 1-based layer number (0: embedding and head)
  LayerShape shape;
  TensorRange params, saved;
  /// Activation recompute: `saved` is a range of the recompute buffer, and
  /// the input-gradient pass runs the layer's forward again first.
  bool recomputed = false;
  /// Selective recompute: the modules whose tensors lie in `again`, a range
  /// of the recompute buffer, instead of `saved` (BufferLayouts.h); the
  /// input-gradient pass computes them again first. 0: none.
  RecomputeModuleSet modules = 0;
  TensorRange again;
  /// What its kernels run and its ranges hold: `shape` split over the
  /// program's tensor-parallel ranks (equal to it at tp 1; shardLayers).
  LayerShape shard;
};

/// Where a call reads or writes an activation (or its gradient): the
/// stage's input and output, the gradients of those, one of the two
/// workspace buffers the stage ping-pongs between layers, or one of the two
/// a recomputed forward ping-pongs between.
enum class Slot : uint8_t {
  None,
  Input,
  Output,
  GradOutput,
  GradInput,
  Act0,
  Act1,
  Rc0,
  Rc1
};

const char *slotName(Slot slot);
std::optional<Slot> parseSlot(std::string_view name);

/// What a KernelCall does.
enum class CallOp : uint8_t {
  Run,       ///< layer `layer`'s kernel of the pass, `in` to `out`; with
             ///< `layer` -1 a copy of `in` to `out` (a stage whose last
             ///< layer does not write the output itself)
  Save,      ///< forward: `in` into `range` of the saved buffer
  Load,      ///< input gradient: `range` of the saved buffer into `out`
  Recompute, ///< input gradient: layer `layer`'s forward again, `in` to
             ///< `out`, adding nothing to the losses
};

const char *callOpName(CallOp op);
std::optional<CallOp> parseCallOp(std::string_view name);

/// One step of a pass: a kernel call of layer `layer` of the stage,
/// reading `in` and writing `out`, or a copy, save, load or recompute.
struct KernelCall {
  int32_t layer = -1;
  Slot in = Slot::None, out = Slot::None;
  CallOp op = CallOp::Run;
  TensorRange range; ///< Save and Load: the checkpoint
  /// A layer split over tensor-parallel ranks: the collectives its kernels
  /// run in this call, in order (core/model/TensorParallel.h).
  std::vector<Collective> collectives;
  bool operator==(const KernelCall &o) const {
    return layer == o.layer && in == o.in && out == o.out && op == o.op &&
           range == o.range && collectives == o.collectives;
  }
};

struct StageProgram {
  Target target = Target::Cpu;
  /// What the kernels keep activations, their gradients and the parameter
  /// copies they compute with in (the artifact's precision): F32, or BF16
  /// -- on the cpu target emulated in the same float buffers, each such
  /// tensor rounded to bfloat16 once complete (docs/precision.md).
  DType activations = DType::F32;
  TokenShape tokens; ///< the microbatch capacity the shapes are planned for
  int64_t hidden = 0;
  /// Tensor parallelism: the stage's layers split over `tensorParallel`
  /// ranks; each layer's `shape` is then its shard's (what the kernels run
  /// and the buffers hold: TensorParallel.h), the manifest and the IR
  /// keeping the whole layer's.
  int64_t tensorParallel = 1;
  bool sequenceParallel = false;
  std::vector<ProgramLayer> layers;
  std::vector<KernelCall> forward, backwardInput, backwardWeight;
  /// Buffer sizes in bytes: parameters (and their gradients), the saved
  /// tensors of one microbatch, and the workspace shared by all of them.
  int64_t paramBytes = 0, savedBytes = 0, workspaceBytes = 0;
  /// In the workspace: the two activation slots and the layers' scratch.
  TensorRange act0, act1, scratch;
  /// Activation recompute: the recompute buffer's bytes per microbatch (0:
  /// no layer is recomputed) and the recomputed forward's two slots.
  int64_t recomputeBytes = 0;
  TensorRange rc0, rc1;
  /// Multi-token prediction: where the model's output layer and embedding
  /// table sit in this stage's parameters (empty: no MTP depth here).
  TensorRange sharedOutput, sharedTable;
};

/// Sets every layer's `shard` from its shape and the program's
/// tensorParallel; "" or why a layer cannot split so (its shape's
/// divisibility: core/model/TensorParallel.h).
std::string shardLayers(StageProgram &program);

/// The collectives a call of `layer` lists in pass `pass` of a program
/// split over `tp` ranks: its kind's (collectivesOf) for a run, the
/// forward's for a full recompute, a selective one's (the normed input
/// gathered again with sequence parallelism).
std::vector<Collective> collectivesOfCall(const ProgramLayer &layer, CallOp op,
                                          StagePass pass, int64_t tp,
                                          bool sequenceParallel);

/// Bytes of one [tokens, hidden] activation of `program`.
int64_t activationBytes(const StageProgram &program);

/// A run of a stage's saved buffer as a bf16 run keeps it between the
/// passes that read it (runtime/exec/SavedBuffers.h): `floats` floats at
/// float `offset`, stored two bytes each when `bf16` (activations and their
/// gradients, bf16 values already) and four otherwise, at byte `at` of the
/// packed copy (every run 4-byte aligned there).
struct StashRun {
  int64_t offset = 0, floats = 0, at = 0;
  bool bf16 = false;
};

/// The runs of `program`'s saved buffer that a microbatch of `t` fills:
/// the tensors its kept layers' layouts cut (savedSpansOf) and the inputs
/// its forward saves for a full recompute, in order, neighbours of a kind
/// joined; activations are bf16 when the program's are.
std::vector<StashRun> stashRuns(const StageProgram &program,
                                const TokenShape &t);
/// Bytes of the packed copy of `runs`.
int64_t stashBytes(const std::vector<StashRun> &runs);
/// Bytes of the packed copy of a microbatch at the program's token
/// capacity: a SavedStash slot.
int64_t stashSlotBytes(const StageProgram &program);

/// Checks `program` before anything runs it (the manifest is read from a
/// file another process wrote): known layers with bounded shapes, every
/// layer's parameter and saved ranges exactly the sizes its shape gives and
/// inside the stage's buffers, fp32 everywhere, the activation slots and
/// scratch inside the workspace and large enough, every call naming an
/// existing layer and slots that pass takes, forward calls chained from the
/// input to the output. Returns an empty string, or what is wrong.
std::string checkStageProgram(const StageProgram &program, bool hasEmbedding,
                              bool hasHead);

} // namespace hypipe::rt

#endif
