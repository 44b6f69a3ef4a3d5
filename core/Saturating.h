//===- Saturating.h - int64 sums and products that cannot wrap ------------===//
//
// The cost model adds FLOPs and bytes over a whole model, and a size check
// multiplies sizes a user gave: past 2^63 a plain sum would wrap (undefined
// behaviour, then a negative estimate that passes every bound). These stop at
// the top instead, so an estimate that large compares as what it is: too
// much.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_SATURATING_H
#define HYPIPE_CORE_SATURATING_H

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>

namespace hypipe {

inline constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

/// a + b, or the int64 bound it would pass.
inline int64_t saturatingAdd(int64_t a, int64_t b) {
  int64_t sum;
  if (!__builtin_add_overflow(a, b, &sum))
    return sum;
  return b > 0 ? kInt64Max : std::numeric_limits<int64_t>::min();
}

/// The product of non-negative `a` and `b`, or INT64_MAX past it.
inline int64_t saturatingMul(int64_t a, int64_t b) {
  int64_t product;
  return __builtin_mul_overflow(a, b, &product) ? kInt64Max : product;
}

/// The product of `factors`, or nullopt where it passes INT64_MAX.
inline std::optional<int64_t>
checkedProduct(std::initializer_list<int64_t> factors) {
  int64_t product = 1;
  for (int64_t f : factors)
    if (__builtin_mul_overflow(product, f, &product))
      return std::nullopt;
  return product;
}

/// `bytes` rounded up to an int64, or INT64_MAX where it does not fit.
inline int64_t saturatingCeil(double bytes) {
  // 2^63 is exact in a double; every double below it converts.
  return bytes >= 9223372036854775808.0
             ? kInt64Max
             : static_cast<int64_t>(std::ceil(bytes));
}

} // namespace hypipe

#endif
