// A file rewritten whole, in place, again and again: no temp file, no
// rename, no new inode per save, for small state saved several times a
// step (the coordinator's). Replacing a file by rename costs a create, a
// rename and, on ext4, the write-back the rename starts (its auto_da_alloc);
// rewriting in place costs one write.
//
// Unlike AtomicFile (common/file_system.h), a crash during Rewrite may
// leave any mix of old and new bytes, and a machine crash before Sync any
// earlier contents: a caller that must find a whole state keeps more than
// one such file and checks what it reads (CoordinatorPersistence: three
// slots, each record with its checksum).
//
// Thread safety: one thread at a time.
#ifndef FERRY_COMMON_REWRITABLE_FILE_H_
#define FERRY_COMMON_REWRITABLE_FILE_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ferry {

class RewritableFile {
 public:
  virtual ~RewritableFile() = default;
  // Makes `contents` the file's whole contents. Once it returned OK, a
  // reader and a process started after this one died see them; a machine
  // crash may lose them until Sync. Errors: the file system's
  // (RESOURCE_EXHAUSTED for a full disk); the contents are then undefined.
  virtual absl::Status Rewrite(absl::string_view contents) = 0;
  // Makes the last Rewrite durable: flushes the file (fsync) and, the
  // first time, its directory entry.
  virtual absl::Status Sync() = 0;
};

// The POSIX file at `path`, created (empty, mode 0644) when missing and kept
// open. NOT_FOUND when its directory does not exist.
absl::StatusOr<std::unique_ptr<RewritableFile>> OpenPosixRewritableFile(
    const std::string& path);

}  // namespace ferry

#endif  // FERRY_COMMON_REWRITABLE_FILE_H_
