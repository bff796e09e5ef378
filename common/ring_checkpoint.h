// Ring checkpoints on disk: the job's state (parameters, optimizer state
// and step count) after `version` steps, written by the members of the ring
// that applied that step, each its own part, into one directory every
// member sees (JobSpec.ring_checkpoint_dir).
//
// A checkpoint is `parts` parts whose flat ranges tile [0, n) in index
// order; part `index` holds its range of the parameters and of each
// optimizer state buffer, in the PS shards' checkpoint format
// (common/checkpoint_io.h: magic, identity with the range, version, step
// count, buffers, CRC), as the file CheckpointPath(dir, index, version),
// i.e. "shard-<index>-v<version>.ckpt". In a plain ring part `rank` of a
// ring of w members is ShardRange(n, w, rank): each member writes 1/w of
// the state. In a ring pipeline only a stage's members hold its layers
// current, so each stage's range is split among its holders
// (RingCheckpointPartsOf). A ring DLRM's embedding tables, identical on
// every member, ride in part 0 alone (its table section, every row with
// its optimizer state and counters): the member writing part 0 writes
// them, the others write dense parts only. Parts are written atomically
// and synced; a
// writer keeps its newest kCheckpointsKept of each of its parts (older
// ones are deleted as it writes). A checkpoint is complete when every
// part is; only the
// coordinator knows that (every member reported its part written), so a
// reader asks for a version the coordinator recorded.
//
// Thread safety: stateless functions; two writers of one part (same
// directory, rank and version) must not run at once.
#ifndef FERRY_COMMON_RING_CHECKPOINT_H_
#define FERRY_COMMON_RING_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/checkpoint_io.h"
#include "common/file_system.h"
#include "common/sharding.h"

namespace ferry {

// One part of a ring checkpoint: its index among `parts` and its range.
struct RingCheckpointPart {
  int index = 0;
  int parts = 1;
  FlatRange range;
};

// The identity of `part` of a job's state.
CheckpointIdentity RingCheckpointPartIdentity(const std::string& job_id,
                                              const RingCheckpointPart& part);
// The identity of part `rank` of a plain ring of `parts` members over a
// job's `n`-element state (ShardRange(n, parts, rank)).
CheckpointIdentity RingCheckpointPartIdentity(const std::string& job_id,
                                              int rank, int parts, int64_t n);

// The parts member `rank` writes when `holders[j]` (ascending ranks) hold
// range `ranges[j]` current after the step: range j is split into
// ShardRange parts among its holders, numbered range by range, holder by
// holder. `ranges` must tile [0, n) in order and every range have a
// holder (INVALID_ARGUMENT otherwise). A plain ring is one range held by
// every member. Pure.
absl::StatusOr<std::vector<RingCheckpointPart>> RingCheckpointPartsOf(
    const std::vector<FlatRange>& ranges,
    const std::vector<std::vector<int>>& holders, int rank);

// The whole state of one ring checkpoint.
struct RingCheckpoint {
  int64_t version = 0;
  int64_t steps_applied = 0;
  std::vector<float> params;              // n elements
  std::vector<std::vector<float>> state;  // each n elements
  std::vector<TableCheckpoint> tables;    // part 0's: a ring DLRM's tables
};

// Writes `part` (its identity from RingCheckpointPartIdentity) into `dir`,
// creating it, atomically and synced; then deletes this rank's parts older
// than its newest kCheckpointsKept. Returns the path. Errors: the file
// system's (RESOURCE_EXHAUSTED for a full disk, PERMISSION_DENIED for a
// read-only one, ...); CheckpointStore::Write's for a malformed part.
absl::StatusOr<std::string> WriteRingCheckpointPart(
    FileSystem* fs, const std::string& dir, const ShardCheckpoint& part);
// The same with the dense state read in place (`dense`'s spans, e.g. a
// member's live buffers, unchanged until it returns) and `tables` (part 0
// only; empty for the others): no copy of the state is made.
absl::StatusOr<std::string> WriteRingCheckpointPart(
    FileSystem* fs, const std::string& dir, const CheckpointDenseView& dense,
    const std::vector<TableCheckpoint>& tables);

// Reads every part of the checkpoint at `version` of job `job_id` whose
// state has `n` elements and `state_buffers` optimizer state buffers: part
// 0 says how many parts there are, and each part must begin where the one
// before it ended, the last ending at `n`. Errors, each naming the part's
// path: NOT_FOUND for a missing part; DATA_LOSS for a damaged one
// (checksum, truncation), parts that disagree on the step count or whose
// ranges do not tile the state, or a part other than 0 that holds tables;
// FAILED_PRECONDITION for a part of another job, size or number of state
// buffers.
absl::StatusOr<RingCheckpoint> LoadRingCheckpoint(FileSystem* fs,
                                                  const std::string& dir,
                                                  const std::string& job_id,
                                                  int64_t version, int64_t n,
                                                  size_t state_buffers);

// Whether `dir` holds ring checkpoint parts (a part 0 of some version).
// False when it cannot be listed.
bool HasRingCheckpoint(FileSystem* fs, const std::string& dir);

// The newest complete ring checkpoint in `dir` whose state has `n`
// elements, of whichever job wrote it (--init-from of a ring checkpoint
// directory, where no coordinator says which version is complete): the
// versions with a part 0, newest first; one with a part missing or
// damaged (a checkpoint cut short when its job stopped) is skipped.
// Errors: NOT_FOUND when no version is complete (naming why the newest was
// not); LoadRingCheckpoint's FAILED_PRECONDITION for a checkpoint of
// another size; the file system's for a directory that cannot be listed.
absl::StatusOr<RingCheckpoint> LoadNewestRingCheckpoint(FileSystem* fs,
                                                        const std::string& dir,
                                                        int64_t n);

}  // namespace ferry

#endif  // FERRY_COMMON_RING_CHECKPOINT_H_
