//===- Files.cpp - reading and writing files that others share ------------===//

#include "core/io/Files.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

namespace hypipe::files {
namespace {

/// Closes a descriptor when it goes out of scope.
struct Descriptor {
  int fd = -1;
  explicit Descriptor(int fd) : fd(fd) {}
  Descriptor(const Descriptor &) = delete;
  ~Descriptor() {
    if (fd >= 0)
      ::close(fd);
  }
};

/// "a directory", "a character device", ...: what a non-regular file is.
const char *kindOf(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

std::string directoryOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string baseNameOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

/// The real path of `path`: its longest existing prefix with symbolic
/// links resolved, then the rest ("" when even that fails).
std::string realPathOf(const std::string &path) {
  std::error_code ec;
  std::filesystem::path real = std::filesystem::weakly_canonical(
      std::filesystem::absolute(path, ec), ec);
  if (ec)
    return std::string();
  std::string r = real.string();
  while (r.size() > 1 && r.back() == '/')
    r.pop_back();
  return r;
}

/// True if `inner` is `outer` or lies inside it (both real paths).
bool isInside(const std::string &inner, const std::string &outer) {
  if (inner.empty() || outer.empty())
    return false;
  if (inner == outer || outer == "/")
    return true;
  return inner.size() > outer.size() &&
         inner.compare(0, outer.size(), outer) == 0 &&
         inner[outer.size()] == '/';
}

/// True if both paths exist and name the same file (a hard link counts).
bool sameFile(const std::string &a, const std::string &b) {
  struct stat sa, sb;
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 &&
         sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

Error readError(const std::string &path, ReadBound bound, int err) {
  return Error(Problem{fmt::format("cannot read {} '{}': {}", bound.what, path,
                                   std::strerror(err)),
                       std::string(kReadHelp), std::nullopt, 1});
}

Error tooLarge(const std::string &path, ReadBound bound) {
  return Error(Problem{
      fmt::format("{} '{}' is larger than {}, the most hypipe reads of a {}",
                  bound.what, path, humanBytes(bound.bytes), bound.what),
      "check that the path names the file you meant (a device or a stream "
      "has no end); the bounds are in docs/security.md",
      std::nullopt, 1});
}

/// Waits until `fd` (a stream) has bytes or its end, at most
/// `bound.silenceMs`.
Error awaitStream(int fd, const std::string &path, ReadBound bound) {
  struct pollfd p = {fd, POLLIN, 0};
  int ready;
  do
    ready = ::poll(&p, 1, bound.silenceMs);
  while (ready < 0 && errno == EINTR);
  if (ready < 0)
    return readError(path, bound, errno);
  if (ready == 0)
    return Error(Problem{
        fmt::format("{} '{}' sent nothing for {} s: it is a stream whose "
                    "writer is silent",
                    bound.what, path, bound.silenceMs / 1000.0),
        "check that the path names the file you meant, or that whatever "
        "writes it is running and finishes",
        std::nullopt, 1});
  return Error::success();
}

/// Appends all of `fd` to `out`, up to one byte more than `bound.bytes`.
/// A stream's `fd` is non-blocking: a read with nothing to give waits for
/// the stream (awaitStream), whose silence ends it; one without a writer
/// reads its end.
Error readAll(int fd, const std::string &path, ReadBound bound,
              std::string &out) {
  char chunk[1 << 16];
  while (out.size() <= bound.bytes) {
    size_t want =
        std::min<uint64_t>(sizeof chunk, bound.bytes + 1 - out.size());
    ssize_t n = ::read(fd, chunk, want);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (auto err = awaitStream(fd, path, bound))
        return err;
      continue;
    }
    if (n < 0)
      return readError(path, bound, errno);
    if (n == 0)
      return Error::success();
    out.append(chunk, size_t(n));
  }
  return tooLarge(path, bound);
}

/// Writes `pieces` to `fd` and syncs it: 0, or the errno of the failure.
int writeAll(int fd,
             const std::vector<std::pair<const void *, size_t>> &pieces) {
  for (auto [p, n] : pieces) {
    const char *c = static_cast<const char *>(p);
    while (n > 0) {
      ssize_t w = ::write(fd, c, n);
      if (w < 0 && errno == EINTR)
        continue;
      if (w < 0)
        return errno;
      c += w;
      n -= size_t(w);
    }
  }
  return ::fsync(fd) == 0 ? 0 : errno;
}

} // namespace

Expected<std::string> readBounded(const std::string &path, ReadBound bound) {
  // O_NONBLOCK so that opening a FIFO nobody writes does not hang.
  Descriptor file(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (file.fd < 0)
    return readError(path, bound, errno);
  struct stat st;
  if (::fstat(file.fd, &st) != 0)
    return readError(path, bound, errno);
  if (S_ISDIR(st.st_mode))
    return Error(Problem{
        fmt::format("cannot read {} '{}': it is a directory", bound.what, path),
        fmt::format("name the {} file itself", bound.what), std::nullopt, 1});
  if (S_ISREG(st.st_mode) && uint64_t(st.st_size) > bound.bytes)
    return tooLarge(path, bound);
  // A regular file reads blocking; a stream stays non-blocking, so that a
  // silent writer ends the read (readAll).
  if (S_ISREG(st.st_mode))
    ::fcntl(file.fd, F_SETFL, ::fcntl(file.fd, F_GETFL) & ~O_NONBLOCK);
  std::string text;
  if (S_ISREG(st.st_mode))
    text.reserve(size_t(st.st_size));
  if (auto err = readAll(file.fd, path, bound, text))
    return err;
  return text;
}

Error checkFileOutput(const std::string &path, std::string_view what) {
  struct stat st;
  if (path.empty())
    return Error(Problem{fmt::format("{} names no file", what),
                         "give a file path", std::nullopt, 1});
  if (::lstat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode))
    return Error::success();
  // A link is not followed: the kernel's protection of links in shared
  // directories (fs.protected_symlinks) would not apply to a rename onto
  // the file it names, and replacing the link would lose it.
  if (S_ISLNK(st.st_mode))
    return Error(
        Problem{fmt::format("{} '{}' is a symbolic link, which hypipe does not "
                            "write through",
                            what, path),
                "name the file itself", std::nullopt, 1});
  return Error(Problem{
      fmt::format("{} '{}' is {}, not a file hypipe may replace", what, path,
                  kindOf(st.st_mode)),
      S_ISDIR(st.st_mode)
          ? std::string("name a file, e.g. a path inside that directory")
          : std::string("name a regular file (hypipe writes a new file and "
                        "renames it into place, which would replace this "
                        "one)"),
      std::nullopt, 1});
}

Error checkDirectoryOutput(const std::string &path, std::string_view what) {
  struct stat st;
  if (path.empty())
    return Error(Problem{fmt::format("{} names no directory", what),
                         "give a directory path", std::nullopt, 1});
  if (::stat(path.c_str(), &st) != 0 || S_ISDIR(st.st_mode))
    return Error::success();
  return Error(Problem{
      fmt::format("{} '{}' is {}, not a directory", what, path,
                  S_ISREG(st.st_mode) ? "a file" : kindOf(st.st_mode)),
      "name a directory, or a path where one may be created", std::nullopt, 1});
}

Error checkOutputDirectoryHoldsOnly(
    const std::string &dir, std::string_view what,
    const std::function<bool(const std::string &name)> &ours,
    std::string_view help) {
  if (auto err = checkDirectoryOutput(dir, what))
    return err;
  std::error_code ec;
  std::vector<std::string> others;
  for (const auto &entry : std::filesystem::directory_iterator(dir, ec))
    if (std::string name = entry.path().filename().string(); !ours(name))
      others.push_back(name);
  if (others.empty())
    return Error::success();
  std::sort(others.begin(), others.end());
  return Error(Problem{
      fmt::format("{} '{}' holds '{}'{}, which hypipe did not write there: "
                  "the output would be written among other files",
                  what, dir, others[0],
                  others.size() > 1
                      ? fmt::format(" and {} more", others.size() - 1)
                      : std::string()),
      std::string(help), std::nullopt, 1});
}

Error checkNotAnInput(const std::string &output, std::string_view what,
                      const std::vector<std::string> &inputs,
                      bool replacedWhole) {
  const std::string out = realPathOf(output);
  for (const std::string &input : inputs) {
    const std::string in = realPathOf(input);
    bool same = sameFile(output, input);
    if (same || isInside(out, in))
      return Error(Problem{
          fmt::format("{} '{}' is {}the input '{}': writing it would "
                      "destroy what the command reads",
                      what, output, same || out == in ? "" : "inside ", input),
          "write the output somewhere else", std::nullopt, 1});
    if (replacedWhole && isInside(in, out))
      return Error(
          Problem{fmt::format("{} '{}' holds the input '{}': replacing the "
                              "directory would delete it",
                              what, output, input),
                  "write the output somewhere else", std::nullopt, 1});
  }
  return Error::success();
}

Error checkOutputsApart(const std::vector<Output> &outputs) {
  for (size_t i = 0; i < outputs.size(); ++i)
    for (size_t j = 0; j < outputs.size(); ++j) {
      const Output &a = outputs[i], &b = outputs[j];
      if (i == j || a.path.empty() || b.path.empty())
        continue;
      const std::string ra = realPathOf(a.path), rb = realPathOf(b.path);
      const bool same = sameFile(a.path, b.path) || (!ra.empty() && ra == rb);
      // A pair that is the same path is reported once, named by the
      // earlier of the two (callers list the user's flags first).
      if ((same && i < j) || (!same && isInside(ra, rb)))
        return Error(Problem{
            fmt::format("{} '{}' is {}{} '{}': one output of the run would "
                        "overwrite or remove the other",
                        a.what, a.path, same ? "also " : "inside ", b.what,
                        b.path),
            "give each output its own path", std::nullopt, 1});
    }
  return Error::success();
}

Error checkOutputDirectoryExists(const std::string &path,
                                 std::string_view what) {
  const std::string dir = directoryOf(path);
  struct stat st;
  const bool exists = ::stat(dir.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode))
    return Error::success();
  return Error(Problem{
      fmt::format("{} '{}' cannot be written: its directory '{}' {}", what,
                  path, dir, exists ? "is not a directory" : "does not exist"),
      fmt::format("create the directory '{}' first, or name a file in one "
                  "that exists",
                  dir),
      std::nullopt, 1});
}

Error replaceDirectory(const std::string &built, const std::string &target,
                       std::string_view what) {
  std::error_code ec;
  struct stat st;
  const bool exists = ::lstat(target.c_str(), &st) == 0;
  int moved = exists ? ::renameat2(AT_FDCWD, built.c_str(), AT_FDCWD,
                                   target.c_str(), RENAME_EXCHANGE)
                     : ::rename(built.c_str(), target.c_str());
  if (moved != 0) {
    int err = errno;
    std::filesystem::remove_all(built, ec);
    return Error(Problem{
        fmt::format("cannot put {} in place at '{}': {}", what, target,
                    std::strerror(err)),
        exists ? "the earlier one is untouched; check the directory's "
                 "permissions and that its filesystem supports renameat2"
               : "check the directory's permissions",
        std::nullopt, 1});
  }
  // `built` now names the earlier contents.
  if (exists)
    std::filesystem::remove_all(built, ec);
  return Error::success();
}

std::string siblingTemporary(const std::string &path) {
  static std::atomic<unsigned> counter{0};
  std::string dir = directoryOf(path);
  return fmt::format("{}/.{}.tmp{}.{}", dir == "/" ? "" : dir, baseNameOf(path),
                     ::getpid(), counter++);
}

Error writeAtomically(
    const std::string &path, std::string_view what,
    const std::vector<std::pair<const void *, size_t>> &pieces) {
  if (auto err = checkFileOutput(path, what))
    return err;
  struct stat before;
  const bool existed = ::stat(path.c_str(), &before) == 0;
  const std::string tmp = siblingTemporary(path);
  bool created = false;
  auto fail = [&](const char *step, int err) {
    if (created)
      ::unlink(tmp.c_str());
    return Error(Problem{
        fmt::format("cannot {} {} '{}': {}", step, what, path,
                    std::strerror(err)),
        err == ENOENT
            ? fmt::format("create the directory '{}' first", directoryOf(path))
            : fmt::format("check free space and permissions of "
                          "'{}'; {}",
                          directoryOf(path),
                          existed ? "the file that was there is untouched"
                                  : "nothing was written there"),
        std::nullopt, 1});
  };
  // A new file gets what the umask gives; a replaced one keeps its mode.
  Descriptor file(
      ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
  if (file.fd < 0)
    return fail("create a temporary file for", errno);
  created = true;
  if (existed && ::fchmod(file.fd, before.st_mode & 07777) != 0)
    return fail("keep the mode of", errno);
  if (int err = writeAll(file.fd, pieces))
    return fail("write", err);
  const int closed = ::close(file.fd);
  file.fd = -1;
  if (closed != 0)
    return fail("write", errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return fail("rename a temporary file onto", errno);
  // Make the rename itself durable.
  Descriptor dir(::open(directoryOf(path).c_str(), O_RDONLY | O_CLOEXEC));
  if (dir.fd >= 0)
    ::fsync(dir.fd);
  return Error::success();
}

std::string excerpt(std::string_view text, size_t limit) {
  size_t end = std::min(text.find('\n'), text.size());
  std::string shown;
  size_t i = 0;
  for (; i < end && shown.size() < limit; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f)
      shown += char(c);
    else
      shown += fmt::format("\\x{:02x}", c);
  }
  const bool rest = i < end || (end < text.size() && end + 1 < text.size());
  if (rest)
    shown += "...";
  return shown;
}

std::string printable(std::string_view text) {
  std::string shown(text);
  for (char &c : shown)
    if (static_cast<unsigned char>(c) < 0x20 ||
        static_cast<unsigned char>(c) >= 0x7f)
      c = '?';
  return shown;
}

std::string humanBytes(uint64_t bytes) {
  if (bytes >= kGiB)
    return fmt::format("{:.1f} GiB", double(bytes) / double(kGiB));
  if (bytes >= kMiB)
    return fmt::format("{:.1f} MiB", double(bytes) / double(kMiB));
  if (bytes >= 1024)
    return fmt::format("{:.1f} KiB", double(bytes) / 1024.0);
  return fmt::format("{} bytes", bytes);
}

} // namespace hypipe::files
