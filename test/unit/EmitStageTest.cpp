//===- EmitStageTest.cpp - user text in generated code is a literal -------===//
//
// A spec is data: whatever text the emitter puts into a stage's source is a
// C++ string literal holding exactly that text, on one line, so no name can
// end a comment, open a directive or form a trigraph (docs/security.md).
//
//===----------------------------------------------------------------------===//
#include "targets/cpu/EmitStage.h"

#include <gtest/gtest.h>

#include <cctype>

namespace hypipe::cpu {
namespace {

/// Decodes a C++ string literal of the escapes the standard defines for
/// '"', '\\' and octal digits; fails the test on anything else.
std::string decode(const std::string &literal) {
  EXPECT_GE(literal.size(), 2u);
  EXPECT_EQ(literal.front(), '"');
  EXPECT_EQ(literal.back(), '"');
  std::string out;
  for (size_t i = 1; i + 1 < literal.size(); ++i) {
    char c = literal[i];
    EXPECT_NE(c, '"') << "unescaped quote at " << i;
    if (c != '\\') {
      out += c;
      continue;
    }
    char next = literal[++i];
    if (next == '"' || next == '\\') {
      out += next;
      continue;
    }
    int value = 0, digits = 0;
    while (digits < 3 && literal[i] >= '0' && literal[i] <= '7')
      value = value * 8 + (literal[i++] - '0'), ++digits;
    EXPECT_EQ(digits, 3) << "bad escape at " << i;
    --i;
    out += char(value);
  }
  return out;
}

TEST(CppStringLiteral, HoldsHostileTextExactlyOnOneLine) {
  const std::string hostile[] = {
      "hybrid-tiny",
      "tiny\n#include <cstdlib>\nstatic int pwn = (std::system(\"echo "
      "PWNED\"), 0);\n//",
      "back\\slash at the end\\",
      "quote \" and */ and ??/ trigraph",
      std::string("nul\0byte", 8),
      "\r\t\x7f\x1b[31m",
      "caf\xc3\xa9 \xe2\x80\xa8 line separator",
  };
  for (const std::string &text : hostile) {
    std::string literal = cppStringLiteral(text);
    for (unsigned char c : literal) {
      EXPECT_TRUE(c >= 0x20 && c < 0x7f) << "byte " << int(c) << " in "
                                         << literal;
    }
    EXPECT_EQ(literal.find("??"), std::string::npos) << literal;
    EXPECT_EQ(decode(literal), text) << literal;
  }
}

} // namespace
} // namespace hypipe::cpu
