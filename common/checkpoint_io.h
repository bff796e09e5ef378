// Checkpoints of one PS shard's slice: the file format and a store that
// names, writes, finds, loads and prunes them in one directory.
//
// File format (all integers little-endian; format version 1):
//   "FERRYCKP"                       8 bytes, magic
//   u32 format_version               = 1
//   u32 job_id length, job_id bytes
//   i32 shard_id, i32 num_shards
//   i64 range_begin, i64 range_end   the slice's flat range
//   i64 version                      optimizer updates applied to the slice
//   i64 steps_applied                the optimizer's step count
//   u32 num_state_buffers            0 SGD, 1 momentum, 2 Adam/AdamW
//   u64 elements_per_buffer          = range_end - range_begin
//   params                           elements_per_buffer fp32
//   state buffer 0, 1, ...           elements_per_buffer fp32 each
//   (format version 2 only: the embedding rows, common/checkpoint_tables.h)
//   u32 crc32                        zlib crc32 of every byte before it
// Every format version ends with that CRC, so a reader checks it before it
// interprets anything but the magic.
//
// File names: "<dir>/shard-<id>-v<version, zero-padded to 12 digits>.ckpt".
#ifndef FERRY_COMMON_CHECKPOINT_IO_H_
#define FERRY_COMMON_CHECKPOINT_IO_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/checkpoint_tables.h"
#include "common/file_system.h"

namespace ferry {

// Written for shards without embedding tables (1) and with them (2); both
// are read.
inline constexpr uint32_t kCheckpointFormatVersion = 1;
inline constexpr uint32_t kCheckpointFormatWithTables = 2;
// The most optimizer state buffers a checkpoint may hold (Adam has 2). The
// reader refuses more, so that a small file with zero-element buffers cannot
// make it allocate one vector per claimed buffer (up to 2^32).
inline constexpr uint32_t kMaxCheckpointStateBuffers = 8;
inline constexpr int kCheckpointsKept = 3;

// Which slice a checkpoint belongs to; a checkpoint only restores the same.
struct CheckpointIdentity {
  std::string job_id;
  int32_t shard_id = 0;
  int32_t num_shards = 1;
  int64_t range_begin = 0;
  int64_t range_end = 0;
};

struct ShardCheckpoint {
  CheckpointIdentity identity;
  int64_t version = 0;
  int64_t steps_applied = 0;
  std::vector<float> params;              // range_end - range_begin elements
  std::vector<std::vector<float>> state;  // each params.size() elements
  // The shard's embedding tables (jobs with them): written as format
  // version 2; a version 1 file has none.
  std::vector<TableCheckpoint> tables;
};

// The file's bytes. REQUIRES: params.size() == range_end - range_begin,
// every state buffer has params.size() elements, and there are at most
// kMaxCheckpointStateBuffers of them.
std::string EncodeCheckpoint(const ShardCheckpoint& checkpoint);

// Parses and verifies a file's bytes. Errors:
//  DATA_LOSS           bad magic, truncated or extended file, checksum
//                      mismatch, sizes that do not add up, more than
//                      kMaxCheckpointStateBuffers state buffers;
//  FAILED_PRECONDITION a format version this build does not know.
absl::StatusOr<ShardCheckpoint> DecodeCheckpoint(absl::string_view bytes);

// OK when `checkpoint` is of `expected`'s slice; else FAILED_PRECONDITION
// naming the first field that differs (job, shard, num_shards, range).
absl::Status CheckIdentity(const ShardCheckpoint& checkpoint,
                           const CheckpointIdentity& expected);

// "<dir>/shard-<shard_id>-v<version %012d>.ckpt".
std::string CheckpointPath(const std::string& dir, int32_t shard_id,
                           int64_t version);
// The version of a file named like CheckpointPath's basename for
// `shard_id`, or nullopt for any other name (other shards, temp files).
std::optional<int64_t> ParseCheckpointName(absl::string_view name,
                                           int32_t shard_id);

// The checkpoints of one shard in one directory.
//
// Thread safety: thread-safe; writes and loads of one store are serialized
// (two processes must not share a shard's directory).
class CheckpointStore {
 public:
  // `fs` is not owned and must outlive the store. `dir` must be non-empty.
  CheckpointStore(FileSystem* fs, std::string dir, CheckpointIdentity identity,
                  int keep = kCheckpointsKept);

  // Writes `checkpoint` atomically (creating the directory), then deletes
  // this shard's checkpoints older than the newest `keep`. Returns the path.
  // A failed deletion is only logged to stderr. Errors: the file system's;
  // FAILED_PRECONDITION when the checkpoint is of another slice;
  // INVALID_ARGUMENT when its buffers have the wrong sizes, there are
  // more than kMaxCheckpointStateBuffers state buffers, or its tables do
  // not pass ValidateTables.
  absl::StatusOr<std::string> Write(const ShardCheckpoint& checkpoint);

  // This shard's checkpoint versions found in the directory, ascending (by
  // name only; not verified). Empty when the directory does not exist.
  absl::StatusOr<std::vector<int64_t>> ListVersions();

  // The newest checkpoint that decodes and is of this slice; corrupt or
  // foreign ones are skipped with a warning on stderr. `path` (optional)
  // receives its path. NOT_FOUND when there is none.
  absl::StatusOr<ShardCheckpoint> LoadNewest(std::string* path = nullptr);

  // The checkpoint of exactly `version`. NOT_FOUND when there is none;
  // DecodeCheckpoint's and CheckIdentity's errors otherwise.
  absl::StatusOr<ShardCheckpoint> LoadVersion(int64_t version);

  // Deletes this shard's checkpoints newer than `version` (after a
  // rollback they describe states the job abandoned). Returns how many.
  absl::StatusOr<int> DeleteNewerThan(int64_t version);

  const std::string& dir() const { return dir_; }
  const CheckpointIdentity& identity() const { return identity_; }

 private:
  absl::StatusOr<std::vector<int64_t>> ListVersionsLocked()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<ShardCheckpoint> LoadLocked(const std::string& path)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  FileSystem* const fs_;
  const std::string dir_;
  const CheckpointIdentity identity_;
  const int keep_;
  absl::Mutex mu_;
};

}  // namespace ferry

#endif  // FERRY_COMMON_CHECKPOINT_IO_H_
