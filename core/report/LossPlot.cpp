//===- LossPlot.cpp -------------------------------------------------------===//
#include "core/report/LossPlot.h"

#include "core/report/Svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace hypipe::report {

namespace {

constexpr double kWidth = 720, kHeight = 420;
constexpr double kLeft = 70, kRight = 24, kTop = 56, kBottom = 52;
constexpr const char *kRawColour = "#9ecae1", *kSmoothColour = "#08519c",
                     *kEntropyColour = "#d62728", *kResumeColour = "#555555",
                     *kValidationColour = "#ff7f0e";

/// The axes of `curve`'s plot: every step across, every loss and the
/// entropy up the side.
std::pair<Axis, Axis> axesOf(const LossCurve &curve) {
  double lo = curve.points.front().second, hi = lo;
  for (const auto &point : curve.points) {
    lo = std::min(lo, point.second);
    hi = std::max(hi, point.second);
  }
  if (curve.unigramEntropy) {
    lo = std::min(lo, *curve.unigramEntropy);
    hi = std::max(hi, *curve.unigramEntropy);
  }
  for (const auto &point : curve.validation) {
    lo = std::min(lo, point.second);
    hi = std::max(hi, point.second);
  }
  Axis x = axisCovering(double(curve.points.front().first),
                        double(curve.points.back().first), kLeft,
                        kWidth - kRight, 10, 1);
  Axis y = axisCovering(lo, hi, kHeight - kBottom, kTop, 10);
  return {x, y};
}

std::string polyline(const char *cls, const char *colour, double width,
                     const std::vector<std::pair<double, double>> &points) {
  std::string text;
  for (const auto &[x, y] : points)
    text += fmt::format("{:.1f},{:.1f} ", x, y);
  if (!text.empty())
    text.pop_back();
  return fmt::format("<polyline class=\"{}\" fill=\"none\" stroke=\"{}\" "
                     "stroke-width=\"{}\" stroke-linejoin=\"round\" "
                     "points=\"{}\"/>\n",
                     cls, colour, width, text);
}

/// The raw loss and, over it, the smoothed one.
void drawLines(std::string &out, const LossCurve &curve, const Axis &x,
               const Axis &y) {
  std::vector<double> losses;
  for (const auto &point : curve.points)
    losses.push_back(point.second);
  auto pixels = [&](const std::vector<double> &values) {
    std::vector<std::pair<double, double>> at;
    for (size_t i = 0; i < values.size(); ++i)
      at.push_back(
          {x.pixel(double(curve.points[i].first)), y.pixel(values[i])});
    return at;
  };
  out += polyline("loss", kRawColour, 1.2, pixels(losses));
  if (size_t half = smoothingHalfWindow(losses.size()))
    out +=
        polyline("smoothed", kSmoothColour, 2, pixels(smoothed(losses, half)));
  // The validation loss beside it, a dot at each evaluation (a few points).
  std::vector<std::pair<double, double>> evaluations;
  for (const auto &[step, loss] : curve.validation)
    evaluations.push_back({x.pixel(double(step)), y.pixel(loss)});
  if (!evaluations.empty())
    out += polyline("validation", kValidationColour, 2, evaluations);
  for (const auto &[px, py] : evaluations)
    out += fmt::format("<circle class=\"validation\" cx=\"{:.1f}\" "
                       "cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n",
                       px, py, kValidationColour);
}

/// The entropy across the plot and each resume down it, labelled.
void drawReferences(std::string &out, const LossCurve &curve, const Axis &x,
                    const Axis &y) {
  if (curve.unigramEntropy) {
    const double at = y.pixel(*curve.unigramEntropy);
    out += fmt::format(
        "<line class=\"entropy\" x1=\"{:.1f}\" y1=\"{:.2f}\" x2=\"{:.1f}\" "
        "y2=\"{:.2f}\" stroke=\"{}\" stroke-width=\"1.5\" "
        "stroke-dasharray=\"6 4\"/>\n"
        "<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"{}\" "
        "text-anchor=\"end\">unigram entropy {:.3f}</text>\n",
        x.fromPx, at, x.toPx, at, kEntropyColour, x.toPx - 4, at - 5,
        kEntropyColour, *curve.unigramEntropy);
  }
  for (int64_t step : curve.resumedFrom) {
    const double at = x.pixel(double(step));
    out += fmt::format(
        "<line class=\"resume\" x1=\"{:.2f}\" y1=\"{:.1f}\" x2=\"{:.2f}\" "
        "y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"1.2\" "
        "stroke-dasharray=\"2 3\"/>\n"
        "<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"{}\" font-size=\"10\">"
        "resumed from step {}</text>\n",
        at, y.toPx, at, y.fromPx, kResumeColour, at + 3, y.toPx + 11,
        kResumeColour, step);
  }
}

std::vector<LegendEntry> legendOf(const LossCurve &curve) {
  std::vector<LegendEntry> entries{{kRawColour, "loss of each step", true, ""}};
  if (size_t half = smoothingHalfWindow(curve.points.size()))
    entries.push_back({kSmoothColour,
                       fmt::format("mean of {} steps", 2 * half + 1), true,
                       ""});
  if (!curve.validation.empty())
    entries.push_back({kValidationColour, "validation loss", true, ""});
  if (curve.unigramEntropy)
    entries.push_back(
        {kEntropyColour, "unigram entropy of the data", true, "6 4"});
  if (!curve.resumedFrom.empty())
    entries.push_back({kResumeColour, "resumed", true, "2 3"});
  return entries;
}

} // namespace

size_t smoothingHalfWindow(size_t points) { return points / 40; }

std::vector<double> smoothed(const std::vector<double> &values,
                             size_t halfWindow) {
  std::vector<double> prefix(values.size() + 1, 0.0), out(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    prefix[i + 1] = prefix[i] + values[i];
  for (size_t i = 0; i < values.size(); ++i) {
    const size_t h = std::min({halfWindow, i, values.size() - 1 - i});
    out[i] = (prefix[i + h + 1] - prefix[i - h]) / double(2 * h + 1);
  }
  return out;
}

std::string lossSvg(const LossCurve &curve) {
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" "
      "height=\"{1}\" font-family=\"sans-serif\" font-size=\"11\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"20\" font-size=\"13\">{3}</text>\n",
      kWidth, kHeight, kLeft, xmlEscaped(curve.title));
  if (curve.points.empty())
    return out + "<text x=\"70\" y=\"80\">no steps logged</text>\n</svg>\n";
  drawLegend(out, legendOf(curve), kLeft, 40);
  auto [x, y] = axesOf(curve);
  drawYAxis(out, y, kLeft, kWidth - kRight, "loss (nats/token)");
  drawXAxis(out, x, kTop, kHeight - kBottom, "step");
  drawReferences(out, curve, x, y);
  drawLines(out, curve, x, y);
  return out + "</svg>\n";
}

} // namespace hypipe::report
