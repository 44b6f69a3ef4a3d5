//===- Bf16Test.cpp - float32 to bfloat16, against a second derivation ---===//
//
// core/numeric/Bf16.h rounds with the carry trick (add 0x7fff plus the last
// kept bit, drop 16 bits). The reference here derives the same rounding
// another way: the two bfloat16 neighbours of x (truncated, and one step
// away from zero), their exact distances to x in float64, the nearer one,
// the even one on a tie, and infinity past the largest finite bfloat16 by
// half a step (the value the next step would have, 2^128, counts as the
// upper neighbour). Every float32 whose upper half is any of the 2^16
// patterns, with lower halves around the ties, is checked.
//
//===----------------------------------------------------------------------===//
#include "core/numeric/Bf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace hypipe::bf16 {
namespace {

float floatOf(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

/// The bfloat16 value of `b`'s magnitude bits, where the pattern one past
/// the largest finite value stands for 2^128 (not infinity).
double magnitudeOf(uint32_t b) {
  if (b == 0x7f80u)
    return std::ldexp(1.0, 128);
  return double(floatOf(b << 16));
}

/// Round to nearest even by distances: the second derivation.
uint16_t reference(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const uint32_t sign = bits & 0x80000000u, magnitude = bits & 0x7fffffffu;
  const uint32_t low = magnitude >> 16, high = low + 1;
  const double value = std::fabs(double(x));
  const double below = value - magnitudeOf(low), above = magnitudeOf(high) - value;
  uint32_t pick = below < above ? low : above < below ? high : (low & 1u ? high : low);
  return uint16_t((sign >> 16) | pick);
}

TEST(Bf16, RoundsToNearestEvenAsTheDistancesSay) {
  const uint32_t lowers[] = {0x0000, 0x0001, 0x3fff, 0x7fff, 0x8000,
                             0x8001, 0xbfff, 0xc000, 0xffff};
  int64_t checked = 0;
  for (uint32_t upper = 0; upper < 0x10000u; ++upper) {
    if ((upper & 0x7f80u) == 0x7f80u)
      continue; // infinities and NaNs: below
    for (uint32_t lower : lowers) {
      const float x = floatOf(upper << 16 | lower);
      ASSERT_EQ(fromFloat(x), reference(x)) << std::hexfloat << x;
      ++checked;
    }
  }
  EXPECT_EQ(checked, int64_t(0x10000 - 2 * 0x80) * 9);
}

TEST(Bf16, KeepsInfinitiesAndNaNs) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(fromFloat(inf), 0x7f80u);
  EXPECT_EQ(fromFloat(-inf), 0xff80u);
  // Every NaN stays a NaN with its sign, including those whose payload
  // lies only in the 16 bits that are dropped.
  for (uint32_t payload : {0x000001u, 0x00ffffu, 0x400000u, 0x7fffffu}) {
    for (uint32_t sign : {0u, 0x80000000u}) {
      const float nan = floatOf(sign | 0x7f800000u | payload);
      ASSERT_TRUE(std::isnan(nan));
      const float back = toFloat(fromFloat(nan));
      EXPECT_TRUE(std::isnan(back)) << std::hex << payload;
      EXPECT_EQ(std::signbit(back), sign != 0);
    }
  }
}

TEST(Bf16, WidensExactlyAndRoundTrips) {
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    if ((b & 0x7f80u) == 0x7f80u && (b & 0x7fu))
      continue; // NaNs
    EXPECT_EQ(fromFloat(toFloat(uint16_t(b))), b);
  }
  EXPECT_EQ(round(1.0f + 1.0f / 256), 1.0f);       // a tie, to even
  EXPECT_EQ(round(1.0f + 3.0f / 256), 1.0f + 1.0f / 64); // a tie, to even
  EXPECT_EQ(round(3.4e38f), std::numeric_limits<float>::infinity());
}

} // namespace
} // namespace hypipe::bf16
