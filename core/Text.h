//===- Text.h - the few string operations the core needs ------------------===//
//
// The core's parsers work on `std::string_view`; these are the splitting,
// trimming and number parsing they share (the compiler side uses LLVM's
// StringRef for the same, which the core cannot link).
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_TEXT_H
#define HYPIPE_CORE_TEXT_H

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hypipe::text {

/// `text` split at every `separator`; n separators give n+1 pieces.
inline std::vector<std::string_view> split(std::string_view text,
                                           char separator) {
  std::vector<std::string_view> pieces;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i)
    if (i == text.size() || text[i] == separator) {
      pieces.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  return pieces;
}

inline bool isSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
         c == '\f';
}

inline bool isDigit(char c) { return c >= '0' && c <= '9'; }

inline std::string_view trim(std::string_view text) {
  while (!text.empty() && isSpace(text.front()))
    text.remove_prefix(1);
  while (!text.empty() && isSpace(text.back()))
    text.remove_suffix(1);
  return text;
}

/// Parses all of `text` as a decimal integer; false if it is not one.
inline bool parseInt(std::string_view text, int64_t &value) {
  if (text.empty())
    return false;
  auto [end, ec] =
      std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size();
}

/// Parses all of `text` as a floating-point number; false if it is not one.
inline bool parseDouble(std::string_view text, double &value) {
  std::string s(text);
  if (s.empty())
    return false;
  char *end = nullptr;
  value = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

inline bool consumeFront(std::string_view &text, std::string_view prefix) {
  if (text.substr(0, prefix.size()) != prefix)
    return false;
  text.remove_prefix(prefix.size());
  return true;
}

template <typename Range>
std::string join(const Range &items, std::string_view separator) {
  std::string out;
  bool first = true;
  for (const auto &item : items) {
    if (!first)
      out += separator;
    out += item;
    first = false;
  }
  return out;
}

} // namespace hypipe::text

#endif
