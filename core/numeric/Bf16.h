//===- Bf16.h - bfloat16 as Megatron-LM and PyTorch round to it -----------===//
//
// bfloat16 is float32's sign, its 8 exponent bits and the top 7 of its 23
// mantissa bits. A float32 becomes the nearest bfloat16, ties to the one
// with an even last mantissa bit (round to nearest even: what PyTorch's
// `.to(torch.bfloat16)`, cuBLAS and the tensor cores do); infinities stay
// infinite, every NaN stays a NaN (quiet, with its sign), and a value past
// bfloat16's largest finite one rounds to infinity as IEEE says. Host code
// (a CUDA kernel uses __float2bfloat16_rn, which rounds the same way).
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_NUMERIC_BF16_H
#define HYPIPE_CORE_NUMERIC_BF16_H

#include <cstdint>
#include <cstring>

namespace hypipe::bf16 {

/// The bfloat16 bits nearest to `x` (round to nearest even).
inline uint16_t fromFloat(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0)
    return uint16_t((bits >> 16) | 0x0040u); // NaN: quiet, never infinity
  const uint32_t lsb = (bits >> 16) & 1u;
  return uint16_t((bits + 0x7fffu + lsb) >> 16);
}

/// The float32 that bfloat16 `b` is (exact: a widening).
inline float toFloat(uint16_t b) {
  const uint32_t bits = uint32_t(b) << 16;
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

/// `x` rounded to the nearest bfloat16 and widened back to float32.
inline float round(float x) { return toFloat(fromFloat(x)); }

} // namespace hypipe::bf16

#endif
