//===- LossPlot.cpp - runs' loss curves as SVG ----------------------------===//
#include "core/report/LossPlot.h"

#include "core/report/Svg.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <climits>
#include <cmath>
#include <iterator>

namespace hypipe::report {

namespace {

constexpr double kWidth = 720, kLossHeight = 420;
constexpr double kLeft = 70, kRight = 24, kTop = 56, kBottom = 52;
/// A panel under the loss: its gap above (the previous panel's step
/// labels) and its height.
constexpr double kPanelGap = 34, kPanelHeight = 120;
constexpr const char *kRawColour = "#9ecae1", *kSmoothColour = "#08519c",
                     *kEntropyColour = "#d62728", *kResumeColour = "#555555",
                     *kLrColour = "#2ca02c", *kGradNormColour = "#fdae6b",
                     *kGradNormSmoothColour = "#e6550d",
                     *kValidationColour = "#ff7f0e";
/// The runs' colours in an overlay (ColorBrewer's Dark2), then again.
constexpr const char *kRunColours[] = {"#1b9e77", "#d95f02", "#7570b3",
                                       "#e7298a", "#66a61e", "#e6ab02",
                                       "#a6761d", "#666666"};

std::string polyline(const std::string &cls, const std::string &colour,
                     double width,
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

/// The largest magnitude a plot draws: a diverged run's 1e308 is left out
/// as an infinite value is, so that an axis's span stays a finite number.
constexpr double kLargestDrawn = 1e300;

/// Whether a value can be drawn at all (finite, within kLargestDrawn).
bool inRange(double value) {
  return std::isfinite(value) && std::abs(value) <= kLargestDrawn;
}

/// `values` over a window of smoothingHalfWindow either side, of the values
/// in range (those out of it are drawn nowhere).
StepValues smoothedValues(const StepValues &values) {
  StepValues out;
  std::vector<double> ys;
  for (const auto &point : values)
    if (inRange(point.second)) {
      out.push_back(point);
      ys.push_back(point.second);
    }
  ys = smoothed(ys, smoothingHalfWindow(out.size()));
  for (size_t i = 0; i < out.size(); ++i)
    out[i].second = ys[i];
  return out;
}

/// One line of a panel.
struct Line {
  std::string cls, colour;
  double width = 1.2;
  StepValues points;
};

/// A plot over the steps: its lines, the y axis's title and scale, and
/// values its axis must also cover (the entropy's reference line).
struct Panel {
  std::string name, yTitle;
  bool logScale = false;
  std::vector<Line> lines;
  std::vector<double> alsoCovers;
};

/// The raw line of `values` and, when there are enough to smooth, the
/// smoothed one over it.
void addRawAndSmoothed(Panel &panel, const StepValues &values,
                       const std::string &cls, const char *rawColour,
                       const char *smoothColour) {
  panel.lines.push_back({cls, rawColour, 1.2, values});
  if (smoothingHalfWindow(values.size()))
    panel.lines.push_back({cls == "loss" ? "smoothed" : cls + "-smoothed",
                           smoothColour, 2, smoothedValues(values)});
}

/// The steps every panel shares: the first and last of any line.
Axis stepAxis(const std::vector<Panel> &panels) {
  int64_t first = INT64_MAX, last = INT64_MIN;
  for (const Panel &panel : panels)
    for (const Line &line : panel.lines)
      if (!line.points.empty()) {
        first = std::min(first, line.points.front().first);
        last = std::max(last, line.points.back().first);
      }
  if (first > last)
    first = last = 1;
  return axisCovering(double(first), double(last), kLeft, kWidth - kRight, 10,
                      1);
}

/// Whether the panel's y axis can draw `value`: in range, and above 0 on a
/// log scale.
bool drawable(const Panel &panel, double value) {
  return inRange(value) && (!panel.logScale || value > 0);
}

/// The panel's y axis over its values, from pixel row `bottom` up to `top`.
Axis valueAxis(const Panel &panel, double top, double bottom) {
  double lo = INFINITY, hi = -INFINITY;
  auto cover = [&](double v) {
    if (drawable(panel, v)) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  };
  for (const Line &line : panel.lines)
    for (const auto &point : line.points)
      cover(point.second);
  for (double v : panel.alsoCovers)
    cover(v);
  const int intervals = bottom - top > 200 ? 10 : 4;
  return panel.logScale ? axisLogarithmic(lo, hi, bottom, top, intervals)
                        : axisCovering(lo, hi, bottom, top, intervals);
}

/// Draws `panel` in rows [top, bottom]: its axes, gridlines and lines, in a
/// `g class="panel-NAME"`; returns its y axis. `stepTitle` labels the step
/// axis (only under the last panel).
Axis drawPanel(std::string &out, const Panel &panel, const Axis &x, double top,
               double bottom, std::string_view stepTitle) {
  out += fmt::format("<g class=\"panel-{}\">\n", panel.name);
  Axis y = valueAxis(panel, top, bottom);
  drawYAxis(out, y, kLeft, kWidth - kRight, panel.yTitle);
  drawXAxis(out, x, top, bottom, stepTitle);
  for (const Line &line : panel.lines) {
    std::vector<std::pair<double, double>> at;
    for (const auto &[step, value] : line.points)
      if (drawable(panel, value))
        at.push_back({x.pixel(double(step)), y.pixelOf(value)});
    out += polyline(line.cls, line.colour, line.width, at);
  }
  return y;
}

/// The entropy across the loss panel and each resume down it, labelled, and
/// a dot at each evaluation.
void drawReferences(std::string &out, const LossCurve &curve, const Axis &x,
                    const Axis &y, bool logScale) {
  if (curve.unigramEntropy && (!logScale || *curve.unigramEntropy > 0)) {
    const double at = y.pixelOf(*curve.unigramEntropy);
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
  // A dot at each evaluation on the validation line (a few points).
  for (const auto &[step, loss] : curve.validation)
    if (!logScale || loss > 0)
      out += fmt::format("<circle class=\"validation\" cx=\"{:.1f}\" "
                         "cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n",
                         x.pixel(double(step)), y.pixelOf(loss),
                         kValidationColour);
}

std::vector<LegendEntry> legendOf(const LossCurve &curve) {
  std::vector<LegendEntry> entries{{kRawColour, "loss of each step", true, ""}};
  if (size_t half = smoothingHalfWindow(curve.points.size()))
    entries.push_back({kSmoothColour,
                       fmt::format("mean of {} steps", 2 * half + 1), true,
                       ""});
  if (curve.unigramEntropy)
    entries.push_back(
        {kEntropyColour, "unigram entropy of the data", true, "6 4"});
  if (!curve.resumedFrom.empty())
    entries.push_back({kResumeColour, "resumed", true, "2 3"});
  if (!curve.validation.empty())
    entries.push_back({kValidationColour, "validation loss", true, ""});
  return entries;
}

std::string lossTitle(const PlotOptions &options) {
  return options.logScale ? "loss (nats/token, log scale)"
                          : "loss (nats/token)";
}

/// The learning-rate and gradient-norm panels of the runs that log them.
std::vector<Panel> panelsBelow(const PlotOptions &options) {
  std::vector<Panel> panels(2);
  panels[0].name = "lr";
  panels[0].yTitle = "learning rate";
  panels[1].name = "grad-norm";
  panels[1].yTitle = options.logScale ? "grad norm (log)" : "grad norm";
  panels[1].logScale = options.logScale;
  return panels;
}

/// The SVG of `panels` under `title` and `legend`: the first panel as tall
/// as the loss picture always was, each other one below it; a panel
/// without lines is left out. `afterFirst` draws over the first panel.
template <typename AfterFirst>
std::string picture(std::string_view title,
                    const std::vector<LegendEntry> &legend,
                    std::vector<Panel> panels, AfterFirst afterFirst) {
  panels.erase(std::remove_if(std::next(panels.begin()), panels.end(),
                              [](const Panel &p) {
                                return std::all_of(p.lines.begin(),
                                                   p.lines.end(),
                                                   [](const Line &l) {
                                                     return l.points.empty();
                                                   });
                              }),
               panels.end());
  const double height =
      kLossHeight + double(panels.size() - 1) * (kPanelGap + kPanelHeight);
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" "
      "height=\"{1}\" font-family=\"sans-serif\" font-size=\"11\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"20\" font-size=\"13\">{3}</text>\n",
      kWidth, height, kLeft, xmlEscaped(title));
  drawLegend(out, legend, kLeft, 40);
  const Axis x = stepAxis(panels);
  double top = kTop, bottom = kLossHeight - kBottom;
  for (size_t i = 0; i < panels.size(); ++i) {
    const bool last = i + 1 == panels.size();
    Axis y = drawPanel(out, panels[i], x, top, bottom, last ? "step" : "");
    if (i == 0)
      afterFirst(out, x, y);
    out += "</g>\n";
    top = bottom + kPanelGap;
    bottom = top + kPanelHeight;
  }
  return out + "</svg>\n";
}

} // namespace

size_t smoothingHalfWindow(size_t points) { return points / 40; }

std::vector<double> smoothed(const std::vector<double> &values,
                             size_t halfWindow) {
  // Each window's sum from the sums of a segment tree's nodes inside it
  // (node i sums nodes 2i and 2i + 1; the values are the leaves n..2n-1):
  // a window adds only its own values, so a diverged step's 1e300 leaves
  // the windows without it exact (a difference of prefix sums would cancel
  // them to 0).
  const size_t n = values.size();
  std::vector<double> tree(2 * n), out(n);
  std::copy(values.begin(), values.end(), tree.begin() + std::ptrdiff_t(n));
  for (size_t i = n; i-- > 1;)
    tree[i] = tree[2 * i] + tree[2 * i + 1];
  auto sum = [&](size_t from, size_t to) { // values [from, to)
    double s = 0;
    for (from += n, to += n; from < to; from /= 2, to /= 2) {
      if (from & 1)
        s += tree[from++];
      if (to & 1)
        s += tree[--to];
    }
    return s;
  };
  for (size_t i = 0; i < n; ++i) {
    const size_t h = std::min({halfWindow, i, n - 1 - i});
    out[i] = sum(i - h, i + h + 1) / double(2 * h + 1);
  }
  return out;
}

std::string lossSvg(const LossCurve &curve, const PlotOptions &options) {
  if (curve.points.empty())
    return picture(curve.title, {}, {Panel{"loss", lossTitle(options)}},
                   [](std::string &out, const Axis &, const Axis &) {
                     out += "<text x=\"70\" y=\"80\">no steps logged</text>\n";
                   });
  std::vector<Panel> panels{
      Panel{"loss", lossTitle(options), options.logScale}};
  addRawAndSmoothed(panels[0], curve.points, "loss", kRawColour, kSmoothColour);
  if (curve.unigramEntropy)
    panels[0].alsoCovers.push_back(*curve.unigramEntropy);
  if (!curve.validation.empty())
    panels[0].lines.push_back(
        {"validation", kValidationColour, 2, curve.validation});
  std::vector<Panel> below = panelsBelow(options);
  below[0].lines.push_back({"lr", kLrColour, 1.5, curve.learningRates});
  addRawAndSmoothed(below[1], curve.gradNorms, "grad-norm", kGradNormColour,
                    kGradNormSmoothColour);
  panels.insert(panels.end(), below.begin(), below.end());
  return picture(curve.title, legendOf(curve), panels,
                 [&](std::string &out, const Axis &x, const Axis &y) {
                   drawReferences(out, curve, x, y, options.logScale);
                 });
}

std::string overlaySvg(const std::vector<LossCurve> &runs,
                       std::string_view title, const PlotOptions &options) {
  std::vector<Panel> panels{
      Panel{"loss", lossTitle(options), options.logScale}};
  std::vector<Panel> below = panelsBelow(options);
  panels.insert(panels.end(), below.begin(), below.end());
  std::vector<LegendEntry> legend;
  for (size_t r = 0; r < runs.size(); ++r) {
    const std::string colour = kRunColours[r % std::size(kRunColours)];
    // Each run's trend: smoothed where there are enough steps to smooth.
    auto trend = [](const StepValues &v) {
      return smoothingHalfWindow(v.size()) ? smoothedValues(v) : v;
    };
    panels[0].lines.push_back({"loss", colour, 1.5, trend(runs[r].points)});
    panels[1].lines.push_back({"lr", colour, 1.5, runs[r].learningRates});
    panels[2].lines.push_back(
        {"grad-norm", colour, 1.5, trend(runs[r].gradNorms)});
    legend.push_back({colour, runs[r].title, true, ""});
  }
  return picture(title, legend, panels,
                 [](std::string &, const Axis &, const Axis &) {});
}

LossCurve lossCurveOfLog(std::string_view jsonLines) {
  LossCurve curve;
  size_t at = 0;
  while (at < jsonLines.size()) {
    size_t end = jsonLines.find('\n', at);
    if (end == std::string_view::npos)
      end = jsonLines.size();
    const nlohmann::json j =
        nlohmann::json::parse(jsonLines.substr(at, end - at), nullptr, false);
    at = end + 1;
    if (!j.is_object() || !j.contains("step") || !j.contains("loss") ||
        !j["step"].is_number_integer() || !j["loss"].is_number())
      continue;
    const int64_t step = j["step"].get<int64_t>();
    curve.points.push_back({step, j["loss"].get<double>()});
    if (j.contains("lr") && j["lr"].is_number())
      curve.learningRates.push_back({step, j["lr"].get<double>()});
    if (j.contains("grad_norm") && j["grad_norm"].is_number())
      curve.gradNorms.push_back({step, j["grad_norm"].get<double>()});
    // The first record of each launch says these (hypipe-run's log).
    if (j.contains("unigram_entropy") && j["unigram_entropy"].is_number())
      curve.unigramEntropy = j["unigram_entropy"].get<double>();
    if (j.contains("resumed") && j["resumed"] == true)
      curve.resumedFrom.push_back(step - 1);
    if (j.contains("validation_loss") && j["validation_loss"].is_number())
      curve.validation.push_back({step, j["validation_loss"].get<double>()});
  }
  return curve;
}

} // namespace hypipe::report
