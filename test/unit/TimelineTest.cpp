//===- TimelineTest.cpp - the schedule's SVG timeline, read back ----------===//
#include "core/schedule/Render.h"

#include "SvgReading.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

namespace hypipe::schedule {
namespace {

using namespace hypipe::testing;

struct Drawn {
  Schedule schedule;
  Simulation simulation;
  std::string svg;
};

Drawn draw(const std::string &name, int64_t pp, int64_t vpp, int64_t m) {
  Drawn d;
  auto built = buildSchedule({*parseScheduleKind(name), pp, vpp, m});
  EXPECT_TRUE(static_cast<bool>(built)) << toString(built.takeError());
  if (!built)
    return d;
  d.schedule = std::move(*built);
  insertCommunication(d.schedule);
  auto simulated = simulate(d.schedule);
  EXPECT_TRUE(static_cast<bool>(simulated)) << toString(simulated.takeError());
  if (simulated)
    d.simulation = std::move(*simulated);
  d.svg = svgTimeline(d.schedule, d.simulation);
  return d;
}

double widthOf(const std::string &svg) {
  auto found = matches(svg, "<svg [^>]*width=\"([0-9.]+)\"");
  return found.empty() ? 0 : std::stod(found[0][0]);
}

/// A box as drawn: its left edge and width, the text of its tooltip and
/// the label written on it ("" when none).
struct Box {
  double x, width;
  std::string text, label;
};

std::vector<Box> boxesOf(const std::string &svg) {
  std::vector<Box> boxes;
  for (const auto &m :
       matches(svg, "<rect x=\"([0-9.]+)\" y=\"[0-9.]+\" width=\"([0-9.]+)\""
                    "[^>]*>"
                    "<title>([^ ]+) [^<]*</title></rect>\n"
                    "(?:<text [^>]*>([^<]*)</text>\n)?"))
    boxes.push_back({std::stod(m[0]), std::stod(m[1]), m[2], m[3]});
  return boxes;
}

/// The width of `label` in DejaVu Sans at 10 px (the advance widths of its
/// glyphs, from the font's tables); -1 for a character not listed.
double dejaVuWidth(const std::string &label) {
  const std::map<char, double> advance = {
      {'.', 3.18}, {'F', 5.75}, {'B', 6.86}, {'I', 2.95}, {'W', 9.89}};
  double width = 0;
  for (char c : label) {
    if (c >= '0' && c <= '9')
      width += 6.36;
    else if (advance.count(c))
      width += advance.at(c);
    else
      return -1;
  }
  return width;
}

/// The compute actions of `s` in the order the picture draws them: rank by
/// rank, in program order.
std::vector<std::pair<const Action *, Timing>> drawnActions(const Drawn &d) {
  std::vector<std::pair<const Action *, Timing>> actions;
  for (int64_t r = 0; r < d.schedule.pp; ++r)
    for (size_t k = 0; k < d.schedule.ranks[r].size(); ++k)
      if (isCompute(d.schedule.ranks[r][k].op))
        actions.push_back(
            {&d.schedule.ranks[r][k], d.simulation.timings[r][k]});
  return actions;
}

// The picture is as wide as its labels need, between the floor and the cap;
// past the cap it is an overview of one-pixel columns, small and without
// an element per action.
TEST(Timeline, WidthGrowsWithTheActionsUpToTheCap) {
  const double few = widthOf(draw("1f1b", 4, 1, 4).svg),
               some = widthOf(draw("1f1b", 4, 1, 16).svg),
               many = widthOf(draw("1f1b", 4, 1, 64).svg),
               interleaved = widthOf(draw("interleaved-1f1b", 4, 2, 64).svg);
  EXPECT_EQ(few, kSvgMinWidth);
  EXPECT_LT(few, some);
  EXPECT_LT(some, many);
  EXPECT_LE(many, kSvgMaxWidth);
  EXPECT_LE(interleaved, kSvgMaxWidth);
  Drawn most = draw("1f1b", 4, 1, 1024);
  EXPECT_TRUE(svgLayout(most.schedule, most.simulation).aggregated);
  EXPECT_EQ(widthOf(most.svg), kSvgAggregatedWidth);
  EXPECT_EQ(most.svg.find("<title>"), std::string::npos);
  EXPECT_LT(most.svg.size(), size_t(1) << 20);
}

// Every action has its box, wide enough for the label written on it (in
// the font's own widths): its Megatron text, or that text without the
// kind letter, which the box's colour says.
TEST(Timeline, EveryBoxCarriesALabelThatFits) {
  const std::tuple<const char *, int64_t, int64_t, int64_t> cases[] = {
      {"1f1b", 4, 1, 4},
      {"1f1b", 4, 1, 64},
      {"interleaved-1f1b", 4, 2, 64},
      {"zb-h1", 4, 1, 64},
      {"dualpipev", 4, 2, 16}};
  for (const auto &[name, pp, vpp, m] : cases) {
    SCOPED_TRACE(::testing::Message() << name << " m " << m);
    Drawn d = draw(name, pp, vpp, m);
    std::vector<Box> boxes = boxesOf(d.svg);
    auto actions = drawnActions(d);
    ASSERT_EQ(boxes.size(), actions.size());
    for (size_t i = 0; i < boxes.size(); ++i) {
      const std::string text = d.schedule.megatronText(*actions[i].first);
      EXPECT_EQ(boxes[i].text, text);
      EXPECT_TRUE(boxes[i].label == text || boxes[i].label == text.substr(1))
          << text << " labelled '" << boxes[i].label << "'";
      EXPECT_GT(dejaVuWidth(boxes[i].label), 0) << boxes[i].label;
      EXPECT_LE(dejaVuWidth(boxes[i].label), boxes[i].width) << text;
    }
  }
}

// The time axis starts at 0, ticks at a 1-2-5 step up to the makespan, and
// each box spans its action's simulated time on it.
TEST(Timeline, BoxesSitOnTheTimeAxis) {
  for (int64_t m : {4, 64}) {
    Drawn d = draw("zb-h1", 4, 1, m);
    auto time = ticks(d.svg, "x");
    ASSERT_GE(time.size(), 3u);
    const double step = time[1].second - time[0].second;
    EXPECT_EQ(time.front().second, 0);
    EXPECT_TRUE(isOneTwoFive(step)) << step;
    EXPECT_LE(time.back().second, d.simulation.makespan);
    EXPECT_GT(time.back().second + step, d.simulation.makespan);
    const double unitsPerPixel = valueAt(time, 1) - valueAt(time, 0);
    std::vector<Box> boxes = boxesOf(d.svg);
    auto actions = drawnActions(d);
    ASSERT_EQ(boxes.size(), actions.size());
    for (size_t i = 0; i < boxes.size(); ++i) {
      EXPECT_NEAR(valueAt(time, boxes[i].x), actions[i].second.start,
                  unitsPerPixel);
      EXPECT_NEAR(valueAt(time, boxes[i].x + boxes[i].width),
                  actions[i].second.end, unitsPerPixel);
    }
  }
}

// The legend lists the kinds of action the schedule has and no others.
TEST(Timeline, LegendNamesTheKindsDrawn) {
  for (const char *name : {"1f1b", "zb-h1", "zbv"}) {
    Drawn d = draw(name, 4, std::string(name) == "zbv" ? 2 : 1, 8);
    for (Op op : {Op::F, Op::B, Op::I, Op::W}) {
      bool has = false;
      for (const auto &[action, timing] : drawnActions(d))
        has = has || action->op == op;
      const std::string entry =
          std::string("font-size=\"11\">") + opName(op) + " ";
      EXPECT_EQ(d.svg.find(entry) != std::string::npos, has)
          << name << " " << opName(op);
    }
  }
}

} // namespace
} // namespace hypipe::schedule
