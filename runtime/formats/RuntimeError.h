//===- RuntimeError.h - the runtime's errors ------------------------------===//
//
// What the runtime throws for a problem the user can fix: a message that is
// complete (what, where, and a `help:` line). Every reader of a file from
// elsewhere (formats/) throws these; hypipe-run prints them and exits 1.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_FORMATS_RUNTIMEERROR_H
#define HYPIPE_RUNTIME_FORMATS_RUNTIMEERROR_H

#include <stdexcept>

namespace hypipe::rt {

/// A user-facing runtime error: the message is complete (what, where, what
/// to do); tools print it and exit 1.
struct RuntimeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// An error every rank of the run raises at the same point with the same
/// message (a diverged loss, a failed checkpoint): rank 0 prints it and all
/// ranks exit together instead of aborting one another.
struct CollectiveError : RuntimeError {
  using RuntimeError::RuntimeError;
};

} // namespace hypipe::rt

#endif
