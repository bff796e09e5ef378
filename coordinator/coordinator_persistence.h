// CoordinatorPersistence: where the coordinator's state (v1::CoordinatorState)
// lives between runs, in "<state_dir>", through a FileSystem
// (common/file_system.h), so that tests run it against InMemoryFileSystem.
//
// The state is saved twice per sync step, so it is rewritten in place
// (common/rewritable_file.h: no temp file, no rename) in three slot files,
// "coordinator.state.0" to ".2", each holding one record: magic
// "FERRYCS1", a sequence number, the state's length and its CRC32C (little
// endian, 28 bytes), then the serialized state. Load takes the whole record
// with the highest sequence number, so:
//  - a process killed while it rewrites a slot leaves that slot torn (its
//    checksum fails) and the slot saved before it whole: saves alternate
//    between the two slots that do not hold the last synced record;
//  - a machine crash leaves at least the last synced record, whose slot is
//    not rewritten until the next Sync makes a newer one durable.
// A "coordinator.state" of earlier builds (one file, replaced by rename) is
// read when no slot holds a whole record, and deleted by the first Sync.
//
// Ownership: does not own `fs`, which must outlive it.
// Thread safety: thread-safe; Save and Sync exclude each other (io_mu_).
// The Coordinator saves under its own mutex and syncs off it.
#ifndef FERRY_COORDINATOR_COORDINATOR_PERSISTENCE_H_
#define FERRY_COORDINATOR_COORDINATOR_PERSISTENCE_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
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
  static constexpr int kSlots = 3;

  // REQUIRES: fs != nullptr. An empty `dir` turns persistence off: Load
  // finds nothing and Save does nothing.
  CoordinatorPersistence(FileSystem* fs, std::string dir);

  bool enabled() const { return !dir_.empty(); }
  // "<dir>/coordinator.state": the slots are path() + ".0" to ".2".
  const std::string& path() const { return path_; }
  std::string SlotPath(int slot) const;

  // Creates the directory and reads the saved state. nullopt when there is
  // none (a fresh job, or persistence off). Errors: the FileSystem's
  // (PERMISSION_DENIED, ...) for a directory that cannot be created or a
  // file that cannot be read; DATA_LOSS when files exist but none holds a
  // whole state (every slot torn, an earlier build's file that does not
  // parse); FAILED_PRECONDITION for another format.
  absl::StatusOr<std::optional<v1::CoordinatorState>> Load();
  // REQUIRES: state.format() == kFormat.
  // Saves the state as the newest record (see above): a reader, and a
  // process started after this one died, see it once this returned OK; a
  // machine crash may bring back the state of the last Sync(). The
  // FileSystem's errors (RESOURCE_EXHAUSTED when the disk is full, ...);
  // the newest whole record is then the one saved before. OK without
  // doing anything when persistence is off.
  absl::Status Save(const v1::CoordinatorState& state);
  // Makes the last saved record durable (fsync of its slot and, the first
  // time, the directory entry). OK when persistence is off or nothing was
  // saved yet.
  absl::Status Sync();

 private:
  // The slot the next Save writes: of the two slots that do not hold the
  // last synced record, the one the last Save did not write.
  int NextSlot() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(io_mu_);
  absl::StatusOr<std::optional<v1::CoordinatorState>> LoadLegacy();

  FileSystem* const fs_;
  const std::string dir_;
  const std::string path_;
  absl::Mutex io_mu_;  // one Save or Sync at a time
  std::array<std::unique_ptr<RewritableFile>, kSlots> files_
      ABSL_GUARDED_BY(io_mu_);
  uint64_t sequence_ ABSL_GUARDED_BY(io_mu_) = 0;  // the newest record's
  int last_saved_ ABSL_GUARDED_BY(io_mu_) = -1;    // its slot; -1: none
  // The slot whose record must stay whole (the last synced one, or the one
  // Load found); -1: none.
  int protected_ ABSL_GUARDED_BY(io_mu_) = -1;
  bool synced_once_ ABSL_GUARDED_BY(io_mu_) = false;
};

}  // namespace ferry

#endif  // FERRY_COORDINATOR_COORDINATOR_PERSISTENCE_H_
