//===- Schedule.h - pipeline schedules as data ----------------------------===//
//
// A schedule is, per rank, an ordered list of actions. Compute actions are
// `F` (forward), `B` (full backward), or `I` and `W` (backward split into the
// input gradient and the weight gradient, for zero-bubble schedules) of one
// microbatch on one stage; communication actions are `SEND_F`, `RECV_F`,
// `SEND_B`, `RECV_B` with the peer rank. Stages are numbered globally
// (0..pp*vpp-1); a rank holds `vpp` of them (its chunks).
//
// This is a pure library: `(schedule kind, pp, vpp, microbatches, options)`
// to action lists, communication insertion, and the simulator that verifies
// and times a program (Simulate.h). The CLI, the passes and the runtime call
// it. See docs/schedules.md.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_SCHEDULE_SCHEDULE_H
#define HYPIPE_CORE_SCHEDULE_SCHEDULE_H

#include "core/Error.h"
#include "core/schedule/Vocabulary.h"

#include <optional>
#include <string_view>

#include <cstdint>
#include <string>
#include <vector>

namespace hypipe::schedule {

struct Schedule {
  std::string name;
  int64_t pp = 1;
  int64_t vpp = 1;
  int64_t microbatches = 1;
  Placement placement = Placement::Loop;
  std::vector<std::vector<Action>> ranks; ///< one program per rank
  /// Forwards only (evaluation, forwardOnlySchedule): no microbatch runs a
  /// backward, and the simulator requires none.
  bool forwardOnly = false;

