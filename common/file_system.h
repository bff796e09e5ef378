// FileSystem: the few file operations that checkpoints need, behind an
// interface (leveldb's Env + memenv pattern) so that their logic is tested
// against an in-memory fake and runs against POSIX in production.
//
// Paths are plain strings ("dir/name"); a directory is named without a
// trailing slash. Errors:
//  NOT_FOUND          the file or directory does not exist;
//  PERMISSION_DENIED  the OS refused access;
//  RESOURCE_EXHAUSTED the disk is full;
//  INTERNAL           any other I/O error (the message names the path and
//                     the OS error).
//
// Thread safety: every implementation here is thread-safe. Two concurrent
// WriteFileAtomically calls (or atomic files open) for the same path race on
// its temp file; callers serialize writes of one path.
#ifndef FERRY_COMMON_FILE_SYSTEM_H_
#define FERRY_COMMON_FILE_SYSTEM_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/byte_sink.h"
#include "common/rewritable_file.h"

namespace ferry {

// A file written in pieces and then put in place as WriteFileAtomically
// puts a whole one (leveldb's WritableFile with its temp file and rename),
// for contents too large to hold in memory twice: a reader, and a process
// started after a crash, sees the old file or the whole new one, never a
// part.
//
// Thread safety: one thread at a time.
class AtomicFile : public ByteSink {
 public:
  // Without a successful Commit(): the temp file is deleted and the final
  // path is left as it was.
  ~AtomicFile() override = default;
  // Appends to the temp file (possibly buffered). Errors: the file
  // system's (RESOURCE_EXHAUSTED for a full disk); after one, every later
  // Append and Commit fails.
  absl::Status Append(absl::string_view bytes) override = 0;
  // Flushes the bytes to disk (fsync), renames the temp file over the final
  // path and fsyncs the directory. Call once. On error the final path is
  // as it was (the temp file is deleted).
  virtual absl::Status Commit() = 0;
};

// A whole file's bytes read in place, for files too large to copy into
// memory (a checkpoint's rows). POSIX maps the file (read-only, private):
// its pages come in as they are read, and Release lets them go again, so a
// reader walking the file front to back holds only what it has not yet
// released. The bytes stay valid until the MappedFile is destroyed, also
// when the file is deleted or replaced (a rename) meanwhile. A file
// truncated in place while mapped, or a read error of the disk under a
// mapped page, raises SIGBUS instead of an error status: no writer here
// truncates (files are replaced whole: AtomicFile); a file system that
// cannot map gets a copy (ReadFile) instead.
//
// Thread safety: bytes() may be read from any thread; Release from one at a
// time.
class MappedFile {
 public:
  virtual ~MappedFile() = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  absl::string_view bytes() const { return bytes_; }
  // `part` (within bytes()) will not be read soon: its pages leave the
  // process's memory (POSIX: MADV_DONTNEED), with the pages partly inside
  // it and those up to 2 MiB before it (the kernel maps cached pages
  // around a read, up to a large folio's); a later read of them reads the
  // file (the page cache) again. The bytes do not change. A no-op where
  // the bytes are a copy.
  virtual void Release(absl::string_view part) { (void)part; }

 protected:
  explicit MappedFile(absl::string_view bytes) : bytes_(bytes) {}
  void set_bytes(absl::string_view bytes) { bytes_ = bytes; }

