#include "client/log_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace ferry {

absl::StatusOr<LogDirLock> LogDirLock::Acquire(const std::string& dir) {
  const std::string path = dir + "/.ferry-local.lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot open the lock file ", path, ": ", std::strerror(errno)));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    char holder[32] = {};
    const ssize_t n = ::pread(fd, holder, sizeof(holder) - 1, 0);
    ::close(fd);
    if (error != EWOULDBLOCK) {
      return absl::UnavailableError(
          absl::StrCat("cannot lock ", path, ": ", std::strerror(error)));
    }
    const std::string pid =
        n > 0 ? std::string(absl::StripAsciiWhitespace(holder)) : "?";
    return absl::FailedPreconditionError(absl::StrCat(
        "--log-dir ", dir, " is in use by another ferry local (pid ", pid,
        "); give each job its own log directory"));
  }
  const std::string pid = absl::StrCat(::getpid(), "\n");
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) !=
                                     static_cast<ssize_t>(pid.size())) {
    // The lock holds without the pid; only the message would lack it.
  }
  return LogDirLock(fd);
}

LogDirLock& LogDirLock::operator=(LogDirLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

LogDirLock::~LogDirLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor unlocks
}

}  // namespace ferry
