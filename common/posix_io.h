// The POSIX pieces the file system implementations share (common/
// file_system.cc, common/rewritable_file.cc): errno as a status, a
// descriptor closed on every way out, a path's parent and flushing its
// directory entry.
#ifndef FERRY_COMMON_POSIX_IO_H_
#define FERRY_COMMON_POSIX_IO_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ferry {

// "cannot <what> <path>: <strerror>" with the code the error means:
// NOT_FOUND (ENOENT, ENOTDIR), PERMISSION_DENIED (EACCES, EPERM, EROFS),
// RESOURCE_EXHAUSTED (ENOSPC, EDQUOT), INTERNAL otherwise.
absl::Status ErrnoError(int error, absl::string_view what,
                        const std::string& path);

// The directory of `path` ("." for a bare name, "/" for a root entry).
std::string ParentDirectory(const std::string& path);

// Flushes the directory entry of `path` (a rename or a new file in it) to
// disk.
absl::Status SyncDirectoryOf(const std::string& path);

// Closes the descriptor on every path out of a scope.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd();
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Closes now; returns the errno of a failed close, else 0.
  int Close();
  // Hands the descriptor over: no longer closed here.
  int Release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

}  // namespace ferry

#endif  // FERRY_COMMON_POSIX_IO_H_
