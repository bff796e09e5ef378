// A POSIX shared-memory object mapped into this process: created with a
// random name (mode 0600, so only this user's processes may open it) or
// opened by name, unmapped when the segment is destroyed. The creator
// unlinks the name (Unlink, or its destructor) once the other side has
// mapped it; the memory lives until the last mapping goes.
#ifndef FERRY_COMMON_SHARED_MEMORY_H_
#define FERRY_COMMON_SHARED_MEMORY_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ferry {

class SharedMemorySegment {
 public:
  // A new object of `bytes` (zero-filled) named `prefix` + 32 random hex
  // digits ("/ferry-ring-..."; `prefix` starts with '/'). Errors: the
  // system's (RESOURCE_EXHAUSTED when /dev/shm is full), INVALID_ARGUMENT
  // for a bad prefix or size.
  static absl::StatusOr<std::unique_ptr<SharedMemorySegment>> Create(
      absl::string_view prefix, size_t bytes);
  // Maps the existing object `name`, which must be exactly `bytes` long
  // (FAILED_PRECONDITION otherwise; NOT_FOUND when there is none: another
  // host or another /dev/shm).
  static absl::StatusOr<std::unique_ptr<SharedMemorySegment>> Open(
      const std::string& name, size_t bytes);
  ~SharedMemorySegment();
  SharedMemorySegment(const SharedMemorySegment&) = delete;
  SharedMemorySegment& operator=(const SharedMemorySegment&) = delete;

  void* data() const { return data_; }
  // The object's descriptor, open as long as the segment (record locks on
  // it tell another process that this one still holds the segment).
  int fd() const { return fd_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }
  // Removes the name (creator only; idempotent): later Opens fail, the
  // mappings stay.
  void Unlink();

 private:
  SharedMemorySegment(std::string name, int fd, void* data, size_t size,
                      bool owner)
      : name_(std::move(name)),
        fd_(fd),
        data_(data),
        size_(size),
        linked_(owner) {}
  const std::string name_;
  const int fd_;
  void* const data_;
  const size_t size_;
  bool linked_;  // the creator still has to unlink the name
};

}  // namespace ferry

#endif  // FERRY_COMMON_SHARED_MEMORY_H_