  int64_t numStages() const { return pp * vpp; }
  int64_t rankOf(int64_t stage) const;
  int64_t chunkOf(int64_t stage) const;
  int64_t stageOf(int64_t rank, int64_t chunk) const;
  bool splitBackward() const;
  /// Megatron's notation of a compute action: `F3.1` is the forward of
  /// microbatch 3 on chunk 1 of its rank.
  std::string megatronText(const Action &action) const;
  /// What an action's text of this schedule is read against.
  ActionContext actionContext() const {
    return {pp, vpp, microbatches, placement};
  }
};

struct ScheduleRequest {
  /// What checking and building dispatch on (parsed once, where the name
  /// was read: the spec, the manifest, `--schedule`, the IR).
  ScheduleKind kind = ScheduleKind::OneFOneB;
  int64_t pp = 1;
  int64_t vpp = 1;
  int64_t microbatches = 1;
  /// microbatch_group_size_per_vp_stage (interleaved-1f1b); absent: pp,
  /// Megatron's default. A given value, 0 included, is checked as given.
  std::optional<int64_t> groupSize;
};

/// Whether schedule `kind` runs `vpp` stages per rank (1f1b and zb-h1 one,
/// zbv two in a V, interleaved-1f1b more than one, gpipe any): the one
/// statement of these rules, with a help line.
Error checkScheduleShape(ScheduleKind kind, int64_t vpp);

/// pp, vpp and microbatches of at least 1 whose stage-microbatches fit
/// the bound every schedule (generated or imported) is held to.
Error checkScheduleSize(int64_t pp, int64_t vpp, int64_t microbatches);

/// Megatron's rule for interleaved-1f1b's microbatch_group_size_per_vp_stage:
/// between pp and microbatches, leaving a last group of 0 or at least pp
/// microbatches. Checked by `checkSchedule`; exposed so a spec can point at
/// the field.
Error checkGroupSize(int64_t pp, int64_t microbatches, int64_t groupSize);

/// Whether `buildSchedule(request)` would succeed, without building it.
/// Refused configurations (Megatron's among them) are errors that name the
/// constraint and values that work.
Error checkSchedule(const ScheduleRequest &request);

/// The compute-only programs of a schedule; refuses what `checkSchedule`
/// refuses.
Expected<Schedule> buildSchedule(const ScheduleRequest &request);

/// Adds the sends and receives every cross-rank dependency needs: a stage's
/// activations are sent right after its forward and received right before the
/// next stage's forward on the peer; gradients likewise backwards. A send
/// followed directly by a receive from the same peer is marked `batched`.
/// Same-rank boundaries are local hand-offs and get nothing; stage actions
/// (REDUCE_GRAD, UNSHARD, RESHARD) stay where they stand. Programs that
/// already send or receive (an imported CSV with its communication) are
/// left as written.
void insertCommunication(Schedule &schedule);

/// The forward-only programs of a training schedule, what evaluation runs
/// (Megatron's forward_only=True through the same pipeline schedule): each
/// rank's forwards in the order `training` runs them, every other compute,
/// stage and transfer action dropped; `insertCommunication` then gives them
/// their sends and receives. Forwards wait only on forwards, so a schedule
/// that verifies keeps a forward order that does.
Schedule forwardOnlySchedule(const Schedule &training);

/// Reorders each program's receives from a peer into the order that peer
/// sends them, for transports that match messages by their order on a link
/// rather than by tag (NCCL: runtime/comm/Transport.h). Where a program
/// receives a tensor, it first receives, in the peer's order, what the
/// peer sends before it and the program has not received yet: no receive
/// is posted later than written, some earlier (their buffers held a little
/// longer). Programs that receive in send order are left as they are.
void receiveInSendOrder(std::vector<std::vector<Action>> &programs);

/// Whether any program of `schedule` sends or receives (an imported program
/// with its communication written out, or one `insertCommunication` made).
bool hasTransfers(const Schedule &schedule);

/// Megatron's warm-up count of `ppRank` (the vectors' `num_warmup`), for the
/// 1f1b and interleaved-1f1b generators; exposed for tests and docs.
int64_t megatronWarmup(int64_t pp, int64_t vpp, int64_t microbatches,
                       int64_t groupSize, int64_t ppRank, bool interleaved);

/// Megatron's get_schedule_table: the (microbatch, chunk) order in which an
/// interleaved rank runs its forwards — groups of `groupSize` microbatches,
/// each group through every chunk before the next.
std::vector<std::pair<int64_t, int64_t>>
interleavedTable(int64_t microbatches, int64_t vpp, int64_t groupSize);

/// PyTorch pipelining's CSV text of a schedule: one row per rank, one action
/// per cell.
std::string toCsv(const Schedule &schedule);
/// Reads that CSV for a schedule shape (compute-only or with communication).
Expected<Schedule> fromCsv(std::string_view text, int64_t pp, int64_t vpp,
                           int64_t microbatches, Placement placement);

/// A CSV as PyTorch writes it, and what the import made of PyTorch's
/// runtime actions that hypipe's programs do not carry.
struct CsvImport {
  Schedule schedule;
  bool placementInferred = false; ///< placement read from the file
  int64_t fsdpActions = 0;        ///< UNSHARD / RESHARD: kept, run as no-ops
  int64_t reduceGrads = 0;        ///< REDUCE_GRAD: kept, start the reduction
  int64_t overlapped = 0;         ///< (F;B)OVERLAP_F_B pairs, run F then B
};

/// Imports what `_PipelineScheduleRuntime._dump_csv()` and the schedules'
/// `pipeline_order` write: idle cells; `UNSHARD` and `RESHARD` (FSDP's,
/// nothing to do without sharded parameters: kept in the program as no-ops
/// and counted); `REDUCE_GRAD` (where the runtime starts the stage's
/// data-parallel gradient reduction; the simulator checks that it follows
/// every backward of its stage); `(F;B)OVERLAP_F_B`
/// (the pair, in order). Without `placement` it is inferred as PyTorch does
/// from which rank runs which stage: loop (stage s on rank s % pp) or V
/// (rank r holds stages r and 2 pp - 1 - r). Sizes are held to generation's
/// bounds.
Expected<CsvImport> importCsv(std::string_view text, int64_t pp, int64_t vpp,
                              int64_t microbatches,
                              std::optional<Placement> placement);

/// The programs of a model that runs a CSV instead of a generated order
/// (`parallel.schedule_csv`, `pipe-build-schedule{import-csv=...}`): the
/// file imported for the model's shape with its placement inferred, which
/// must be the one the model's stages are placed on (`kind`'s: V for
/// zbv and dualpipev, the loop otherwise), running exactly `microbatches`;
/// verified by the simulator (with `insertCommunication`'s transfers when
/// the file writes none). The programs are the file's, as written, named
/// after `kind`.
Expected<CsvImport> importCsvForModel(std::string_view text, ScheduleKind kind,
                                      int64_t pp, int64_t vpp,
                                      int64_t microbatches);
/// The same, read from the file at `path`; a file that cannot be read is an
/// error naming it and the reason. Errors name the file first.
Expected<CsvImport> readCsvForModel(const std::string &path, ScheduleKind kind,
                                    int64_t pp, int64_t vpp,
                                    int64_t microbatches);

/// What an import made of PyTorch's runtime actions, a line each (the
/// inferred placement, overlapped pairs, FSDP actions, REDUCE_GRAD), for the
/// `import:` lines the CLI prints.
std::vector<std::string> importNotes(const CsvImport &import);

} // namespace hypipe::schedule

#endif
