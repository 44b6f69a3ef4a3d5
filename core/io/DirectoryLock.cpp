//===- DirectoryLock.cpp - one writer a directory -------------------------===//

#include "core/io/DirectoryLock.h"
#include "core/io/Files.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

namespace hypipe::files {
namespace {

/// The error for a lock another process holds: its "pid N on HOST" line.
Error heldBy(const std::string &dir, const std::string &path,
             std::string_view what, std::string_view help) {
  Expected<std::string> text = readBounded(path, {"lock file", 4096});
  // Who holds it is a courtesy: an unreadable lock file still means held.
  std::string holder = text ? excerpt(*text) : std::string();
  return Error(
      Problem{fmt::format("{} '{}' is in use by another run{}", what, dir,
                          holder.empty() ? std::string()
                                         : " (" + path + ": " + holder + ")"),
              std::string(help), std::nullopt, 1});
}

} // namespace

Error lockDirectory(const std::string &dir, std::string_view what,
                    std::string_view help) {
  const std::string path = dir + "/.lock";
  // Not O_CLOEXEC: a launcher exec'd from here (mpirun) keeps the lock.
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0644);
  if (fd < 0)
    return Error(Problem{
        fmt::format("cannot create '{}': {}", path, std::strerror(errno)),
        fmt::format("check that {} '{}' is writable", what, dir), std::nullopt,
        1});
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return heldBy(dir, path, what, help);
  }
  char host[256] = "";
  ::gethostname(host, sizeof(host) - 1);
  std::string who = fmt::format("pid {} on {}\n", ::getpid(), host);
  if (::ftruncate(fd, 0) == 0)
    (void)!::write(fd, who.data(), who.size());
  // fd stays open: the lock lasts until this process and its children exit.
  return Error::success();
}

Error checkNotLocked(const std::string &dir, std::string_view what,
                     std::string_view help) {
  const std::string path = dir + "/.lock";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Error::success();
  const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0;
  ::close(fd);
  return held ? heldBy(dir, path, what, help) : Error::success();
}

} // namespace hypipe::files
