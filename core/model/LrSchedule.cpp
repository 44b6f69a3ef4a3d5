//===- LrSchedule.cpp - Megatron-LM's learning-rate schedule --------------===//

#include "core/model/LrSchedule.h"

#include <algorithm>
#include <cmath>

namespace hypipe {

namespace {

/// The one of `kinds` whose name is `name`.
template <typename Enum, size_t N>
std::optional<Enum> parseName(const Enum (&kinds)[N],
                              const char *(*nameOf)(Enum),
                              std::string_view name) {
  for (Enum kind : kinds)
    if (name == nameOf(kind))
      return kind;
  return std::nullopt;
}

} // namespace

const char *lrDecayStyleName(LrDecayStyle style) {
  switch (style) {
  case LrDecayStyle::Constant:
    return "constant";
  case LrDecayStyle::Linear:
    return "linear";
  case LrDecayStyle::Cosine:
    return "cosine";
  case LrDecayStyle::InverseSquareRoot:
    return "inverse-square-root";
  case LrDecayStyle::Wsd:
    return "WSD";
  }
  return "cosine";
}

std::optional<LrDecayStyle> parseLrDecayStyle(std::string_view name) {
  return parseName(kLrDecayStyles, lrDecayStyleName, name);
}

const char *wsdDecayStyleName(WsdDecayStyle style) {
  switch (style) {
  case WsdDecayStyle::Exponential:
    return "exponential";
  case WsdDecayStyle::Linear:
    return "linear";
  case WsdDecayStyle::Cosine:
    return "cosine";
  case WsdDecayStyle::MinusSqrt:
    return "minus_sqrt";
  }
  return "exponential";
}

std::optional<WsdDecayStyle> parseWsdDecayStyle(std::string_view name) {
  return parseName(kWsdDecayStyles, wsdDecayStyleName, name);
}

namespace {

/// 1 at ratio 0 falling to 0 at ratio 1 (Megatron's cosine coefficient).
double cosineCoefficient(double ratio) {
  return 0.5 * (std::cos(M_PI * ratio) + 1.0);
}

/// WSD's coefficient `ratio` of the way through its final decay.
double wsdCoefficient(WsdDecayStyle style, double ratio) {
  switch (style) {
  case WsdDecayStyle::Linear:
    return 1.0 - ratio;
  case WsdDecayStyle::Cosine:
    return cosineCoefficient(ratio);
  case WsdDecayStyle::Exponential:
    return 2.0 * std::pow(0.5, ratio) - 1.0;
  case WsdDecayStyle::MinusSqrt:
    return 1.0 - std::sqrt(ratio);
  }
  return 1.0;
}

} // namespace

// The branches and their order are get_lr's: warm-up wins over every style,
// constant ignores decaySamples, and past them even inverse-square-root
// is min_lr.
double LrSchedule::at(int64_t samplesTaken) const {
  const double taken = double(samplesTaken);
  if (warmupSamples > 0 && taken <= warmupSamples)
    return maxLr * taken / warmupSamples;
  if (style == LrDecayStyle::Constant)
    return maxLr;
  if (samplesTaken > decaySamples)
    return minLr;
  if (style == LrDecayStyle::InverseSquareRoot)
    return std::max(minLr, maxLr * std::sqrt(std::max(warmupSamples, 1.0)) /
                               std::sqrt(std::max(taken, 1.0)));
  const double ratio =
      (taken - warmupSamples) / (double(decaySamples) - warmupSamples);
  double coefficient = 1.0;
  switch (style) {
  case LrDecayStyle::Linear:
    coefficient = 1.0 - ratio;
    break;
  case LrDecayStyle::Cosine:
    coefficient = cosineCoefficient(ratio);
    break;
  case LrDecayStyle::Wsd: {
    const int64_t annealStart = decaySamples - wsdDecaySamples;
    if (samplesTaken > annealStart)
      coefficient =
          wsdCoefficient(wsdStyle, double(samplesTaken - annealStart) /
                                       double(wsdDecaySamples));
    break;
  }
  case LrDecayStyle::Constant:
  case LrDecayStyle::InverseSquareRoot:
    break;
  }
  return minLr + coefficient * (maxLr - minLr);
}

} // namespace hypipe
