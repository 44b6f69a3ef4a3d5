//===- Diagnostic.h - errors located in source text -----------------------===//
//
// The core's parsers of the pattern and layout languages report a `Problem`
// (core/Error.h): a message, an offset into the text they were given, and
// what to do about it. Whoever owns the text (the spec loader, the CLI) knows
// where it came from and renders it here, with LLVM's SourceMgr: file, line,
// column and a caret.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_FRONTEND_DIAGNOSTIC_H
#define HYPIPE_FRONTEND_DIAGNOSTIC_H

#include "core/Error.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/SMLoc.h"
#include "llvm/Support/SourceMgr.h"

#include <string>

namespace hypipe {

/// Prints `file:line:col: error: message`, the source line with a caret
/// under the offending text, and `help: ...`.
void printError(llvm::raw_ostream &os, const llvm::SourceMgr &sm,
                llvm::SMLoc loc, size_t length, llvm::StringRef message,
                llvm::StringRef help);

/// Renders `err` (located in `text`, which was given on the command line as
/// `what`) to `os`; an error without a location is printed as
/// `error: ...`.
void printTextError(llvm::raw_ostream &os, llvm::StringRef what,
                    llvm::StringRef text, const Error &err);

/// A core error as an `llvm::Error` for compiler code that propagates
/// LLVM errors: the message, then `help: ...` on its own line if there is
/// help.
llvm::Error toLlvmError(Error err);

} // namespace hypipe

#endif
