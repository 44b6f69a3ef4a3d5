#include "core/report/LossPlot.h"
#include "core/report/Svg.h"

#include "SvgReading.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

using namespace hypipe::report;
using namespace hypipe::testing;

namespace {

/// A loss that falls from 5 towards 2 with noise of +-0.2 from step to step.
double trend(int64_t step) { return 2 + 3 * std::exp(-double(step) / 50); }
double noisyLoss(int64_t step) { return trend(step) + (step % 2 ? 0.2 : -0.2); }

LossCurve curveOf(int64_t first, int64_t last) {
  LossCurve curve;
  curve.title = "tiny <test> & co";
  for (int64_t s = first; s <= last; ++s)
    curve.points.push_back({s, noisyLoss(s)});
  return curve;
}

/// The points of the polyline of class `cls`, as (step, loss) read off the
/// ticks.
std::vector<std::pair<double, double>> lineValues(const std::string &svg,
                                                  const std::string &cls) {
  auto found =
      matches(svg, "<polyline class=\"" + cls + "\"[^>]*points=\"([^\"]*)\"");
  if (found.size() != 1)
    return {};
  auto x = ticks(svg, "x"), y = ticks(svg, "y");
  std::vector<std::pair<double, double>> values;
  for (const auto &p : matches(found[0][0], "([-0-9.]+),([-0-9.]+)"))
    values.push_back(
        {valueAt(x, std::stod(p[0])), valueAt(y, std::stod(p[1]))});
  return values;
}

} // namespace

// Axes: every range gets ticks at a 1-2-5 step that cover it without
// wasting more than a step on either side, labelled so that the label reads
// back as the tick.
TEST(Axis, TicksAreOneTwoFiveStepsCoveringTheRange) {
  const std::pair<double, double> ranges[] = {
      {1.7108, 5.5347}, {0.00312, 0.00471}, {1, 60},   {-3, 1234},
      {7, 7},           {61, 70},           {0, 1e-3}, {2.5, 2.5000001}};
  for (auto [lo, hi] : ranges) {
    Axis a = axisCovering(lo, hi, 400, 50, 8);
    std::vector<std::pair<double, double>> t;
    for (double v : a.ticks)
      t.push_back({a.pixel(v), std::stod(a.label(v))});
    SCOPED_TRACE(::testing::Message() << "[" << lo << ", " << hi << "]");
    expectTicksCover(t, lo, hi);
    EXPECT_LE(t.size(), 9u);
    if (hi > lo) { // a single value is padded before it is covered
      EXPECT_GT(t.front().second, lo - a.step);
      EXPECT_LT(t.back().second, hi + a.step);
    }
    EXPECT_DOUBLE_EQ(a.pixel(a.lo), 400);
    EXPECT_DOUBLE_EQ(a.pixel(a.hi), 50);
  }
}

// A step axis never ticks between steps; an axis within a range keeps to it.
TEST(Axis, StepsAreWholeAndWithinKeepsTheRange) {
  Axis steps = axisCovering(1, 3, 0, 100, 10, 1);
  EXPECT_EQ(steps.step, 1);
  Axis time = axisWithin(0, 201, 80, 6110, 60);
  EXPECT_EQ(time.lo, 0);
  EXPECT_EQ(time.hi, 201);
  EXPECT_TRUE(isOneTwoFive(time.step));
  EXPECT_EQ(time.ticks.front(), 0);
  EXPECT_LE(time.ticks.back(), 201);
  EXPECT_GT(time.ticks.back() + time.step, 201);
  EXPECT_LE(time.ticks.size(), 61u);
}

TEST(Axis, TextIsEscaped) {
  EXPECT_EQ(xmlEscaped("a<b & \"c\">"), "a&lt;b &amp; &quot;c&quot;&gt;");
}

