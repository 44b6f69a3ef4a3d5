//===- Vocabulary.h - the words compiler and runtime share ----------------===//
//
// Schedule kinds, action kinds and their text, and which rank and chunk run
// each stage: the names of torch.distributed.pipelining (`_ComputationType`,
// `_Action`, `generate_stage_to_rank_mapping(style="loop"|"v")`) and of
// Megatron-LM, defined once. The compiler's passes, the `pipe` dialect's
// verifiers, the artifact schema, the runtime's interpreter and the CLI all
// use these; none spells them again. LLVM-free.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_SCHEDULE_VOCABULARY_H
#define HYPIPE_CORE_SCHEDULE_VOCABULARY_H

#include "core/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hypipe::schedule {

//===----------------------------------------------------------------------===//
// Schedule kinds
//===----------------------------------------------------------------------===//

enum class ScheduleKind : uint8_t {
  GPipe,
  OneFOneB,
  Interleaved1F1B,
  ZbH1,
  ZbV,
  DualPipeV
};

/// The spelling users write (`parallel.schedule`, `--schedule`).
const char *scheduleName(ScheduleKind kind);
/// The known schedule names, in the order docs/schedules.md presents them.
const std::vector<std::string> &scheduleNames();
/// The schedules themselves, in that order.
const std::vector<ScheduleKind> &scheduleKinds();
/// `gpipe` -> GPipe, ...; nullopt for an unknown name.
std::optional<ScheduleKind> parseScheduleKind(std::string_view name);
/// "gpipe, 1f1b, interleaved-1f1b, zb-h1, zbv, dualpipev": for error messages.
std::string scheduleNameList();

//===----------------------------------------------------------------------===//
// Actions
//===----------------------------------------------------------------------===//

/// PyTorch's `_ComputationType` subset hypipe runs: forward, full backward,
/// input-gradient and weight-gradient halves of a split backward, the four
/// point-to-point transfers, and three actions on a whole stage: FSDP's
/// `UNSHARD` and `RESHARD` (no-ops here: parameters are never sharded over
/// the pipeline's data-parallel replicas) and `REDUCE_GRAD` (where the
/// stage's data-parallel gradient reduction starts).
enum class Op : uint8_t {
  F,
  B,
  I,
  W,
  SendF,
  RecvF,
  SendB,
  RecvB,
  Unshard,
  Reshard,
  ReduceGrad
};

/// `F`, `B`, `I`, `W`, `SEND_F`, `RECV_F`, `SEND_B`, `RECV_B`, `UNSHARD`,
/// `RESHARD`, `REDUCE_GRAD`.
const char *opName(Op op);
/// The Chrome-trace category of an action, the same in the simulator's and
/// the runtime's traces (core/schedule/Trace.h): its opName.
inline const char *traceCategory(Op op) { return opName(op); }
/// The category of the time a compute action waits for the receive it
/// reads (runtime traces: `wait <action>` spans).
inline constexpr const char *kWaitCategory = "WAIT";
/// Runtime traces only: a rank's data-parallel gradient reduction (from its
/// first bucket's start until it saw the last one done, beside the actions)
/// and its optimizer step.
inline constexpr const char *kDpReductionCategory = "DP_REDUCTION";
inline constexpr const char *kOptimizerCategory = "OPTIMIZER";
/// The inverse of `opName`; nullopt for anything else.
std::optional<Op> parseOpName(std::string_view name);
bool isCompute(Op op);
bool isSend(Op op);
bool isRecv(Op op);
/// A send or a receive.
bool isTransfer(Op op);
/// An action on a whole stage, with no microbatch (`UNSHARD`, `RESHARD`,
/// `REDUCE_GRAD`): its text is `<stage><op>`, e.g. `0REDUCE_GRAD`.
bool isStageAction(Op op);
/// Whether the op moves gradients (travels towards stage 0).
bool isBackwardTransfer(Op op);

struct Action {
  Op op;
  int32_t stage;
  int32_t microbatch; ///< 0 for a stage action
  int32_t peer = -1;  ///< the other rank, for communication actions
  /// A send fused with the receive that follows it into one exchange with the
  /// same peer (Megatron's send_forward_recv_backward and friends).
  bool batched = false;

  bool operator==(const Action &o) const {
    return op == o.op && stage == o.stage && microbatch == o.microbatch &&
           peer == o.peer;
  }
};

//===----------------------------------------------------------------------===//
// Stage-to-rank mapping
//===----------------------------------------------------------------------===//

/// PyTorch's `generate_stage_to_rank_mapping` styles.
enum class Placement : uint8_t {
  Loop, ///< stage s on rank s % pp, chunk s / pp (Megatron's interleaving)
  V,    ///< vpp = 2: rank r runs stages r and 2*pp-1-r (ZB-V, DualPipeV)
};

/// The placement a schedule runs on: zbv's and dualpipev's V, the loop for
/// every other one.
Placement placementOf(ScheduleKind kind);
const char *placementName(Placement placement); ///< "loop" or "v"

int64_t rankOfStage(Placement placement, int64_t pp, int64_t stage);
int64_t chunkOfStage(Placement placement, int64_t pp, int64_t stage);
int64_t stageOfChunk(Placement placement, int64_t pp, int64_t rank,
                     int64_t chunk);

//===----------------------------------------------------------------------===//
// Action text
//===----------------------------------------------------------------------===//

/// PyTorch pipelining's text of an action: `2F0`, `1SEND_F3`, `3W1`,
/// `0REDUCE_GRAD`.
std::string pytorchText(const Action &action);

/// The shape an action's text is read against: it gives the range of stages
/// and microbatches and the peer of a communication action.
struct ActionContext {
  int64_t pp = 1, vpp = 1, microbatches = 1;
  Placement placement = Placement::Loop;
  int64_t numStages() const { return pp * vpp; }
};

/// The inverse of `pytorchText`: parses `<stage><op><microbatch>` (or
/// `<stage><op>` for a stage action); the peer of a communication action is
/// the rank of the neighbouring stage it talks to.
Expected<Action> parsePytorchAction(std::string_view text,
                                    const ActionContext &context);

/// Megatron's notation of a compute action: `F3.1` is the forward of
/// microbatch 3 on chunk 1 of its rank; a stage action is `REDUCE_GRAD.1`.
std::string megatronText(const Action &action, Placement placement, int64_t pp);

} // namespace hypipe::schedule

#endif
