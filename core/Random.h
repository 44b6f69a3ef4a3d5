//===- Random.h - the counter-based random numbers of hypipe --------------===//
//
// Every random value hypipe draws (initial weights, data order, mock sample
// lengths) is a pure function of a seed and a counter, so it is the same on
// every rank, layout and machine. splitmix64 mixes; the helpers below turn
// its bits into floating-point draws.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_RANDOM_H
#define HYPIPE_CORE_RANDOM_H

#include <cmath>
#include <cstdint>

namespace hypipe {

/// splitmix64: the mixing function of every random stream here.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// Uniform in (0, 1) from the top 53 of `bits`.
inline double unitInterval(uint64_t bits) {
  return (double(bits >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/// Box-Muller: one standard normal from two uniforms in (0, 1).
inline double standardNormal(double u1, double u2) {
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

} // namespace hypipe

#endif