// The centred mean leaves a straight line as it is and cuts a zigzag of +-a
// to +-a / (2h + 1); the ends are the data's.
TEST(LossPlot, SmoothingFollowsTheTrendWithoutLag) {
  std::vector<double> line, zigzag;
  for (int i = 0; i < 100; ++i) {
    line.push_back(5 - 0.03 * i);
    zigzag.push_back(line.back() + (i % 2 ? 0.2 : -0.2));
  }
  const size_t h = 3;
  std::vector<double> straight = smoothed(line, h), calm = smoothed(zigzag, h);
  for (size_t i = 0; i < line.size(); ++i)
    EXPECT_NEAR(straight[i], line[i], 1e-12) << i;
  for (size_t i = h; i + h < line.size(); ++i)
    EXPECT_NEAR(calm[i], line[i], 0.2 / (2 * h + 1) + 1e-12) << i;
  EXPECT_NEAR(calm.front(), zigzag.front(), 1e-12);
  EXPECT_NEAR(calm.back(), zigzag.back(), 1e-12);
  EXPECT_EQ(smoothingHalfWindow(39), 0u);
  EXPECT_GT(smoothingHalfWindow(200), 0u);
}

// Read off the picture: the axes tick at 1-2-5 values covering the losses
// and the entropy, the loss line passes through every logged (step, loss),
// the smoothed line stays nearer the trend than the noise, the entropy
// line sits at the entropy and the resume mark at the checkpoint's step.
TEST(LossPlot, ValuesReadBackOffTheAxes) {
  LossCurve curve = curveOf(1, 200);
  curve.unigramEntropy = 1.9;
  curve.resumedFrom = {120};
  const std::string svg = lossSvg(curve);
  auto x = ticks(svg, "x"), y = ticks(svg, "y");
  double lo = 1e9, hi = -1e9;
  for (auto [s, l] : curve.points) {
    lo = std::min(lo, l);
    hi = std::max(hi, l);
  }
  expectTicksCover(x, 1, 200);
  expectTicksCover(y, std::min(lo, 1.9), hi);
  // Pixels are written to 0.1: a value reads back within a pixel's worth.
  const double stepPixel = std::abs(valueAt(x, 1) - valueAt(x, 0));
  const double lossPixel = std::abs(valueAt(y, 1) - valueAt(y, 0));

  auto raw = lineValues(svg, "loss");
  ASSERT_EQ(raw.size(), curve.points.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    EXPECT_NEAR(raw[i].first, double(curve.points[i].first), stepPixel);
    EXPECT_NEAR(raw[i].second, curve.points[i].second, lossPixel);
  }
  auto smooth = lineValues(svg, "smoothed");
  ASSERT_EQ(smooth.size(), curve.points.size());
  for (size_t i = 10; i + 10 < smooth.size(); ++i)
    EXPECT_NEAR(smooth[i].second, trend(curve.points[i].first), 0.1) << i;

  auto entropy = matches(svg, "<line class=\"entropy\" x1=\"[-0-9.]+\" "
                              "y1=\"([-0-9.]+)\"");
  ASSERT_EQ(entropy.size(), 1u);
  EXPECT_NEAR(valueAt(y, std::stod(entropy[0][0])), 1.9, lossPixel);
  auto resume = matches(svg, "<line class=\"resume\" x1=\"([-0-9.]+)\"");
  ASSERT_EQ(resume.size(), 1u);
  EXPECT_NEAR(valueAt(x, std::stod(resume[0][0])), 120, stepPixel);
  EXPECT_NE(svg.find("tiny &lt;test&gt; &amp; co"), std::string::npos);
}

// A resumed log that starts past step 1, without entropy (packed samples):
// no reference line, no mark, and the legend names only what is drawn.
TEST(LossPlot, DrawsOnlyWhatTheLogHolds) {
  const std::string svg = lossSvg(curveOf(61, 70));
  expectTicksCover(ticks(svg, "x"), 61, 70);
  EXPECT_EQ(svg.find("class=\"entropy\""), std::string::npos);
  EXPECT_EQ(svg.find("class=\"resume\""), std::string::npos);
  EXPECT_EQ(svg.find("class=\"smoothed\""), std::string::npos);
  EXPECT_EQ(svg.find("unigram entropy"), std::string::npos);
  EXPECT_EQ(svg.find("resumed"), std::string::npos);
  EXPECT_EQ(lineValues(svg, "loss").size(), 10u);
}

