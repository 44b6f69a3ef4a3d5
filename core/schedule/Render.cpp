//===- Render.cpp ---------------------------------------------------------===//
#include "core/schedule/Render.h"

#include "core/report/Svg.h"
#include "core/schedule/Trace.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <iterator>
#include <vector>

namespace hypipe::schedule {

std::string chromeTrace(const Schedule &s, const Simulation &sim) {
  ChromeTrace trace;
  for (int64_t r = 0; r < s.pp; ++r) {
    trace.nameProcess(r, fmt::format("rank {}", r));
    for (size_t k = 0; k < s.ranks[r].size(); ++k) {
      const Action &a = s.ranks[r][k];
      if (!isCompute(a.op))
        continue;
      const Timing &t = sim.timings[r][k];
      // One time unit of the costs is shown as 1 ms.
      trace.complete(s.megatronText(a), opName(a.op), r, 0, t.start * 1000.0,
                     (t.end - t.start) * 1000.0,
                     {{"stage", a.stage}, {"microbatch", a.microbatch}});
    }
  }
  trace.otherData() = {{"source", "simulator"},
                       {"schedule", s.name},
                       {"pp", s.pp},
                       {"vpp", s.vpp},
                       {"microbatches", s.microbatches},
                       {"makespan", sim.makespan}};
  return trace.dump(1);
}

namespace {

/// The rank labels' column, a row, the title and legend above the rows,
/// the time axis below them.
constexpr double kRankColumn = 80, kRightMargin = 24, kRowHeight = 26,
                 kTop = 56, kAxisHeight = 52;
/// A character of the boxes' 10 px sans-serif labels (DejaVu Sans's digits
/// are 6.4 px wide) and the space a label keeps from its box's edges.
constexpr double kCharWidth = 6.5, kLabelPadding = 4;
constexpr const char *kBubbleColour = "#f4f4f4";
/// The kinds of action drawn, their colours and what they are.
struct Kind {
  Op op;
  const char *colour, *meaning;
};
constexpr Kind kDrawn[] = {{Op::F, "#4c78a8", "forward"},
                           {Op::B, "#54a24b", "backward"},
                           {Op::I, "#f58518", "input gradient"},
                           {Op::W, "#b279a2", "weight gradient"}};
constexpr size_t kKinds = std::size(kDrawn);

/// Where `op` stands in kDrawn; kKinds for actions that are not drawn.
size_t kindIndex(Op op) {
  return size_t(std::find_if(std::begin(kDrawn), std::end(kDrawn),
                             [&](const Kind &k) { return k.op == op; }) -
                std::begin(kDrawn));
}

const char *colour(Op op) { return kDrawn[kindIndex(op)].colour; }

double labelPixels(std::string_view label) {
  return kCharWidth * double(label.size()) + kLabelPadding;
}

/// A box's label without its kind, which the colour says: `3.1`.
std::string shortLabel(const Schedule &s, const Action &a) {
  return s.megatronText(a).substr(std::strlen(opName(a.op)));
}

/// Calls `visit(rank, index, action)` for every drawn action.
template <typename Visit>
void forEachDrawn(const Schedule &s, const Visit &visit) {
  for (int64_t r = 0; r < s.pp; ++r)
    for (size_t k = 0; k < s.ranks[r].size(); ++k)
      if (kindIndex(s.ranks[r][k].op) < kKinds)
        visit(r, k, s.ranks[r][k]);
}

/// Every action of rank `r` as a box with its text as a tooltip, labelled
/// with that text where it fits, else with its short label.
void drawBoxes(std::string &out, const Schedule &s, const Simulation &sim,
               int64_t r, double y, double scale) {
  for (size_t k = 0; k < s.ranks[r].size(); ++k) {
    const Action &a = s.ranks[r][k];
    if (kindIndex(a.op) == kKinds)
      continue;
    const Timing &t = sim.timings[r][k];
    const double x = kRankColumn + t.start * scale,
                 w = (t.end - t.start) * scale;
    const std::string text = s.megatronText(a), brief = shortLabel(s, a);
    out += fmt::format(
        "<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" "
        "fill=\"{}\" stroke=\"white\" stroke-width=\"0.5\"><title>{} "
        "[{:.4g}, {:.4g}]</title></rect>\n",
        x, y + 2, std::max(w, 0.5), kRowHeight - 4, colour(a.op), text, t.start,
        t.end);
    const std::string &label = labelPixels(text) <= w ? text : brief;
    if (labelPixels(label) <= w * (1 + 1e-9))
      out += fmt::format("<text x=\"{:.2f}\" y=\"{:.1f}\" fill=\"white\" "
                         "text-anchor=\"middle\">{}</text>\n",
                         x + w / 2, y + kRowHeight * 0.65, label);
  }
}

/// For each pixel column of rank `r`, the share of its time each kind of
/// action fills, in 16ths.
std::vector<std::array<int, kKinds>> columnShares(const Schedule &s,
                                                  const Simulation &sim,
                                                  int64_t r, double scale) {
  const size_t columns = size_t(sim.makespan * scale) + 1;
  std::vector<std::array<double, kKinds>> busy(columns, {0, 0, 0, 0});
  for (size_t k = 0; k < s.ranks[r].size(); ++k) {
    const size_t kind = kindIndex(s.ranks[r][k].op);
    if (kind == kKinds)
      continue;
    const double from = sim.timings[r][k].start * scale,
                 to = sim.timings[r][k].end * scale;
    for (size_t c = size_t(from); c < columns && double(c) < to; ++c)
      busy[c][kind] += std::min(to, double(c + 1)) - std::max(from, double(c));
  }
  std::vector<std::array<int, kKinds>> shares(columns);
  for (size_t c = 0; c < columns; ++c)
    for (size_t i = 0; i < kKinds; ++i)
      shares[c][i] = int(std::lround(std::min(1.0, busy[c][i]) * 16));
  return shares;
}

/// Rank `r` as one-pixel columns, each a stack of the kinds in the shares
/// of its time they fill (the empty rest is the bubble); runs of equal
/// columns are merged, and each kind is one path.
void drawColumns(std::string &out, const Schedule &s, const Simulation &sim,
                 int64_t r, double y, double scale) {
  const std::vector<std::array<int, kKinds>> shares =
      columnShares(s, sim, r, scale);
  const double full = kRowHeight - 4;
  std::array<std::string, kKinds> paths;
  for (size_t c = 0; c < shares.size();) {
    size_t end = c + 1;
    while (end < shares.size() && shares[end] == shares[c])
      ++end;
    double bottom = y + 2 + full;
    for (size_t i = 0; i < kKinds; ++i) {
      if (shares[c][i] == 0)
        continue;
      const double h = full * shares[c][i] / 16.0;
      bottom -= h;
      paths[i] +=
          fmt::format("M{:.0f} {:.2f}h{}v{:.2f}h-{}z", kRankColumn + double(c),
                      bottom, end - c, h, end - c);
    }
    c = end;
  }
  for (size_t i = 0; i < kKinds; ++i)
    if (!paths[i].empty())
      out += fmt::format("<path fill=\"{}\" d=\"{}\"/>\n", kDrawn[i].colour,
                         paths[i]);
}

/// The legend: each kind of action the schedule has, and the bubble.
std::vector<report::LegendEntry> legendOf(const Schedule &s) {
  std::array<bool, kKinds> present{};
  forEachDrawn(s, [&](int64_t, size_t, const Action &a) {
    present[kindIndex(a.op)] = true;
  });
  std::vector<report::LegendEntry> entries;
  for (size_t i = 0; i < kKinds; ++i)
    if (present[i])
      entries.push_back(
          {kDrawn[i].colour,
           fmt::format("{} {}", opName(kDrawn[i].op), kDrawn[i].meaning), false,
           ""});
  entries.push_back({kBubbleColour, "bubble (% beside each rank)", false, ""});
  return entries;
}

std::string header(const Schedule &s, const Simulation &sim,
                   const SvgLayout &layout, double height) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" "
      "height=\"{:.0f}\" font-family=\"sans-serif\" font-size=\"10\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"10\" y=\"20\" font-size=\"13\">{}: pp={} vpp={} "
      "microbatches={}, makespan {:.4g}{}</text>\n",
      layout.width, height, report::xmlEscaped(s.name), s.pp, s.vpp,
      s.microbatches, sim.makespan,
      layout.aggregated ? " (one-pixel columns: the share of each pixel's time "
                          "each kind of action fills)"
                        : "");
}

