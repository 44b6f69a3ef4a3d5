//===- Render.cpp ---------------------------------------------------------===//
#include "core/schedule/Render.h"

#include "core/schedule/Trace.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

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

std::string svgTimeline(const Schedule &s, const Simulation &sim) {
  const double labelWidth = 70, rowHeight = 26, top = 40, width = 1200;
  double scale =
      sim.makespan > 0 ? (width - labelWidth - 20) / sim.makespan : 1;
  double height = top + rowHeight * static_cast<double>(s.pp) + 30;
  auto colour = [](Op op) {
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
  };
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" "
      "height=\"{:.0f}\" "
      "font-family=\"sans-serif\" font-size=\"10\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"10\" y=\"18\" font-size=\"13\">{}: pp={} vpp={} "
      "microbatches={}, makespan "
      "{:.4g}</text>\n",
      width, height, s.name, s.pp, s.vpp, s.microbatches, sim.makespan);
  for (int64_t r = 0; r < s.pp; ++r) {
    double y = top + rowHeight * static_cast<double>(r);
    out += fmt::format("<text x=\"6\" y=\"{:.1f}\">rank {} ({:.0f}%)</text>\n",
                       y + rowHeight * 0.65, r, 100 * sim.bubbleFraction[r]);
    out += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
        "fill=\"#f4f4f4\"/>\n",
        labelWidth, y + 2, sim.makespan * scale, rowHeight - 4);
    for (size_t k = 0; k < s.ranks[r].size(); ++k) {
      const Action &a = s.ranks[r][k];
      if (!isCompute(a.op))
        continue;
      const Timing &t = sim.timings[r][k];
      double x = labelWidth + t.start * scale, w = (t.end - t.start) * scale;
      std::string label = s.megatronText(a);
      out += fmt::format(
          "<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" "
          "fill=\"{}\" stroke=\"white\" stroke-width=\"0.5\"><title>{} "
          "[{:.4g}, "
          "{:.4g}]</title></rect>\n",
          x, y + 2, std::max(w, 0.5), rowHeight - 4, colour(a.op), label,
          t.start, t.end);
      if (w > 5.5 * static_cast<double>(label.size()))
        out += fmt::format(
            "<text x=\"{:.2f}\" y=\"{:.1f}\" fill=\"white\">{}</text>\n", x + 2,
            y + rowHeight * 0.65, label);
    }
  }
  double ly = top + rowHeight * static_cast<double>(s.pp) + 18;
  double lx = labelWidth;
  for (Op op : {Op::F, Op::B, Op::I, Op::W}) {
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