// A diverged run's losses past 1e300 (their span would overflow a double)
// are left out as infinite ones are, of the smoothed line too: the picture
// has no NaN coordinate, and the axis covers the rest.
TEST(LossPlot, HugeLossesLeaveNoNaN) {
  LossCurve curve = curveOf(1, 10);
  curve.points[3].second = 1e308;
  curve.points[4].second = -1e308;
  const std::string svg = lossSvg(curve);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(lineValues(svg, "loss").size(), 8u);
  expectTicksCover(ticks(svg, "y"), noisyLoss(10), noisyLoss(1));
  // The smoothed line's windows without the spike keep their means (a
  // difference of prefix sums cancelled them to 0 after it).
  std::vector<double> flat(100, 2.0);
  flat[10] = 1e300;
  const std::vector<double> smooth = smoothed(flat, smoothingHalfWindow(100));
  EXPECT_DOUBLE_EQ(smooth[9], 1e300 / 5); // its window holds the spike
  for (size_t i = 13; i < flat.size(); ++i)
    EXPECT_EQ(smooth[i], 2.0) << i;
  // In a picture, a step of 1e308 among 100 of about 2 leaves the smoothed
  // line near 2.
  LossCurve spiked = curveOf(1, 100);
  spiked.points[50].second = 1e308;
  const std::string picture = lossSvg(spiked);
  EXPECT_EQ(picture.find("nan"), std::string::npos);
  for (auto [step, loss] : lineValues(picture, "smoothed"))
    EXPECT_LT(loss, 6.0) << step;
}

namespace {

/// The text of the panel `name` (`<g class="panel-NAME">` up to the next
/// panel or the end of the picture).
std::string panelOf(const std::string &svg, const std::string &name) {
  const size_t begin = svg.find("<g class=\"panel-" + name + "\">");
  if (begin == std::string::npos)
    return std::string();
  size_t end = svg.find("<g class=\"panel-", begin + 1);
  return svg.substr(begin,
                    end == std::string::npos ? std::string::npos : end - begin);
}

/// A run of `steps` steps: a cosine learning rate after 10 warm-up steps
/// and a gradient norm that falls from 100 to 0.1.
LossCurve runOf(int64_t steps) {
  LossCurve curve = curveOf(1, steps);
  for (int64_t s = 1; s <= steps; ++s) {
    const double lr =
        s <= 10
            ? 1e-3 * double(s) / 10
            : 1e-3 * 0.5 *
                  (1 + std::cos(M_PI * double(s - 10) / double(steps - 10)));
    curve.learningRates.push_back({s, lr});
    curve.gradNorms.push_back(
        {s, 100 * std::pow(1e-3, double(s - 1) / double(steps - 1))});
  }
  return curve;
}

} // namespace

// The learning rate and the grad norm get panels of their own under the
// loss, over the same steps; each line reads back off its panel's axes.
TEST(LossPlot, LearningRateAndGradNormPanels) {
  const LossCurve curve = runOf(100);
  const std::string svg = lossSvg(curve);
  for (const char *panel : {"loss", "lr", "grad-norm"})
    EXPECT_NE(panelOf(svg, panel), "") << panel;
  const std::string lr = panelOf(svg, "lr");
  const auto x = ticks(lr, "x"), y = ticks(lr, "y");
  expectTicksCover(x, 1, 100);
  expectTicksCover(y, 0, 1e-3);
  auto found = matches(lr, "<polyline class=\"lr\"[^>]*points=\"([^\"]*)\"");
  ASSERT_EQ(found.size(), 1u);
  auto points = matches(found[0][0], "([-0-9.]+),([-0-9.]+)");
  ASSERT_EQ(points.size(), curve.learningRates.size());
  const double lrPixel = std::abs(valueAt(y, 1) - valueAt(y, 0));
  for (size_t i = 0; i < points.size(); ++i)
    EXPECT_NEAR(valueAt(y, std::stod(points[i][1])),
                curve.learningRates[i].second, lrPixel)
        << i;
  EXPECT_NE(panelOf(svg, "grad-norm").find("class=\"grad-norm-smoothed\""),
            std::string::npos);
  // A log without them draws the loss alone.
  EXPECT_EQ(lossSvg(curveOf(1, 100)).find("panel-lr"), std::string::npos);
}

