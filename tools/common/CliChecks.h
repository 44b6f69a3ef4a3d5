//===- CliChecks.h - option checks that say the allowed values in words ---===//
//
// CLI11's PositiveNumber and NonNegativeNumber say "Value 0 not in range
// 0.000000 to 1797693..." with 300 digits. These say what is allowed:
// "--keep-last: must be a whole number, 1 or more (got '0')". Shared by
// hypipe and hypipe-run.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_TOOLS_COMMON_CLICHECKS_H
#define HYPIPE_TOOLS_COMMON_CLICHECKS_H

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace hypipe::cli {

/// `text` whole as a 64-bit whole number; nullopt for anything else (a
/// number past 64 bits included: never saturated to 2^63 - 1).
inline std::optional<long long> parseWhole(std::string_view text) {
  long long value = 0;
  auto [end, ec] =
      std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    return std::nullopt;
  return value;
}

/// `text` whole as a finite number; nullopt for anything else (NaN and the
/// infinities included).
inline std::optional<double> parseFinite(const std::string &text) {
  char *end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || !end || *end != '\0' || !std::isfinite(value))
    return std::nullopt;
  return value;
}

/// ", 1 or more", " from 1 to 65536": the allowed range in words.
inline std::string wholeRangeText(long long least,
                                  std::optional<long long> most) {
  return most ? fmt::format(" from {} to {}", least, *most)
              : fmt::format(", {} or more", least);
}

/// A whole number from `least` to `most` (none: any that fits 64 bits).
/// A number past 64 bits is named as given, not as the 2^63 - 1 that a
/// saturating conversion would make of it.
inline CLI::Validator wholeBetween(long long least,
                                   std::optional<long long> most) {
  return CLI::Validator(
      [least, most](std::string &text) -> std::string {
        std::optional<long long> value = parseWhole(text);
        if (value && *value >= least && (!most || *value <= *most))
          return std::string();
        return fmt::format("must be a whole number{} (got '{}')",
                           wholeRangeText(least, most), text);
      },
      most ? fmt::format("INT in [{}, {}]", least, *most)
           : fmt::format("INT >= {}", least));
}

/// Any whole number of 64 bits, for an option whose range a later check
/// says in its own words (the spec loader's bounds): CLI11's conversion
/// would make 10^23 into 2^63 - 1 and the later check name that.
inline CLI::Validator wholeNumber() {
  return CLI::Validator(
      [](std::string &text) -> std::string {
        if (parseWhole(text))
          return std::string();
        return fmt::format("must be a whole number that fits 64 bits (got "
                           "'{}')",
                           text);
      },
      "INT");
}

/// Any finite number, for an option whose range a later check says (the
/// spec loader's, as it refuses `lr: nan` in the file).
inline CLI::Validator finiteNumber() {
  return CLI::Validator(
      [](std::string &text) -> std::string {
        if (parseFinite(text))
          return std::string();
        return fmt::format("must be a finite number (got '{}')", text);
      },
      "NUMBER");
}

/// A whole number of at least `least`.
inline CLI::Validator wholeAtLeast(long long least) {
  return wholeBetween(least, std::nullopt);
}

/// A finite number above `least` (or at least it, `inclusive`) and at most
/// `most`: NaN, infinities and the 1e-300 that would make a time infinite
/// are refused with the range in words.
inline CLI::Validator numberBetween(double least, bool inclusive,
                                    std::optional<double> most) {
  std::string range =
      inclusive ? (most ? fmt::format("from {} to {}", least, *most)
                        : fmt::format("of {} or more", least))
                : fmt::format("above {}", least) +
                      (most ? fmt::format(" and at most {}", *most) : "");
  return CLI::Validator(
      [=](std::string &text) -> std::string {
        std::optional<double> value = parseFinite(text);
        const bool ok = value &&
                        (inclusive ? *value >= least : *value > least) &&
                        (!most || *value <= *most);
        if (!ok)
          return fmt::format("must be a number {} (got '{}')", range, text);
        return std::string();
      },
      "NUMBER " + range);
}

/// Steps A to B, both included, written `A-B` with 1 <= A <= B (the steps
/// `--trace-steps` traces); nullopt for anything else.
inline std::optional<std::pair<int64_t, int64_t>>
parseStepRange(std::string_view text) {
  const size_t dash = text.find('-');
  if (dash == std::string_view::npos)
    return std::nullopt;
  const std::optional<long long> first = parseWhole(text.substr(0, dash));
  const std::optional<long long> last = parseWhole(text.substr(dash + 1));
  if (!first || !last || *first < 1 || *last < *first)
    return std::nullopt;
  return std::pair<int64_t, int64_t>{*first, *last};
}

/// What parseStepRange reads.
inline CLI::Validator stepRange() {
  return CLI::Validator(
      [](std::string &text) -> std::string {
        if (parseStepRange(text))
          return std::string();
        return fmt::format("must be A-B, the steps A to B (both included, "
                           "1 <= A <= B; e.g. 10-20) (got '{}')",
                           text);
      },
      "A-B");
}

inline CLI::Validator positiveNumber() {
  return numberBetween(0, false, std::nullopt);
}
inline CLI::Validator nonNegativeNumber() {
  return numberBetween(0, true, std::nullopt);
}

} // namespace hypipe::cli

#endif
