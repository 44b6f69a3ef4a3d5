//===- LossPlot.h - runs' loss curves as SVG ------------------------------===//
//
// `hypipe train` draws RUN/loss.svg from the run's JSON log: the loss of every
// step, a smoothed line over it, the unigram entropy of the data (the loss a
// model without context reaches) as a reference line, and a mark where the
// run resumed from a checkpoint, and the validation loss of each evaluation
// (a line with a dot at each); below it, when the log has them, the
// learning rate and the gradient norm of each step, in panels over the same
// steps. `hypipe plot RUN...` overlays several runs, one colour each. Every
// axis has 1-2-5 ticks and gridlines; --log-scale makes the loss and
// gradient-norm axes logarithmic.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_REPORT_LOSSPLOT_H
#define HYPIPE_CORE_REPORT_LOSSPLOT_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hypipe::report {

/// (step, value) pairs, in step order.
using StepValues = std::vector<std::pair<int64_t, double>>;

struct LossCurve {
  std::string title;
  StepValues points; ///< (step, loss), in order
  /// Each step's learning rate and gradient norm (empty: not drawn).
  StepValues learningRates, gradNorms;
  /// Of the training data's tokens, in nats; absent for packed samples.
  std::optional<double> unigramEntropy;
  /// The checkpoint steps the run resumed from, in order.
  std::vector<int64_t> resumedFrom;
  /// (step, validation loss) of each evaluation (--eval-interval), in order.
  StepValues validation;
};

/// How many points either side of a point the smoothed line averages for a
/// curve of `points` points: a window of about a twentieth of the curve,
/// none below 40 points.
size_t smoothingHalfWindow(size_t points);

/// The mean of `values` over a window of `halfWindow` values either side,
/// narrowed alike on both sides near the ends: the smoothed line starts and
/// ends on the data and does not lag behind it.
std::vector<double> smoothed(const std::vector<double> &values,
                             size_t halfWindow);

/// A run's curves from its JSON log (hypipe-run --json-log): the loss,
/// learning rate and gradient norm of each step, the unigram entropy and
/// the resumes the first record of each launch states, and the validation
/// loss of the steps evaluated. Lines that are not
/// JSON objects with a step and a loss are skipped.
LossCurve lossCurveOfLog(std::string_view jsonLines);

struct PlotOptions {
  /// Logarithmic loss and gradient-norm axes (values that are not positive
  /// are left out of them).
  bool logScale = false;
};

/// The curve as an SVG picture. Elements a reader (or a test) looks for:
/// each panel a `g class="panel-loss"` (`panel-lr`, `panel-grad-norm`)
/// holding the ticks of Svg.h, `polyline class="loss"` (every step),
/// `polyline class="smoothed"`, `line class="entropy"`, `line
/// class="resume"`, `polyline class="validation"` (with a `circle
/// class="validation"` at each evaluation), `polyline class="lr"`,
/// `polyline class="grad-norm"`.
std::string lossSvg(const LossCurve &curve, const PlotOptions &options = {});

/// Several runs in one picture, each run's lines in its own colour (its
/// smoothed loss and gradient norm where the run is long enough to smooth)
/// and named in the legend by its title.
std::string overlaySvg(const std::vector<LossCurve> &runs,
                       std::string_view title, const PlotOptions &options = {});

} // namespace hypipe::report

#endif
