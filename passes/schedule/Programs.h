//===- Programs.h - pipe.program ops <-> the schedule library -------------===//
#ifndef HYPIPE_PASSES_SCHEDULE_PROGRAMS_H
#define HYPIPE_PASSES_SCHEDULE_PROGRAMS_H

#include "core/schedule/Schedule.h"
#include "dialects/hybrid/HybridOps.h"

#include <optional>

namespace hypipe::schedule {

/// The schedule the model's `pipe.program` ops hold (shape from its
/// `parallel` attribute); an error if they do not parse.
Expected<Schedule> readPrograms(hybrid::ModelOp model);

/// Replaces the model's `pipe.program` ops with `schedule`'s programs, placed
/// before its `hybrid.return`.
void writePrograms(hybrid::ModelOp model, const Schedule &schedule);

/// The programs of `request` as the pass pipeline makes them from a
/// generated schedule (pipe-build-schedule, pipe-insert-comms,
/// pipe-verify-schedule): built, with their transfers, and verified by the
/// simulator. Nothing when the schedule refuses the request (a microbatch
/// count it does not run); an error when what it built does not verify.
Expected<std::optional<Schedule>>
buildVerifiedPrograms(const ScheduleRequest &request);

/// The forward-only programs evaluation runs (forwardOnlySchedule of the
/// verified training programs `training`: their forwards in order, with
/// their transfers), verified by the simulator; an error when they do not
/// verify.
Expected<Schedule> buildVerifiedForwardPrograms(const Schedule &training);

} // namespace hypipe::schedule

#endif
