//===- Svg.h - what the SVG pictures share: text, axes, legends -----------===//
//
// The loss curve and the schedule timeline are written as SVG text. Both read
// values off axes whose ticks fall on 1, 2 or 5 times a power of ten, each
// tick a gridline across the plot; each tick is one `<g class="xtick">` (or
// "ytick") translated to its position and holding its label, so that a test
// can map pixels back to values.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_REPORT_SVG_H
#define HYPIPE_CORE_REPORT_SVG_H

#include <cmath>
#include <string>
#include <string_view>
#include <vector>

namespace hypipe::report {

/// `text` with `&`, `<`, `>` and `"` written as XML entities.
std::string xmlEscaped(std::string_view text);

/// A linear axis: the values [lo, hi] drawn from pixel `fromPx` to `toPx`
/// (toPx < fromPx for a y axis, which grows upwards), with ticks every `step`.
/// A logarithmic one is linear in log10 of the values: lo, hi and the ticks
/// are in log10 units.
struct Axis {
  double lo = 0, hi = 1;
  double fromPx = 0, toPx = 1;
  double step = 1;
  std::vector<double> ticks;
  bool logarithmic = false;

  /// The pixel of `value` in the axis's units (a tick's).
  double pixel(double value) const;
  /// The pixel of a data value (its log10 on a logarithmic axis).
  double pixelOf(double value) const {
    return pixel(logarithmic ? std::log10(value) : value);
  }
  /// `value` with as many decimals as the step has; on a logarithmic axis
  /// the value it stands for, to three digits.
  std::string label(double value) const;
};

/// The smallest step of 1, 2 or 5 times a power of ten (at least `minStep`)
/// that cuts `span` into at most `mostIntervals` intervals.
double niceStep(double span, int mostIntervals, double minStep = 0);

/// An axis over [lo, hi] widened to the ticks around it, with at most
/// `mostIntervals` intervals between them.
Axis axisCovering(double lo, double hi, double fromPx, double toPx,
                  int mostIntervals, double minStep = 0);

/// A logarithmic axis over [lo, hi] (both positive): ticks at 1, 2 and 5
/// times the powers of ten inside (the powers alone when those are too
/// many), or at a 1-2-5 step when the range spans less than a decade.
Axis axisLogarithmic(double lo, double hi, double fromPx, double toPx,
                     int mostIntervals);

/// An axis over exactly [lo, hi] whose ticks are the multiples of the step
/// inside it.
Axis axisWithin(double lo, double hi, double fromPx, double toPx,
                int mostIntervals);

/// The x axis at pixel row `axisY`: a gridline from `gridTop` down to it, a
/// tick mark and a label under it for every tick, and `title` below.
void drawXAxis(std::string &out, const Axis &x, double gridTop, double axisY,
               std::string_view title);

/// The y axis at pixel column `axisX`: a gridline across to `gridRight`, a
/// tick mark and a label left of it for every tick, and `title` along it.
void drawYAxis(std::string &out, const Axis &y, double axisX, double gridRight,
               std::string_view title);

/// One entry of a legend: a swatch (a filled square, or a short line when
/// `line`, dashed as `dash` says) and its text.
struct LegendEntry {
  std::string colour, text;
  bool line = false;
  std::string dash; ///< stroke-dasharray of a line swatch
};

/// The entries in a row starting at (x, y); returns the x after the last.
double drawLegend(std::string &out, const std::vector<LegendEntry> &entries,
                  double x, double y);

} // namespace hypipe::report

#endif
