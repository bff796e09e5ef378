// One `ferry local` per log directory: the run holds an exclusive flock on
// DIR/.ferry-local.lock (with its pid in the file) from before it clears the
// directory's state until it ends. A second run on the same directory would
// otherwise delete the first one's coordinator state and checkpoints while
// it runs, and its own shards could resume the first one's checkpoints.
// The kernel releases the lock when the process ends, however it ends.
#ifndef FERRY_CLIENT_LOG_DIR_LOCK_H_
#define FERRY_CLIENT_LOG_DIR_LOCK_H_

#include <string>

#include "absl/status/statusor.h"

namespace ferry {

class LogDirLock {
 public:
  // Locks `dir` (which must exist). FAILED_PRECONDITION naming the holder's
  // pid when another run holds it; UNAVAILABLE when the lock file cannot be
  // opened.
  static absl::StatusOr<LogDirLock> Acquire(const std::string& dir);

  LogDirLock(LogDirLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  LogDirLock& operator=(LogDirLock&& other) noexcept;
  LogDirLock(const LogDirLock&) = delete;
  LogDirLock& operator=(const LogDirLock&) = delete;
  ~LogDirLock();  // releases the lock

 private:
  explicit LogDirLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace ferry

#endif  // FERRY_CLIENT_LOG_DIR_LOCK_H_
