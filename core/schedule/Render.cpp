//===- Render.cpp ---------------------------------------------------------===//
#include "core/schedule/Render.h"

#include "core/schedule/Trace.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
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

constexpr double kLabelWidth = 70, kRowHeight = 26, kTop = 40, kWidth = 1200;
constexpr Op kDrawn[] = {Op::F, Op::B, Op::I, Op::W};

const char *colour(Op op) {
  switch (op) {
  case Op::F:
    return "#4c78a8";
  case Op::B:
    return "#54a24b";
  case Op::I:
    return "#f58518";
  case Op::W:
    return "#b279a2";
  default:
    return "#999999";
  }
}

/// Every compute action of rank `r` as its own rectangle, labelled where it
/// is wide enough.
void drawActions(std::string &out, const Schedule &s, const Simulation &sim,
                 int64_t r, double y, double scale) {
  for (size_t k = 0; k < s.ranks[r].size(); ++k) {
    const Action &a = s.ranks[r][k];
    if (!isCompute(a.op))
      continue;
    const Timing &t = sim.timings[r][k];
    double x = kLabelWidth + t.start * scale, w = (t.end - t.start) * scale;
    std::string label = s.megatronText(a);
    out += fmt::format(
        "<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" "
        "fill=\"{}\" stroke=\"white\" stroke-width=\"0.5\"><title>{} "
        "[{:.4g}, {:.4g}]</title></rect>\n",
        x, y + 2, std::max(w, 0.5), kRowHeight - 4, colour(a.op), label,
        t.start, t.end);
    if (w > 5.5 * static_cast<double>(label.size()))
      out += fmt::format(
          "<text x=\"{:.2f}\" y=\"{:.1f}\" fill=\"white\">{}</text>\n", x + 2,
          y + kRowHeight * 0.65, label);
  }
}

/// Rank `r` as one-pixel columns, each a stack of the action kinds in the
/// shares of it they fill (the empty rest is the bubble); runs of equal
/// columns (shares in 16ths) are merged. The size of the picture no longer
/// grows with the number of actions.
void drawColumns(std::string &out, const Schedule &s, const Simulation &sim,
                 int64_t r, double y, double scale) {
  const size_t columns = size_t(sim.makespan * scale) + 1;
  std::vector<std::array<int, 4>> share(columns, {0, 0, 0, 0});
  std::vector<std::array<double, 4>> busy(columns, {0, 0, 0, 0});
  for (size_t k = 0; k < s.ranks[r].size(); ++k) {
    const Action &a = s.ranks[r][k];
    auto kind = std::find(std::begin(kDrawn), std::end(kDrawn), a.op);
    if (kind == std::end(kDrawn))
      continue;
    const double from = sim.timings[r][k].start * scale,
                 to = sim.timings[r][k].end * scale;
    for (size_t c = size_t(from); c < columns && double(c) < to; ++c)
      busy[c][kind - std::begin(kDrawn)] +=
          std::min(to, double(c + 1)) - std::max(from, double(c));
  }
  for (size_t c = 0; c < columns; ++c)
    for (size_t i = 0; i < 4; ++i)
      share[c][i] = int(std::lround(std::min(1.0, busy[c][i]) * 16));
  const double full = kRowHeight - 4;
  for (size_t c = 0; c < columns;) {
    size_t end = c + 1;
    while (end < columns && share[end] == share[c])
      ++end;
    double bottom = y + 2 + full;
    for (size_t i = 0; i < 4; ++i) {
      if (share[c][i] == 0)
        continue;
      double h = full * share[c][i] / 16.0;
      bottom -= h;
      out += fmt::format("<rect x=\"{:.0f}\" y=\"{:.2f}\" width=\"{}\" "
                         "height=\"{:.2f}\" fill=\"{}\"/>\n",
                         kLabelWidth + double(c), bottom, end - c, h,
                         colour(kDrawn[i]));
    }
    c = end;
  }
}

} // namespace

bool svgAggregates(const Schedule &s) {
  for (const auto &program : s.ranks)
    if (program.size() > kSvgMostActionsPerRank)
      return true;
  return false;
}

std::string svgTimeline(const Schedule &s, const Simulation &sim) {
  const double labelWidth = kLabelWidth, rowHeight = kRowHeight, top = kTop,
               width = kWidth;
  double scale =
      sim.makespan > 0 ? (width - labelWidth - 20) / sim.makespan : 1;
  double height = top + rowHeight * static_cast<double>(s.pp) + 30;
  const bool aggregated = svgAggregates(s);
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" "
      "height=\"{:.0f}\" "
      "font-family=\"sans-serif\" font-size=\"10\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"10\" y=\"18\" font-size=\"13\">{}: pp={} vpp={} "
      "microbatches={}, makespan "
      "{:.4g}{}</text>\n",
      width, height, s.name, s.pp, s.vpp, s.microbatches, sim.makespan,
      aggregated ? " (one-pixel columns: the share of each pixel's time "
                   "each kind of action fills)"
                 : "");
  for (int64_t r = 0; r < s.pp; ++r) {
    double y = top + rowHeight * static_cast<double>(r);
    out += fmt::format("<text x=\"6\" y=\"{:.1f}\">rank {} ({:.0f}%)</text>\n",
                       y + rowHeight * 0.65, r, 100 * sim.bubbleFraction[r]);
    out += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
        "fill=\"#f4f4f4\"/>\n",
        labelWidth, y + 2, sim.makespan * scale, rowHeight - 4);
    if (aggregated)
      drawColumns(out, s, sim, r, y, scale);
    else
      drawActions(out, s, sim, r, y, scale);
  }
  double ly = top + rowHeight * static_cast<double>(s.pp) + 18;
  double lx = labelWidth;
  for (Op op : kDrawn) {
    out += fmt::format("<rect x=\"{:.0f}\" y=\"{:.0f}\" width=\"12\" "
                       "height=\"12\" fill=\"{}\"/>"
                       "<text x=\"{:.0f}\" y=\"{:.0f}\">{}</text>\n",
                       lx, ly - 10, colour(op), lx + 16, ly, opName(op));
    lx += 50;
  }
  out += fmt::format(
      "<text x=\"{:.0f}\" y=\"{:.0f}\">(%) = bubble fraction; gaps are "
      "bubbles</text>\n</svg>\n",
      lx + 10, ly);
  return out;
}

} // namespace hypipe::schedule