 private:
  absl::string_view bytes_;
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  // Replaces `path` with `contents` so that a reader (or a process started
  // after a crash) sees either the old file or the whole new one: writes
  // "<path>.tmp", flushes it to disk (fsync), renames it over `path` and
  // fsyncs the directory. The directory must exist (NOT_FOUND otherwise).
  virtual absl::Status WriteFileAtomically(const std::string& path,
                                           absl::string_view contents) = 0;
  // As WriteFileAtomically without the fsyncs: a reader, and a process
  // started after this one died, see the old file or the whole new one; a
  // machine crash may lose the replacement. For state written often whose
  // loss a restart reconciles (the coordinator's state: docs/elasticity.md).
  // The default is WriteFileAtomically.
  virtual absl::Status ReplaceFile(const std::string& path,
                                   absl::string_view contents) {
    return WriteFileAtomically(path, contents);
  }
  // Makes the current contents of `path` durable, as WriteFileAtomically
  // would have: flushes the file to disk (fsync), then its directory entry.
  // What a ReplaceFile since wrote survives a machine crash afterwards.
  // NOT_FOUND when `path` does not exist. The default reads the file and
  // writes it again with WriteFileAtomically.
  virtual absl::Status SyncFile(const std::string& path);
  // WriteFileAtomically in pieces: opens "<path>.tmp" (replacing a stale
  // one) for an AtomicFile whose Commit() puts it at `path`. Errors as
  // WriteFileAtomically's (NOT_FOUND when the directory does not exist).
  // The default (file systems that cannot stream) gathers the bytes in
  // memory and calls WriteFileAtomically on Commit.
  virtual absl::StatusOr<std::unique_ptr<AtomicFile>> NewAtomicFile(
      const std::string& path);
  // As NewAtomicFile without the fsyncs (as ReplaceFile is to
  // WriteFileAtomically): for a file read back and deleted soon (an export's
  // spool), whose loss in a machine crash costs nothing. The default is
  // NewAtomicFile.
  virtual absl::StatusOr<std::unique_ptr<AtomicFile>> NewScratchFile(
      const std::string& path) {
    return NewAtomicFile(path);
  }
  // `path` to be rewritten whole in place again and again
  // (common/rewritable_file.h), created when missing. NOT_FOUND when its
  // directory does not exist. The default rewrites through ReplaceFile and
  // syncs through SyncFile (so the in-memory fake keeps its crash model).
  virtual absl::StatusOr<std::unique_ptr<RewritableFile>> OpenRewritable(
      const std::string& path);
  // The whole file. NOT_FOUND when it does not exist.
  virtual absl::StatusOr<std::string> ReadFile(const std::string& path) = 0;
  // The whole file read in place (see MappedFile); errors as ReadFile's.
  // The default holds a copy (ReadFile) whose Release does nothing.
  virtual absl::StatusOr<std::unique_ptr<MappedFile>> MapFile(
      const std::string& path);
  // The names (not paths) of the entries of `dir`, sorted, without "." and
  // "..". NOT_FOUND when `dir` does not exist.
  virtual absl::StatusOr<std::vector<std::string>> ListDirectory(
      const std::string& dir) = 0;
  // NOT_FOUND when `path` does not exist.
  virtual absl::Status DeleteFile(const std::string& path) = 0;
  // Creates `dir` and its missing parents; OK when it exists.
  virtual absl::Status CreateDirectories(const std::string& dir) = 0;
};

// The process's real file system (POSIX calls). Never null, never deleted.
FileSystem* PosixFileSystem();

// A file system in memory, for tests. Directories exist once created with
// CreateDirectories or once they hold a file (a file's parent directory is
// created implicitly: the fake does not check that it exists).
class InMemoryFileSystem final : public FileSystem {
 public:
  absl::Status WriteFileAtomically(const std::string& path,
                                   absl::string_view contents) override;
  // Replaces the file as WriteFileAtomically does, but not durably: what
  // AfterMachineCrash() gives before the next SyncFile (or durable write
  // of the path) holds what was durable before.
  absl::Status ReplaceFile(const std::string& path,
                           absl::string_view contents) override;
  absl::Status SyncFile(const std::string& path) override;
  // Gathers the bytes; Commit() stores them as WriteFileAtomically does
  // (and fails as it does under FailWrites); Append() fails under
  // FailWrites or past FailWritesAfter's budget.
  absl::StatusOr<std::unique_ptr<AtomicFile>> NewAtomicFile(
      const std::string& path) override;
  absl::StatusOr<std::string> ReadFile(const std::string& path) override;
  absl::StatusOr<std::vector<std::string>> ListDirectory(
      const std::string& dir) override;
  absl::Status DeleteFile(const std::string& path) override;
  absl::Status CreateDirectories(const std::string& dir) override;

  // Test hooks. Every later WriteFileAtomically fails with `status` (and
  // writes nothing) until cleared with OkStatus().
  void FailWrites(absl::Status status);
  // An AtomicFile's Append fails with RESOURCE_EXHAUSTED ("disk full")
  // once the bytes appended to open atomic files in all would exceed
  // `bytes` (a write that fails halfway); negative: no limit (the default).
  void FailWritesAfter(int64_t bytes);
  // Replaces a file's contents directly (no atomicity), e.g. to corrupt it.
  void SetFileContents(const std::string& path, std::string contents);
  // Successful WriteFileAtomically, ReplaceFile calls and AtomicFile
  // commits.
  int64_t writes() const;
  // Successful SyncFile calls.
  int64_t syncs() const;
  // What a machine crash would leave: a new file system holding each file's
  // last durable contents (a file never made durable is absent).
  std::unique_ptr<InMemoryFileSystem> AfterMachineCrash() const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::string> files_ ABSL_GUARDED_BY(mu_);
  // What a machine crash leaves of each file (SimulateMachineCrash).
  std::map<std::string, std::string> durable_ ABSL_GUARDED_BY(mu_);
  int64_t syncs_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<std::string> dirs_ ABSL_GUARDED_BY(mu_);
  absl::Status fail_writes_ ABSL_GUARDED_BY(mu_);
  int64_t append_budget_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t writes_ ABSL_GUARDED_BY(mu_) = 0;

  class File;
  // Counts `n` bytes against the budget: FailWritesAfter's error past it.
  absl::Status ChargeAppend(int64_t n) ABSL_LOCKS_EXCLUDED(mu_);
};

}  // namespace ferry

#endif  // FERRY_COMMON_FILE_SYSTEM_H_
