//===- NumberFormat.h - numbers as people read them -----------------------===//
//
// Shared by the `hypipe` CLI and `hypipe-run` (header-only: the runtime links
// no LLVM, the CLI no runtime library).
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_EXEC_NUMBERFORMAT_H
#define HYPIPE_RUNTIME_EXEC_NUMBERFORMAT_H

#include <cstdint>
#include <string>

namespace hypipe {

/// 1234567 -> "1,234,567".
inline std::string withCommas(int64_t n) {
  std::string digits = std::to_string(n), out;
  size_t first = digits[0] == '-' ? 1 : 0;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > first && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}

} // namespace hypipe

#endif
