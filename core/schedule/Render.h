//===- Render.h - pictures of a simulated schedule ------------------------===//
#ifndef HYPIPE_CORE_SCHEDULE_RENDER_H
#define HYPIPE_CORE_SCHEDULE_RENDER_H

#include "core/schedule/Simulate.h"

#include <string>

namespace hypipe::schedule {

/// Chrome trace (Trace.h's conventions): one process per rank, one complete
/// event per compute action; one time unit of the costs is 1 ms.
std::string chromeTrace(const Schedule &schedule, const Simulation &simulation);

/// The SVG timeline draws every compute action as a box wide enough for its
/// label (its microbatch and chunk, and its kind where that fits too), so
/// the picture grows with the actions, from kSvgMinWidth up to kSvgMaxWidth.
/// A schedule that would need more is drawn aggregated, kSvgAggregatedWidth
/// wide: each rank as one-pixel columns, each a stack of the shares of its
/// time each kind of action fills (the picture stays a few MB at most); so
/// is one of more than kSvgMostBoxes actions, whatever their costs (actions
/// that cost nothing need no width but would each be an element).
constexpr double kSvgMinWidth = 1200, kSvgMaxWidth = 16000,
                 kSvgAggregatedWidth = 2400;
constexpr int64_t kSvgMostBoxes = 20000;

struct SvgLayout {
  double labelledWidth = 0; ///< the width at which every label fits
  double width = 0;         ///< the picture's
  double scale = 1;         ///< pixels per time unit of the costs
  bool aggregated = false;  ///< one-pixel columns instead of boxes
};

SvgLayout svgLayout(const Schedule &schedule, const Simulation &simulation);

/// The timeline as SVG, laid out by svgLayout: a title, a legend of the
/// kinds of action drawn, a row per rank (its bubble fraction beside it;
/// the gaps are the bubble), and a time axis with gridlines in the unit of
/// the costs.
std::string svgTimeline(const Schedule &schedule, const Simulation &simulation);

} // namespace hypipe::schedule

#endif
