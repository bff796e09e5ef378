#include "common/rewritable_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "common/posix_io.h"

namespace ferry {
namespace {

class PosixRewritableFile final : public RewritableFile {
 public:
  PosixRewritableFile(std::string path, int fd, int64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}

  absl::Status Rewrite(absl::string_view contents) override {
    size_t done = 0;
    while (done < contents.size()) {
      const ssize_t n =
          ::pwrite(fd_.get(), contents.data() + done, contents.size() - done,
                   static_cast<off_t>(done));
      if (n < 0) {
        if (errno == EINTR) continue;
        size_ = -1;  // unknown: truncate on the next rewrite
        return ErrnoError(errno, "write", path_);
      }
      done += static_cast<size_t>(n);
    }
    const int64_t size = static_cast<int64_t>(contents.size());
    // Only a shrink truncates (to the new size, never to zero first, which
    // ext4 would treat as a replacement and flush).
    if ((size_ < 0 || size < size_) &&
        ::ftruncate(fd_.get(), static_cast<off_t>(size)) != 0) {
      size_ = -1;
      return ErrnoError(errno, "truncate", path_);
    }
    size_ = size;
    return absl::OkStatus();
  }

  absl::Status Sync() override {
    if (::fsync(fd_.get()) != 0) return ErrnoError(errno, "fsync", path_);
    if (!directory_synced_) {
      if (absl::Status s = SyncDirectoryOf(path_); !s.ok()) return s;
      directory_synced_ = true;
    }
    return absl::OkStatus();
  }

 private:
  const std::string path_;
  Fd fd_;
  int64_t size_;  // the file's size; -1: unknown
  bool directory_synced_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RewritableFile>> OpenPosixRewritableFile(
    const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(errno, "open", path);
  struct stat st;
  const int64_t size =
      ::fstat(fd, &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
  return std::unique_ptr<RewritableFile>(
      new PosixRewritableFile(path, fd, size));
}

}  // namespace ferry
