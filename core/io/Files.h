//===- Files.h - reading and writing files that others share --------------===//
//
// Every file hypipe reads whole and every file it writes goes through here,
// so that the rules of docs/security.md ("Files read and written") hold at
// one place:
//
// - a file is read through a byte bound, whatever it is (a regular file, a
//   device, a FIFO): going past the bound is an error naming the file and
//   the bound, never an exhausted memory;
// - a file is written to a temporary file in its target's directory, synced
//   and renamed into place; a target that exists and is not a regular file
//   (a device, FIFO, socket, or a directory where a file is meant) is
//   refused, so `-o /dev/full` cannot replace a device node;
// - an output that is, or lies inside, one of its command's inputs is
//   refused, so no command overwrites what it reads.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_IO_FILES_H
#define HYPIPE_CORE_IO_FILES_H

#include "core/Error.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hypipe::files {

/// What a file is read as, and the most bytes hypipe reads of it.
struct ReadBound {
  std::string_view what; ///< "spec", "schedule CSV", ...
  uint64_t bytes;
  /// A stream (a FIFO, a pipe, a device) that sends nothing for this long
  /// ends the read with an error instead of a wait without end.
  int silenceMs = 30000;
};

inline constexpr uint64_t kMiB = uint64_t(1) << 20;
inline constexpr uint64_t kGiB = uint64_t(1) << 30;

// The bounds, stated in docs/security.md: each far above any real file of
// its kind and far below the memory of a machine that trains.
inline constexpr ReadBound kSpec{"spec", 4 * kMiB};
inline constexpr ReadBound kScheduleCsv{"schedule CSV", 256 * kMiB};
inline constexpr ReadBound kManifest{"artifact manifest", 256 * kMiB};
inline constexpr ReadBound kConfigJson{"config.json", 1 * kMiB};
inline constexpr ReadBound kMeasuredCosts{"measured-costs file", 1 * kMiB};
inline constexpr ReadBound kIndexJson{"checkpoint index", 64 * kMiB};
inline constexpr ReadBound kLatest{"checkpoint 'latest' file", 4096};
inline constexpr ReadBound kMockLengths{"mock lengths file", 64 * kMiB};
inline constexpr ReadBound kTrainingData{"training data", 1 * kGiB};
inline constexpr ReadBound kRunFile{"file of the run directory", 1 * kGiB};

/// The help of an error that says why a file cannot be opened or read;
/// callers that know where the path came from replace it.
inline constexpr std::string_view kReadHelp =
    "check the path and its permissions";

/// The bytes of `path`, read whole through `bound`. An error names the file
/// and the bound when it holds more, the reason when it cannot be read, or
/// the silence when a stream sends nothing for `bound.silenceMs`.
Expected<std::string> readBounded(const std::string &path, ReadBound bound);

/// Success if `path` may be written as a file: it does not exist, or it is a
/// regular file. A symbolic link (not followed: the kernel's protection of
/// links in shared directories would not apply to a rename through it), a
/// directory, device, FIFO or socket is refused with the path, what it is
/// and what to do. `what` names
/// the output in the message ("the merged checkpoint", "--json-log").
Error checkFileOutput(const std::string &path, std::string_view what);

/// Success if `path` may be used as an output directory: it does not exist,
/// or it is a directory (or a symbolic link to one).
Error checkDirectoryOutput(const std::string &path, std::string_view what);

/// Success if the directory `dir` may take a command's output, which
/// replaces every file `ours` accepts (an earlier output of the command): it
/// does not exist, is empty, or holds only such files. Another entry is
/// refused, naming it, so that no user's file is replaced or left among
/// the output. `what` names the output ("the export directory").
Error checkOutputDirectoryHoldsOnly(
    const std::string &dir, std::string_view what,
    const std::function<bool(const std::string &name)> &ours,
    std::string_view help);

/// Success unless `output` is one of `inputs` (same device and inode) or
/// lies inside one of them (inside its real path); with `replacedWhole`,
/// also unless an input lies inside `output` (a directory the command
/// replaces would take the input with it).
Error checkNotAnInput(const std::string &output, std::string_view what,
                      const std::vector<std::string> &inputs,
                      bool replacedWhole = false);

/// One output of a command, for checkOutputsApart.
struct Output {
  std::string path;
  std::string what; ///< "--costs-out", "the run's checkpoint directory"
};

/// Success unless one of `outputs` is another (same path, or same device and
/// inode) or lies inside another (a file in a directory that is an output
/// too): either would overwrite, or be removed with, what the other wrote.
/// Empty paths are skipped.
Error checkOutputsApart(const std::vector<Output> &outputs);

/// Success if the directory the file `path` is written in exists, so that a
/// missing one is found before a command's work, not when it writes.
Error checkOutputDirectoryExists(const std::string &path,
                                 std::string_view what);

/// Writes the concatenation of `pieces` to `path`: to a new temporary file in
/// its directory, synced, then renamed over `path` (and the directory
/// synced). `path` is first checked with checkFileOutput. A new file gets
/// the mode the umask gives; a replaced one keeps its mode. A failure
/// removes the temporary file and leaves whatever was at `path` untouched.
Error writeAtomically(
    const std::string &path, std::string_view what,
    const std::vector<std::pair<const void *, size_t>> &pieces);

inline Error writeAtomically(const std::string &path, std::string_view what,
                             std::string_view text) {
  return writeAtomically(path, what, {{text.data(), text.size()}});
}

/// Puts the directory `built` (made beside `target`, e.g. at
/// siblingTemporary(target)) in `target`'s place: atomically exchanged with
/// an existing `target`, whose old contents are then removed, or renamed
/// onto an absent one. On failure `built` is removed and `target` is
/// untouched.
Error replaceDirectory(const std::string &built, const std::string &target,
                       std::string_view what);

/// A name beside `path` (same directory) that no one else is using, for a
/// file or directory built there and renamed onto `path`.
std::string siblingTemporary(const std::string &path);

/// At most `limit` bytes of `text` to quote in a message: its first line,
/// every byte that is not printable ASCII shown as `\xNN`, and "..." when
/// anything was left out. What failed to parse is never echoed whole.
std::string excerpt(std::string_view text, size_t limit = 60);

/// `text` with every byte that is not printable ASCII shown as '?': one
/// character per byte, so that a caret under a column still points at it.
std::string printable(std::string_view text);

/// "12.0 MiB", "4.0 GiB", "4096 bytes": a byte count for messages.
std::string humanBytes(uint64_t bytes);

} // namespace hypipe::files

#endif
