//===- Svg.cpp ------------------------------------------------------------===//
#include "core/report/Svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace hypipe::report {

namespace {

constexpr const char *kGridColour = "#e2e2e2", *kAxisColour = "#333333";
/// The width of a character of the legend's 11 px sans-serif text.
constexpr double kLegendCharWidth = 5.9;

/// The next 1-2-5 step above `step`.
double nextNiceStep(double step) { return niceStep(1.5 * step, 1); }

} // namespace

std::string xmlEscaped(std::string_view text) {
  std::string out;
  for (char c : text)
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out += c;
    }
  return out;
}

double Axis::pixel(double value) const {
  return fromPx + (value - lo) / (hi - lo) * (toPx - fromPx);
}

std::string Axis::label(double value) const {
  if (logarithmic)
    return fmt::format("{:.3g}", std::pow(10.0, value));
  const int decimals = step >= 1 ? 0 : int(std::ceil(-std::log10(step) - 1e-9));
  // A tick at zero computed as a tiny negative number reads "0", not "-0".
  if (std::abs(value) < step * 1e-9)
    value = 0;
  return fmt::format("{:.{}f}", value, decimals);
}

double niceStep(double span, int mostIntervals, double minStep) {
  if (!(span > 0))
    return std::max(minStep, 1.0);
  const double least = span / std::max(1, mostIntervals);
  const double power = std::pow(10.0, std::floor(std::log10(least)));
  double step = 10 * power;
  for (double mantissa : {1.0, 2.0, 5.0})
    if (mantissa * power >= least * (1 - 1e-9)) {
      step = mantissa * power;
      break;
    }
  return std::max(step, minStep);
}

Axis axisCovering(double lo, double hi, double fromPx, double toPx,
                  int mostIntervals, double minStep) {
  // A range that is not finite (an edited log's 1e999) would never be
  // covered: draw [0, 1] instead.
  if (!std::isfinite(lo) || !std::isfinite(hi)) {
    lo = 0;
    hi = 1;
  }
  if (!(hi > lo)) {
    const double pad = std::max(0.05 * std::abs(lo), 0.5);
    lo -= pad;
    hi += pad;
  }
  Axis a{lo, hi, fromPx, toPx, niceStep(hi - lo, mostIntervals, minStep), {}};
  // Widening the range to the ticks outside it adds up to two intervals.
  double first = 0, last = 0;
  while (true) {
    first = std::floor(lo / a.step + 1e-9);
    last = std::ceil(hi / a.step - 1e-9);
    if (last - first <= std::max(1, mostIntervals))
      break;
    a.step = nextNiceStep(a.step);
  }
  a.lo = first * a.step;
  a.hi = last * a.step;
  for (double k = first; k <= last; ++k)
    a.ticks.push_back(k * a.step);
  return a;
}

Axis axisLogarithmic(double lo, double hi, double fromPx, double toPx,
                     int mostIntervals) {
  if (!(lo > 0) || !std::isfinite(lo) || !std::isfinite(hi) || !(hi > lo)) {
    const double at = lo > 0 && std::isfinite(lo) ? lo : 1;
    lo = at / 2;
    hi = at * 2;
  }
  std::vector<double> values;
  if (hi / lo >= 10) {
    const int first = int(std::floor(std::log10(lo))),
              last = int(std::ceil(std::log10(hi)));
    for (double mantissa : {1.0, 2.0, 5.0})
      for (int power = first; power <= last; ++power)
        values.push_back(mantissa * std::pow(10.0, power));
    std::sort(values.begin(), values.end());
    values.erase(std::remove_if(values.begin(), values.end(),
                                [&](double v) {
                                  return v < lo * (1 - 1e-9) ||
                                         v > hi * (1 + 1e-9);
                                }),
                 values.end());
    // Too many: the powers of ten alone.
    if (int(values.size()) > mostIntervals + 1)
      values.erase(std::remove_if(values.begin(), values.end(),
                                  [](double v) {
                                    const double power =
                                        std::round(std::log10(v));
                                    return std::abs(v - std::pow(10.0, power)) >
                                           1e-9 * v;
                                  }),
                   values.end());
  } else {
    const double step = niceStep(hi - lo, mostIntervals);
    for (double k = std::ceil(lo / step - 1e-9); k * step <= hi * (1 + 1e-12);
         ++k)
      values.push_back(k * step);
  }
  Axis a{std::log10(lo), std::log10(hi), fromPx, toPx, 1, {}, true};
  for (double v : values)
    a.ticks.push_back(std::log10(v));
  return a;
}

