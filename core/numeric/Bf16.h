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

/// `x` rounded to the nearest bfloat16, as a float32 (its low 16 bits 0).
/// Written without a branch, so that loops over arrays vectorise (the CPU
/// kernels' bf16 emulation rounds every activation with it).
inline float round(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const uint32_t lsb = (bits >> 16) & 1u;
  const uint32_t nearest = (bits + 0x7fffu + lsb) & 0xffff0000u;
  const uint32_t quietNan = (bits | 0x00400000u) & 0xffff0000u;
  const uint32_t out = (bits & 0x7fffffffu) > 0x7f800000u ? quietNan : nearest;
  float y;
  std::memcpy(&y, &out, sizeof y);
  return y;
}

/// The bfloat16 bits nearest to `x` (round to nearest even).
inline uint16_t fromFloat(float x) {
  const float r = round(x);
  uint32_t bits;
  std::memcpy(&bits, &r, sizeof bits);
  return uint16_t(bits >> 16);
}

/// The float32 that bfloat16 `b` is (exact: a widening).
inline float toFloat(uint16_t b) {
  const uint32_t bits = uint32_t(b) << 16;
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

} // namespace hypipe::bf16

#endif
