//===- FileCheck.h - checksums and confined paths for files we read -------===//
//
// What the runtime checks before it trusts a file another process wrote:
// its checksum (XXH3-128, from libxxhash: a non-cryptographic hash chosen
// for speed on large checkpoints; it finds any flipped byte; it is an integrity
// check, not a signature) and that a name read from a file stays inside the
// directory it is meant to name something in. docs/security.md.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_FORMATS_FILECHECK_H
#define HYPIPE_RUNTIME_FORMATS_FILECHECK_H

#include "core/io/Files.h"

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hypipe::rt {

/// "xxh3-128:" and 32 lower-case hex digits.
std::string
checksumOf(const std::vector<std::pair<const void *, size_t>> &pieces);
inline std::string checksumOf(const void *data, size_t bytes) {
  return checksumOf({{data, bytes}});
}

/// The checksum of the bytes [offset, offset + bytes) of `path` (bytes = -1:
/// to the end). Throws RuntimeError if the file cannot be read whole.
std::string fileChecksum(const std::string &path, size_t offset = 0,
                         size_t bytes = size_t(-1));

/// Throws RuntimeError ("... is a directory, not a file" and `help`) when
/// `path` exists and is not a regular file; a missing file is the
/// caller's to report. Streams read a directory as an I/O exception.
void requireRegularFile(const std::string &path, const std::string &what,
                        const std::string &help);

/// Whether anything is at `path` (symbolic links followed), and whether it
/// is a directory.
bool pathExists(const std::string &path);
bool isDirectory(const std::string &path);

/// Whether `name` is one plain name (a single path component: not empty,
/// not "." or "..", no '/', no NUL or control character).
bool isPlainName(std::string_view name);

/// `dir`/`relative` if `relative` is a relative path of plain names whose
/// real location (symbolic links followed) lies inside `dir`'s; throws
/// RuntimeError naming `what`, `from` (the file that named it) and the
/// path otherwise. A missing target is allowed (the caller reports it).
std::string confinedPath(const std::string &dir, const std::string &relative,
                         const std::string &what, const std::string &from);

/// The bytes of `path` read through `bound` (core/io/Files.h); throws
/// RuntimeError naming the file and the bound otherwise.
std::string readFileBounded(const std::string &path, files::ReadBound bound);

/// Throws RuntimeError unless `output` may be written as a file
/// (files::checkFileOutput) and is none of `inputs` and inside none of them
/// (files::checkNotAnInput).
void requireOutputFile(const std::string &output, std::string_view what,
                       const std::vector<std::string> &inputs = {});

/// Throws RuntimeError unless `output` may be used as a directory
/// (files::checkDirectoryOutput) and is none of `inputs` and inside none of
/// them.
void requireOutputDirectory(const std::string &output, std::string_view what,
                            const std::vector<std::string> &inputs = {});

/// Throws RuntimeError with `err`'s message and help when it holds one.
void throwIfError(Error err);

} // namespace hypipe::rt

#endif
