//===- LrSchedule.h - Megatron-LM's learning-rate schedule ----------------===//
//
// The learning rate as Megatron-LM's OptimizerParamScheduler computes it
// (megatron/core/optimizer_param_scheduler.py, get_lr): linear warm-up from
// 0 (--lr-warmup-init 0), then constant, linear, cosine, inverse-square-root
// or WSD (warmup-stable-decay) decay to min_lr. The compiler parses the
// style names from the spec and the runtime evaluates the schedule; both
// take them from here.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_MODEL_LRSCHEDULE_H
#define HYPIPE_CORE_MODEL_LRSCHEDULE_H

#include <cstdint>
#include <optional>
#include <string_view>

namespace hypipe {

/// Megatron's --lr-decay-style.
enum class LrDecayStyle { Constant, Linear, Cosine, InverseSquareRoot, Wsd };
inline constexpr LrDecayStyle kLrDecayStyles[] = {
    LrDecayStyle::Constant, LrDecayStyle::Linear, LrDecayStyle::Cosine,
    LrDecayStyle::InverseSquareRoot, LrDecayStyle::Wsd};
const char *lrDecayStyleName(LrDecayStyle style);
std::optional<LrDecayStyle> parseLrDecayStyle(std::string_view name);

/// Megatron's --lr-wsd-decay-style: the shape of WSD's final decay.
enum class WsdDecayStyle { Exponential, Linear, Cosine, MinusSqrt };
inline constexpr WsdDecayStyle kWsdDecayStyles[] = {
    WsdDecayStyle::Exponential, WsdDecayStyle::Linear, WsdDecayStyle::Cosine,
    WsdDecayStyle::MinusSqrt};
const char *wsdDecayStyleName(WsdDecayStyle style);
std::optional<WsdDecayStyle> parseWsdDecayStyle(std::string_view name);

/// One run's schedule, counted in samples as Megatron counts it (its
/// iterations times the global batch): the same curve over the steps for
/// every style but inverse-square-root without warm-up, whose rate starts
/// at max_lr over the square root of the samples taken (at least one), not
/// of the steps.
struct LrSchedule {
  LrDecayStyle style = LrDecayStyle::Cosine;
  double maxLr = 0, minLr = 0;
  /// Samples of linear warm-up from 0 (a fraction of decaySamples need not
  /// be whole, as with Megatron's --lr-warmup-fraction).
  double warmupSamples = 0;
  /// The sample count past which the rate is min_lr (not for constant).
  int64_t decaySamples = 1;
  /// WSD: the last samples of decaySamples over which the rate falls from
  /// max_lr to min_lr in `wsdStyle`.
  int64_t wsdDecaySamples = 0;
  WsdDecayStyle wsdStyle = WsdDecayStyle::Exponential;

  /// The rate after `samplesTaken` samples (Megatron's get_lr at
  /// num_steps): the update of step s (1-based) uses at((s - 1) x global
  /// batch), since Megatron advances its scheduler after each update.
  double at(int64_t samplesTaken) const;
};

} // namespace hypipe

#endif
