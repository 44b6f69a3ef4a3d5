//===- MeasuredCosts.h - layer times measured by a run, for the planner ---===//
//
// `hypipe-run --costs-out FILE` (and `hypipe train --costs-out`) times every
// kernel call of the steps after the first and writes, per layer kind and
// pass (forward, input-gradient, weight-gradient), the mean seconds of one
// call and the cost model's FLOPs of that call at the run's shapes.
// `hypipe plan --costs FILE` and `hypipe explain --costs FILE` then cost a
// layer as its kind's measured seconds per FLOP times the cost model's FLOPs
// at the plan's shapes (a lookup without FLOPs, the embedding's forward,
// scales with the tokens instead), so the simulated step is in seconds.
// docs/plan.md says what this assumes.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_MODEL_MEASUREDCOSTS_H
#define HYPIPE_CORE_MODEL_MEASUREDCOSTS_H

#include "core/Error.h"
#include "core/model/Cluster.h"
#include "core/model/CostModel.h"
#include "core/model/LayerShapes.h"
#include "core/model/Precision.h"

#include <array>
#include <map>
#include <string>

namespace hypipe {

/// A kind's measured calls: per pass, mean seconds and FLOPs of one call.
struct KindTimes {
  std::array<double, 3> seconds{}, flops{};
};

struct MeasuredCosts {
  rt::Target target = rt::Target::Cpu;
  int64_t threads = 1;
  int64_t tokens = 0; ///< per microbatch, at the measured run's shapes
  TrainingPrecision dtype = TrainingPrecision::Fp32;
  /// By kind: "embedding", "mamba", "attention", "mlp", "moe", "head",
  /// "mtp" (an MTP depth's input and output together).
  std::map<std::string, KindTimes> kinds;
  /// The link between the measured run's ranks 0 and 1 (a run of two or
  /// more ranks): latency from 8-byte ping-pongs, bandwidth from 4 MiB ones.
  /// plan and explain time transfers and reductions on it unless --device
  /// names a row.
  std::optional<Link> link;
};

/// The kinds a run measures, in the order ranks exchange their sums: the
/// layer kinds' own names (layerKindName), an MTP depth's input and output
/// together as "mtp". A costs file names no other.
inline constexpr const char *kMeasuredKinds[] = {
    "embedding", "mamba", "attention", "mlp", "moe",
    "head",      "mtp",   "mla",       "dsa", "gdn"};

/// What a costs file's numbers may be: beyond these a plan's step is
/// infinite or not a number (`seconds: 1e308`). One call of one layer's pass
/// on one microbatch takes at most an hour and costs at most 2^63 FLOPs
/// (CostModel's bound at the size bounds); the tokens of a microbatch and
/// the threads are those a run may have (SizeBounds.h).
struct MeasuredBounds {
  static constexpr double kMostSeconds = 3600;
  /// A forward of less than a nanosecond, or a pass faster than 10^18
  /// FLOP/s (a thousand H100s' peak), would make tokens/s past 2^63.
  static constexpr double kLeastForwardSeconds = 1e-9;
  static constexpr double kMostFlopsPerSecond = 1e18;
  static constexpr double kMostFlops = 9.223372036854775807e18;
};

/// The measured kind of a partition item: its name ("embedding", a layer
/// symbol, "head") as a MeasuredCosts kind.
std::string measuredKindOf(const std::string &itemName);

std::string measuredCostsJson(const MeasuredCosts &costs);
/// Parses FILE's text (`what` names it in errors): a cpu run's (the only
/// target whose layers are timed), fp32 or bf16, kinds of kMeasuredKinds,
/// every number within MeasuredBounds and a forward that takes time, the
/// link within ClusterBounds.
Expected<MeasuredCosts> parseMeasuredCosts(const std::string &text,
                                           const std::string &what);

/// parseMeasuredCosts of the file at `path` (read through its bound).
Expected<MeasuredCosts> readMeasuredCosts(const std::string &path);

/// Seconds of one call of `kind`'s pass `pass` (0 forward, 1 input
/// gradient, 2 weight gradient) that costs `flops` over `tokens` tokens:
/// the measured seconds scaled by the FLOPs (or, where the measured call
/// had none, by the tokens). A pass measured empty but asked for FLOPs (a
/// linear cross-entropy's weight pass, which its input gradient took, asked
/// for a native head's) runs at the kind's forward rate. nullopt when
/// `kind` was not measured.
std::optional<double> measuredSeconds(const MeasuredCosts &costs,
                                      const std::string &kind, int pass,
                                      double flops, int64_t tokens);

} // namespace hypipe

#endif
