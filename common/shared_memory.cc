#include "common/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/posix_io.h"

namespace ferry {
namespace {

absl::StatusOr<void*> Map(int fd, size_t bytes, const std::string& name) {
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) return ErrnoError(errno, "map", name);
  return data;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SharedMemorySegment>>
SharedMemorySegment::Create(absl::string_view prefix, size_t bytes) {
  if (prefix.empty() || prefix[0] != '/' ||
      prefix.find('/', 1) != absl::string_view::npos || bytes == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "shared memory needs a '/name' prefix and a size (got '%s', %d)",
        prefix, bytes));
  }
  absl::BitGen random;
  for (int attempt = 0;; ++attempt) {
    const std::string name = absl::StrCat(
        prefix, absl::Hex(absl::Uniform<uint64_t>(random), absl::kZeroPad16),
        absl::Hex(absl::Uniform<uint64_t>(random), absl::kZeroPad16));
    const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
      if (errno == EEXIST && attempt < 3) continue;
      return ErrnoError(errno, "create shared memory", name);
    }
    Fd closer(fd);  // released to the segment below
    if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      const int error = errno;
      shm_unlink(name.c_str());
      return ErrnoError(error, "size shared memory", name);
    }
    absl::StatusOr<void*> data = Map(fd, bytes, name);
    if (!data.ok()) {
      shm_unlink(name.c_str());
      return data.status();
    }
    return std::unique_ptr<SharedMemorySegment>(new SharedMemorySegment(
        name, closer.Release(), *data, bytes, /*owner=*/true));
  }
}

absl::StatusOr<std::unique_ptr<SharedMemorySegment>> SharedMemorySegment::Open(
    const std::string& name, size_t bytes) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return ErrnoError(errno, "open shared memory", name);
  Fd closer(fd);
  struct stat st;
  if (fstat(fd, &st) != 0) return ErrnoError(errno, "stat", name);
  if (static_cast<uint64_t>(st.st_size) != bytes) {
    return absl::FailedPreconditionError(
        absl::StrFormat("shared memory %s holds %d bytes, expected %d", name,
                        st.st_size, bytes));
  }
  absl::StatusOr<void*> data = Map(fd, bytes, name);
  if (!data.ok()) return data.status();
  return std::unique_ptr<SharedMemorySegment>(new SharedMemorySegment(
      name, closer.Release(), *data, bytes, /*owner=*/false));
}

SharedMemorySegment::~SharedMemorySegment() {
  Unlink();
  munmap(data_, size_);
  close(fd_);
}

void SharedMemorySegment::Unlink() {
  if (!linked_) return;
  linked_ = false;
  shm_unlink(name_.c_str());
}

}  // namespace ferry
