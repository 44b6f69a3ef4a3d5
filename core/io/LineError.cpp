//===- LineError.cpp - an error in one line of a data file ----------------===//

#include "core/io/LineError.h"

#include "core/io/Files.h"

#include <fmt/format.h>

#include <algorithm>

namespace hypipe::files {

std::string lineError(const std::string &path, int64_t lineNumber,
                      std::string_view line, size_t column,
                      std::string_view message, std::string_view help,
                      bool echo) {
  column = std::min(column, line.size());
  if (!echo)
    return fmt::format("{}:{}:{}: error: {}\nhelp: {}", path, lineNumber,
                       column + 1, message, help);
  // A short, printable excerpt around the column: a long line (a sample of
  // thousands of tokens) or a file that is not data at all is not echoed.
  const size_t from = line.size() > 60 && column > 30 ? column - 30 : 0;
  const std::string shown =
      printable(line.substr(from, std::min<size_t>(line.size() - from, 60)));
  const std::string prefix = from > 0 ? "..." : "";
  return fmt::format("{}:{}:{}: error: {}\n{}{}\n{}^\nhelp: {}", path,
                     lineNumber, column + 1, message, prefix, shown,
                     std::string(prefix.size() + column - from, ' '), help);
}

} // namespace hypipe::files
