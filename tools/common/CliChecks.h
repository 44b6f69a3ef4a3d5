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

/// A whole number of at least `least`.
inline CLI::Validator wholeAtLeast(long long least) {
  return CLI::Validator(
      [least](std::string &text) -> std::string {
        long long value = 0;
        auto [end, ec] =
            std::from_chars(text.data(), text.data() + text.size(), value);
        if (ec != std::errc() || end != text.data() + text.size() ||
            value < least)
          return fmt::format("must be a whole number, {} or more (got '{}')",
                             least, text);
        return std::string();
      },
      fmt::format("INT >= {}", least));
}

/// A finite number above 0 (`strictly`) or of at least 0.
inline CLI::Validator numberAbove0(bool strictly) {
  return CLI::Validator(
      [strictly](std::string &text) -> std::string {
        char *end = nullptr;
        double value = std::strtod(text.c_str(), &end);
        bool ok = end && *end == '\0' && !text.empty() &&
                  std::isfinite(value) && (strictly ? value > 0 : value >= 0);
        if (!ok)
          return fmt::format("must be a number {} (got '{}')",
                             strictly ? "above 0" : "of 0 or more", text);
        return std::string();
      },
      strictly ? "NUMBER > 0" : "NUMBER >= 0");
}

/// Steps A to B, both included, written `A-B` with 1 <= A <= B (the steps
/// `--trace-steps` traces); nullopt for anything else.
inline std::optional<std::pair<int64_t, int64_t>>
parseStepRange(std::string_view text) {
  const size_t dash = text.find('-');
  if (dash == std::string_view::npos)
    return std::nullopt;
  auto whole = [](std::string_view digits, int64_t &value) {
    auto [end, ec] =
        std::from_chars(digits.data(), digits.data() + digits.size(), value);
    return !digits.empty() && ec == std::errc() &&
           end == digits.data() + digits.size();
  };
  int64_t first = 0, last = 0;
  if (!whole(text.substr(0, dash), first) ||
      !whole(text.substr(dash + 1), last) || first < 1 || last < first)
    return std::nullopt;
  return std::pair{first, last};
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

inline CLI::Validator positiveNumber() { return numberAbove0(true); }
inline CLI::Validator nonNegativeNumber() { return numberAbove0(false); }

} // namespace hypipe::cli

#endif