/// The legend, and how to read a box's label where there are boxes.
void drawKey(std::string &out, const Schedule &s, const SvgLayout &layout) {
  const double end = report::drawLegend(out, legendOf(s), kRankColumn, 40);
  if (!layout.aggregated)
    out += fmt::format("<text x=\"{:.0f}\" y=\"40\" font-size=\"11\" "
                       "fill=\"#555555\">F3.1 = forward of microbatch 3, chunk "
                       "1 (the letter left out on narrow boxes)</text>\n",
                       end);
}

/// Each rank's name and bubble fraction, and its row (bubble-coloured: the
/// boxes cover the busy time), up to pixel column `right`.
void drawRows(std::string &out, const Schedule &s, const Simulation &sim,
              double right) {
  for (int64_t r = 0; r < s.pp; ++r) {
    const double y = kTop + kRowHeight * double(r);
    out += fmt::format(
        "<text x=\"6\" y=\"{:.1f}\">rank {} ({:.0f}%)</text>\n"
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
        "fill=\"{}\"/>\n",
        y + kRowHeight * 0.65, r, 100 * sim.bubbleFraction[r], kRankColumn,
        y + 2, right - kRankColumn, kRowHeight - 4, kBubbleColour);
  }
}

} // namespace

SvgLayout svgLayout(const Schedule &s, const Simulation &sim) {
  // The fewest pixels per time unit at which every short label fits.
  double pixelsPerUnit = 0;
  int64_t drawn = 0;
  forEachDrawn(s, [&](int64_t r, size_t k, const Action &a) {
    ++drawn;
    const Timing &t = sim.timings[r][k];
    if (t.end > t.start)
      pixelsPerUnit = std::max(pixelsPerUnit, labelPixels(shortLabel(s, a)) /
                                                  (t.end - t.start));
  });
  const double margins = kRankColumn + kRightMargin;
  SvgLayout layout;
  layout.labelledWidth = std::ceil(margins + sim.makespan * pixelsPerUnit);
  // Too wide to label, or too many boxes for one file (actions of no cost
  // need no width, but each would still be an element).
  // (An action far shorter than the step may need more pixels than a
  // double holds: infinitely wide, so drawn as columns too.)
  layout.aggregated =
      !(layout.labelledWidth <= kSvgMaxWidth) || drawn > kSvgMostBoxes;
  layout.width = layout.aggregated
                     ? kSvgAggregatedWidth
                     : std::max(kSvgMinWidth, layout.labelledWidth);
  layout.scale = sim.makespan > 0 ? (layout.width - margins) / sim.makespan : 1;
  return layout;
}

std::string svgTimeline(const Schedule &s, const Simulation &sim) {
  const SvgLayout layout = svgLayout(s, sim);
  const double rowsBottom = kTop + kRowHeight * double(s.pp);
  const double right = kRankColumn + sim.makespan * layout.scale;
  std::string out = header(s, sim, layout, rowsBottom + kAxisHeight);
  drawKey(out, s, layout);
  drawRows(out, s, sim, right);
  report::drawXAxis(
      out,
      report::axisWithin(0, sim.makespan, kRankColumn, right,
                         std::max(2, int((right - kRankColumn) / 90))),
      kTop, rowsBottom + 2, "time (in the unit of the action costs)");
  for (int64_t r = 0; r < s.pp; ++r) {
    const double y = kTop + kRowHeight * double(r);
    if (layout.aggregated)
      drawColumns(out, s, sim, r, y, layout.scale);
    else
      drawBoxes(out, s, sim, r, y, layout.scale);
  }
  return out + "</svg>\n";
}

} // namespace hypipe::schedule
