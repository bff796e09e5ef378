// Ring checkpoints on disk: the job's state (parameters, optimizer state
// and step count) after `version` steps, written by the members of the ring
// that applied that step, each its own part, into one directory every
// member sees (JobSpec.ring_checkpoint_dir).
//
// Part `rank` of a ring of `parts` members holds the flat range
// ShardRange(n, parts, rank) of the parameters and of each optimizer state
// buffer, in the PS shards' checkpoint format (common/checkpoint_io.h:
// magic, identity, version, step count, buffers, CRC), as the file
// CheckpointPath(dir, rank, version), i.e. "shard-<rank>-v<version>.ckpt".
// Each member thus writes 1/parts of the state, atomically and synced,
// and keeps its newest kCheckpointsKept parts (older ones are deleted as it
// writes). A checkpoint is complete when every part is; only the
// coordinator knows that (every member reported its part written), so a
// reader asks for a version the coordinator recorded.
//
// Thread safety: stateless functions; two writers of one part (same
// directory, rank and version) must not run at once.
#ifndef FERRY_WORKER_RING_CHECKPOINT_H_
#define FERRY_WORKER_RING_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/checkpoint_io.h"
#include "common/file_system.h"

namespace ferry {

// The identity of part `rank` of `parts` of a job's `n`-element state.
CheckpointIdentity RingCheckpointPartIdentity(const std::string& job_id,
                                              int rank, int parts, int64_t n);

// The whole state of one ring checkpoint.
struct RingCheckpoint {
  int64_t version = 0;
  int64_t steps_applied = 0;
  std::vector<float> params;              // n elements
  std::vector<std::vector<float>> state;  // each n elements
};

// Writes `part` (its identity from RingCheckpointPartIdentity) into `dir`,
// creating it, atomically and synced; then deletes this rank's parts older
// than its newest kCheckpointsKept. Returns the path. Errors: the file
// system's (RESOURCE_EXHAUSTED for a full disk, PERMISSION_DENIED for a
// read-only one, ...); CheckpointStore::Write's for a malformed part.
absl::StatusOr<std::string> WriteRingCheckpointPart(
    FileSystem* fs, const std::string& dir, const ShardCheckpoint& part);

// Reads every part of the checkpoint at `version` of job `job_id` whose
// state has `n` elements and `state_buffers` optimizer state buffers: part
// 0 says how many parts there are. Errors, each naming the part's path:
// NOT_FOUND for a missing part; DATA_LOSS for a damaged one (checksum,
// truncation) or parts that disagree on the step count; FAILED_PRECONDITION
// for a part of another job, size or number of state buffers.
absl::StatusOr<RingCheckpoint> LoadRingCheckpoint(FileSystem* fs,
                                                  const std::string& dir,
                                                  const std::string& job_id,
                                                  int64_t version, int64_t n,
                                                  size_t state_buffers);

}  // namespace ferry

#endif  // FERRY_WORKER_RING_CHECKPOINT_H_