Axis axisWithin(double lo, double hi, double fromPx, double toPx,
                int mostIntervals) {
  if (!(hi > lo))
    hi = lo + 1;
  Axis a{lo, hi, fromPx, toPx, niceStep(hi - lo, mostIntervals), {}};
  for (double k = std::ceil(lo / a.step - 1e-9); k * a.step <= hi * (1 + 1e-12);
       ++k)
    a.ticks.push_back(k * a.step);
  return a;
}

void drawXAxis(std::string &out, const Axis &x, double gridTop, double axisY,
               std::string_view title) {
  for (double v : x.ticks)
    out +=
        fmt::format("<g class=\"xtick\" transform=\"translate({:.2f},0)\">"
                    "<line y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\"/>"
                    "<line y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\"/>"
                    "<text y=\"{:.1f}\" text-anchor=\"middle\">{}</text></g>\n",
                    x.pixel(v), gridTop, axisY, kGridColour, axisY, axisY + 4,
                    kAxisColour, axisY + 15, x.label(v));
  out += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" "
                     "y2=\"{:.1f}\" stroke=\"{}\"/>\n"
                     "<text x=\"{:.1f}\" y=\"{:.1f}\" "
                     "text-anchor=\"middle\">{}</text>\n",
                     x.fromPx, axisY, x.toPx, axisY, kAxisColour,
                     (x.fromPx + x.toPx) / 2, axisY + 30, xmlEscaped(title));
}

void drawYAxis(std::string &out, const Axis &y, double axisX, double gridRight,
               std::string_view title) {
  for (double v : y.ticks)
    out += fmt::format(
        "<g class=\"ytick\" transform=\"translate(0,{:.2f})\">"
        "<line x1=\"{:.1f}\" x2=\"{:.1f}\" stroke=\"{}\"/>"
        "<line x1=\"{:.1f}\" x2=\"{:.1f}\" stroke=\"{}\"/>"
        "<text x=\"{:.1f}\" y=\"4\" text-anchor=\"end\">{}</text></g>\n",
        y.pixel(v), axisX, gridRight, kGridColour, axisX - 4, axisX,
        kAxisColour, axisX - 6, y.label(v));
  out += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" "
                     "y2=\"{:.1f}\" stroke=\"{}\"/>\n"
                     "<text transform=\"translate(14,{:.1f}) rotate(-90)\" "
                     "text-anchor=\"middle\">{}</text>\n",
                     axisX, y.fromPx, axisX, y.toPx, kAxisColour,
                     (y.fromPx + y.toPx) / 2, xmlEscaped(title));
}

double drawLegend(std::string &out, const std::vector<LegendEntry> &entries,
                  double x, double y) {
  for (const LegendEntry &e : entries) {
    out += "<g class=\"legend\">";
    if (e.line)
      out += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" "
                         "y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"2\" "
                         "stroke-dasharray=\"{}\"/>",
                         x, y - 4, x + 16, y - 4, e.colour,
                         e.dash.empty() ? "none" : e.dash);
    else
      out += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"12\" "
                         "height=\"12\" fill=\"{}\" stroke=\"#bbbbbb\" "
                         "stroke-width=\"0.5\"/>",
                         x + 2, y - 10, e.colour);
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" "
                       "font-size=\"11\">{}</text></g>\n",
                       x + 20, y, xmlEscaped(e.text));
    x += 20 + kLegendCharWidth * double(e.text.size()) + 14;
  }
  return x;
}

} // namespace hypipe::report
