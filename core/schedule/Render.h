//===- Render.h - pictures of a simulated schedule ------------------------===//
#ifndef HYPIPE_CORE_SCHEDULE_RENDER_H
#define HYPIPE_CORE_SCHEDULE_RENDER_H

#include "core/schedule/Simulate.h"

#include <string>

namespace hypipe::schedule {

/// Chrome trace (Trace.h's conventions): one process per rank, one complete
/// event per compute action; one time unit of the costs is 1 ms.
std::string chromeTrace(const Schedule &schedule, const Simulation &simulation);

/// An SVG timeline: one row per rank, one box per compute action coloured by
/// kind and labelled with microbatch and chunk; bubbles are the gaps.
/// Ranks with more actions than this are drawn aggregated by svgTimeline.
constexpr size_t kSvgMostActionsPerRank = 2000;

/// Whether svgTimeline draws `schedule` as one-pixel columns instead of an
/// element per action (a rank has more than kSvgMostActionsPerRank): the
/// picture stays under a few MB whatever the number of microbatches.
bool svgAggregates(const Schedule &schedule);

/// The timeline as SVG: a row per rank, each compute action a rectangle
/// (or, for long schedules, one-pixel columns: svgAggregates).
std::string svgTimeline(const Schedule &schedule, const Simulation &simulation);

} // namespace hypipe::schedule

#endif