// --log-scale: the grad norm's ticks at the powers of ten it spans, each
// point at log10 of its value between them.
TEST(LossPlot, LogScaleTicksAtPowersOfTen) {
  const LossCurve curve = runOf(50);
  const std::string panel = panelOf(lossSvg(curve, {true}), "grad-norm");
  const auto y = ticks(panel, "y");
  std::vector<double> labels;
  for (auto [pixel, value] : y)
    labels.push_back(value);
  EXPECT_EQ(labels, (std::vector<double>{0.1, 1, 10, 100}));
  auto found =
      matches(panel, "<polyline class=\"grad-norm\"[^>]*points=\"([^\"]*)\"");
  ASSERT_EQ(found.size(), 1u);
  auto points = matches(found[0][0], "([-0-9.]+),([-0-9.]+)");
  ASSERT_EQ(points.size(), curve.gradNorms.size());
  // Pixel per decade from the ticks at 1 and 10.
  const double one = y[1].first, decade = y[2].first - y[1].first;
  for (size_t i = 0; i < points.size(); ++i)
    EXPECT_NEAR(std::stod(points[i][1]),
                one + std::log10(curve.gradNorms[i].second) * decade, 0.06)
        << i;
}

// hypipe plot: every run a line of its own colour in each panel, named in
// the legend.
TEST(LossPlot, OverlayDrawsEachRun) {
  LossCurve a = runOf(30), b = runOf(60);
  a.title = "run-a";
  b.title = "run <b>";
  const std::string svg = overlaySvg({a, b}, "two runs");
  for (const char *panel : {"loss", "lr", "grad-norm"}) {
    auto colours =
        matches(panelOf(svg, panel), "<polyline class=\"[^\"]*\" fill=\"none\" "
                                     "stroke=\"([^\"]*)\"");
    ASSERT_EQ(colours.size(), 2u) << panel;
    EXPECT_NE(colours[0][0], colours[1][0]) << panel;
  }
  EXPECT_NE(svg.find(">run-a</text>"), std::string::npos);
  EXPECT_NE(svg.find(">run &lt;b&gt;</text>"), std::string::npos);
  expectTicksCover(ticks(panelOf(svg, "loss"), "x"), 1, 60);
}

// The curves a JSON log gives, its junk lines skipped.
TEST(LossPlot, CurveOfJsonLog) {
  const LossCurve curve = lossCurveOfLog(
      "{\"step\": 1, \"loss\": 5.5, \"lr\": 0, \"grad_norm\": 2.5, "
      "\"unigram_entropy\": 4.25}\n"
      "not json\n"
      "{\"step\": \"two\", \"loss\": 1}\n"
      "{\"step\": 7, \"loss\": 4.5, \"lr\": 1e-3, \"grad_norm\": 1.5, "
      "\"resumed\": true}");
  ASSERT_EQ(curve.points.size(), 2u);
  EXPECT_EQ(curve.points[1], (std::pair<int64_t, double>{7, 4.5}));
  EXPECT_EQ(curve.learningRates[1], (std::pair<int64_t, double>{7, 1e-3}));
  EXPECT_EQ(curve.gradNorms[0], (std::pair<int64_t, double>{1, 2.5}));
  EXPECT_EQ(curve.unigramEntropy, 4.25);
  EXPECT_EQ(curve.resumedFrom, (std::vector<int64_t>{6}));
}
