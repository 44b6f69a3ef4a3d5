//===- SvgReading.h - reading values back off the SVG pictures ------------===//
//
// The pictures' tests read them as a person would: the ticks' labels give an
// axis's values, their positions its pixels, and every other element is
// mapped back through them. Regular expressions over the text suffice, as
// core/report/Svg.h writes one element per line in a fixed form.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_TEST_UNIT_SVGREADING_H
#define HYPIPE_TEST_UNIT_SVGREADING_H

#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <string>
#include <utility>
#include <vector>

namespace hypipe::testing {

/// Every match of `pattern` in `svg`, as its captured groups.
inline std::vector<std::vector<std::string>>
matches(const std::string &svg, const std::string &pattern) {
  std::vector<std::vector<std::string>> all;
  const std::regex re(pattern);
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re);
       it != std::sregex_iterator(); ++it) {
    std::vector<std::string> groups;
    for (size_t g = 1; g < it->size(); ++g)
      groups.push_back((*it)[g].str());
    all.push_back(groups);
  }
  return all;
}

/// The ticks of the `axis` ("x" or "y"): (pixel, the value its label reads).
inline std::vector<std::pair<double, double>> ticks(const std::string &svg,
                                                    const std::string &axis) {
  const std::string at = axis == "x" ? R"(translate\(([-0-9.]+),0\))"
                                     : R"(translate\(0,([-0-9.]+)\))";
  std::vector<std::pair<double, double>> out;
  for (const auto &m :
       matches(svg, "<g class=\"" + axis + "tick\" transform=\"" + at +
                        "\">.*?>([-0-9.]+)</text></g>"))
    out.push_back({std::stod(m[0]), std::stod(m[1])});
  return out;
}

/// The value at `pixel` on an axis, interpolated between its outer ticks.
inline double valueAt(const std::vector<std::pair<double, double>> &ticks,
                      double pixel) {
  const auto [p0, v0] = ticks.front();
  const auto [p1, v1] = ticks.back();
  return v0 + (pixel - p0) * (v1 - v0) / (p1 - p0);
}

/// Whether `step` is 1, 2 or 5 times a power of ten.
inline bool isOneTwoFive(double step) {
  const double mantissa = step / std::pow(10.0, std::floor(std::log10(step)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (std::abs(mantissa - m) < 1e-6)
      return true;
  return false;
}

/// Ticks a reader can use: at least two, evenly spaced by a 1-2-5 step
/// (in value and in pixels), the first at or below `lo`, the last at or
/// above `hi`.
inline void expectTicksCover(const std::vector<std::pair<double, double>> &t,
                             double lo, double hi) {
  ASSERT_GE(t.size(), 2u);
  const double step = t[1].second - t[0].second;
  const double pixels = t[1].first - t[0].first;
  EXPECT_TRUE(isOneTwoFive(step)) << "step " << step;
  for (size_t i = 1; i < t.size(); ++i) {
    EXPECT_NEAR(t[i].second - t[i - 1].second, step, step * 1e-6) << i;
    EXPECT_NEAR(t[i].first - t[i - 1].first, pixels, 0.02) << i;
  }
  EXPECT_LE(t.front().second, lo + step * 1e-6);
  EXPECT_GE(t.back().second, hi - step * 1e-6);
}

} // namespace hypipe::testing

#endif
