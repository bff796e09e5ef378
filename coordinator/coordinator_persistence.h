// CoordinatorPersistence: where the coordinator's state (v1::CoordinatorState)
// lives between runs: one file, "<state_dir>/coordinator.state", written
// atomically through a FileSystem (common/file_system.h), so that tests run
// it against InMemoryFileSystem.
//
// Ownership: does not own `fs`, which must outlive it.
// Thread safety: thread-safe. Save and Sync exclude each other (io_mu_), so
// that a sync flushes the file its directory entry names: a rename between
// the file's fsync and the directory's would leave the entry pointing at
// contents not yet on disk. The Coordinator saves under its own mutex and
// syncs off it.
#ifndef FERRY_COORDINATOR_COORDINATOR_PERSISTENCE_H_
#define FERRY_COORDINATOR_COORDINATOR_PERSISTENCE_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/file_system.h"
#include "ferry/v1/coordinator_state.pb.h"

namespace ferry {

class CoordinatorPersistence {
 public:
  // The format this build writes and reads (CoordinatorState.format).
  static constexpr uint32_t kFormat = 1;

  // REQUIRES: fs != nullptr. An empty `dir` turns persistence off: Load
  // finds nothing and Save does nothing.
  CoordinatorPersistence(FileSystem* fs, std::string dir);

  bool enabled() const { return !dir_.empty(); }
  const std::string& path() const { return path_; }

  // Creates the directory and reads the saved state. nullopt when there is
  // none (a fresh job, or persistence off). Errors: the FileSystem's
  // (PERMISSION_DENIED, ...) for a directory that cannot be created or a
  // file that cannot be read; DATA_LOSS for a file that does not parse;
  // FAILED_PRECONDITION for another format.
  absl::StatusOr<std::optional<v1::CoordinatorState>> Load();
  // REQUIRES: state.format() == kFormat.
  // Replaces the saved state atomically (a reader, and a process started
  // after this one died, sees the old or the new one) but not durably: a
  // machine crash may bring back the state of the last Sync(). The
  // FileSystem's errors (RESOURCE_EXHAUSTED when the disk is full, ...).
  // OK without doing anything when persistence is off.
  absl::Status Save(const v1::CoordinatorState& state);
  // Makes the last saved state durable (fsync of the file and its
  // directory). Thread-safe against Save (the FileSystem syncs whichever
  // state is current, at least the one saved before the call). OK when
  // persistence is off or nothing was saved yet.
  absl::Status Sync();

 private:
  FileSystem* const fs_;
  const std::string dir_;
  const std::string path_;
  absl::Mutex io_mu_;  // one Save or Sync at a time
};

}  // namespace ferry

#endif  // FERRY_COORDINATOR_COORDINATOR_PERSISTENCE_H_
