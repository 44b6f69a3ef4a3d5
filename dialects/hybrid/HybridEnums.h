//===- HybridEnums.h - the hybrid dialect's enums -------------------------===//
//
// The generated enums of HybridEnums.td and their one-to-one conversions to
// the core library's enums, which the passes, the schedule generator and the
// runtime share.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_DIALECTS_HYBRID_HYBRIDENUMS_H
#define HYPIPE_DIALECTS_HYBRID_HYBRIDENUMS_H

#include "core/schedule/Vocabulary.h"

#include "mlir/IR/Attributes.h"
#include "mlir/IR/DialectImplementation.h"

#include "dialects/hybrid/HybridEnums.h.inc"

namespace hypipe::hybrid {

#define HYPIPE_SAME_SCHEDULE(name)                                             \
  static_assert(static_cast<int>(Schedule::name) ==                            \
                static_cast<int>(schedule::ScheduleKind::name))
HYPIPE_SAME_SCHEDULE(GPipe);
HYPIPE_SAME_SCHEDULE(OneFOneB);
HYPIPE_SAME_SCHEDULE(Interleaved1F1B);
HYPIPE_SAME_SCHEDULE(ZbH1);
HYPIPE_SAME_SCHEDULE(ZbV);
HYPIPE_SAME_SCHEDULE(DualPipeV);
#undef HYPIPE_SAME_SCHEDULE

inline schedule::ScheduleKind toScheduleKind(Schedule s) {
  return static_cast<schedule::ScheduleKind>(s);
}

inline Schedule toSchedule(schedule::ScheduleKind kind) {
  return static_cast<Schedule>(kind);
}

} // namespace hypipe::hybrid

#endif
