//===- LossPlot.h - a run's loss curve as SVG -----------------------------===//
//
// `hypipe train` draws RUN/loss.svg from the run's JSON log: the loss of every
// step, a smoothed line over it, the validation loss of each evaluation, the
// unigram entropy of the data (the loss a model without context reaches) as a
// reference line, and a mark where the run resumed from a checkpoint; both axes
// have 1-2-5 ticks and gridlines.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_REPORT_LOSSPLOT_H
#define HYPIPE_CORE_REPORT_LOSSPLOT_H

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hypipe::report {

struct LossCurve {
  std::string title;
  std::vector<std::pair<int64_t, double>> points; ///< (step, loss), in order
  /// Of the training data's tokens, in nats; absent for packed samples.
  std::optional<double> unigramEntropy;
  /// The checkpoint steps the run resumed from, in order.
  std::vector<int64_t> resumedFrom;
  /// (step, validation loss) of the evaluations (--eval-interval), in order.
  std::vector<std::pair<int64_t, double>> validation;
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

/// The curve as an SVG picture. Elements a reader (or a test) looks for:
/// `polyline class="loss"` (every step), `polyline class="smoothed"`,
/// `polyline class="validation"` (with a `circle class="validation"` at each
/// evaluation), `line class="entropy"`, `line class="resume"` and the ticks
/// of Svg.h.
std::string lossSvg(const LossCurve &curve);

} // namespace hypipe::report

#endif
