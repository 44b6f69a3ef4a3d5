//===- LineError.h - an error in one line of a data file ------------------===//
//
// `path:line:col: error: message`, a short excerpt of the line with a caret
// under the column, and the help: what a user needs to fix one line of a
// JSON Lines file, for the trainer's samples and `hypipe data prepare` alike.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_IO_LINEERROR_H
#define HYPIPE_CORE_IO_LINEERROR_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace hypipe::files {

/// The message for line `lineNumber` (1-based) of `path`, whose text (without
/// its newline) is `line`, at 0-based byte `column`. A long line is shown
/// as 60 bytes around the column; bytes that are not printable ASCII as '?'.
/// Without `echo` the line is not shown (a file whose bytes stay private).
/// No newline at the end.
std::string lineError(const std::string &path, int64_t lineNumber,
                      std::string_view line, size_t column,
                      std::string_view message, std::string_view help,
                      bool echo = true);

} // namespace hypipe::files

#endif
