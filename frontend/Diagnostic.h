//===- Diagnostic.h - errors located in source text -----------------------===//
//
// Parsers of the pattern and layout languages report a `SourceError`: a
// message, an offset into the text they were given, and what to do about it.
// Whoever owns the text (the spec loader, the CLI) knows where it came from
// and renders the error with file, line, column and a caret.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_FRONTEND_DIAGNOSTIC_H
#define HYPIPE_FRONTEND_DIAGNOSTIC_H

#include "llvm/Support/Error.h"
#include "llvm/Support/SMLoc.h"
#include "llvm/Support/SourceMgr.h"

#include <string>

namespace hypipe {

class SourceError : public llvm::ErrorInfo<SourceError> {
public:
  static char ID;

  SourceError(size_t offset, std::string message, std::string help,
              size_t length = 1)
      : offset(offset), length(length), message(std::move(message)),
        help(std::move(help)) {}

  void log(llvm::raw_ostream &os) const override { os << message; }
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }

  size_t offset; ///< 0-based byte offset into the parsed text.
  size_t length; ///< How many bytes to underline (at least 1).
  std::string message;
  std::string help;
};

inline llvm::Error sourceError(size_t offset, std::string message,
                               std::string help, size_t length = 1) {
  return llvm::make_error<SourceError>(offset, std::move(message),
                                       std::move(help), length);
}

/// Prints `file:line:col: error: message`, the source line with a caret
/// under the offending text, and `help: ...`.
void printError(llvm::raw_ostream &os, const llvm::SourceMgr &sm,
                llvm::SMLoc loc, size_t length, llvm::StringRef message,
                llvm::StringRef help);

/// Renders `err` (a `SourceError` located in `text`, which was given on the
/// command line as `what`) to `os`; any other error is printed as
/// `error: ...`. Consumes `err`.
void printTextError(llvm::raw_ostream &os, llvm::StringRef what,
                    llvm::StringRef text, llvm::Error err);

} // namespace hypipe

#endif
