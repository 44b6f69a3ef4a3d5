//===- Programs.h - pipe.program ops <-> the schedule library -------------===//
#ifndef HYPIPE_PASSES_SCHEDULE_PROGRAMS_H
#define HYPIPE_PASSES_SCHEDULE_PROGRAMS_H

#include "core/schedule/Schedule.h"
#include "dialects/hybrid/HybridOps.h"

namespace hypipe::schedule {

/// The schedule the model's `pipe.program` ops hold (shape from its
/// `parallel` attribute); an error if they do not parse.
Expected<Schedule> readPrograms(hybrid::ModelOp model);

/// Replaces the model's `pipe.program` ops with `schedule`'s programs, placed
/// before its `hybrid.return`.
void writePrograms(hybrid::ModelOp model, const Schedule &schedule);

} // namespace hypipe::schedule

#endif
