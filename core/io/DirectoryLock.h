//===- DirectoryLock.h - one writer a directory ---------------------------===//
//
// A run directory (hypipe train) and a checkpoint directory (hypipe-run
// --save) each belong to one run at a time: two writers would replace each
// other's files and both exit 0. The writer holds DIR/.lock (flock) for its
// whole life; the lock goes with the process, even on kill -9, so a stale
// lock never blocks the next run.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_IO_DIRECTORYLOCK_H
#define HYPIPE_CORE_IO_DIRECTORYLOCK_H

#include "core/Error.h"

#include <string>
#include <string_view>

namespace hypipe::files {

/// Takes DIR/.lock for the life of this process (and of the children that
/// inherit it). When another process holds it, the error names `what`
/// ("the run directory", "the checkpoint directory (--save)"), who holds
/// it, and `help` says what to do instead.
Error lockDirectory(const std::string &dir, std::string_view what,
                    std::string_view help);

/// An error, naming `what` and who holds it, when a live process holds
/// DIR/.lock; success when no one does (or there is no lock file).
Error checkNotLocked(const std::string &dir, std::string_view what,
                     std::string_view help);

} // namespace hypipe::files

#endif
