// Checkpoints of one PS shard's slice: the file format and a store that
// names, writes, finds, loads and prunes them in one directory.
//
// File format (all integers little-endian; format versions 1, 2 and 3):
//   "FERRYCKP"                       8 bytes, magic
//   u32 format_version               1: no tables; 3: tables (2: tables
//                                    without their event counters, read
//                                    only)
//   u32 job_id length, job_id bytes
//   i32 shard_id, i32 num_shards
//   i64 range_begin, i64 range_end   the slice's flat range
//   i64 version                      optimizer updates applied to the slice
//   i64 steps_applied                the optimizer's step count
//   u32 num_state_buffers            0 SGD, 1 momentum, 2 Adam/AdamW
//   u64 elements_per_buffer          = range_end - range_begin
//   params                           elements_per_buffer fp32
//   state buffer 0, 1, ...           elements_per_buffer fp32 each
//   (format versions 2 and 3: the embedding rows,
//   common/checkpoint_tables.h; version 3 adds each table's event counters)
//   u32 crc32                        zlib crc32 of every byte before it
// Every format version ends with that CRC, so a reader checks it before it
// interprets anything but the magic.
//
// Writing: CheckpointStore::Write encodes a ShardCheckpoint held in memory;
// a CheckpointWriter (CheckpointStore::NewWriter) encodes a shard's state
// read in place (its dense buffers and live embedding tables) straight
// into the file, so that a shard never holds a second copy of its rows.
// Both give the same bytes for the same content, and both replace files
// atomically (FileSystem::NewAtomicFile).
//
// Reading: LoadNewest / LoadVersion return copies; MapNewest / MapVersion
// map the file (FileSystem::MapFile) and return views into it
// (DecodeCheckpointView), for restores that must not hold a copy of the
// rows.
//
// File names: "<dir>/shard-<id>-v<version, zero-padded to 12 digits>.ckpt".
#ifndef FERRY_COMMON_CHECKPOINT_IO_H_
#define FERRY_COMMON_CHECKPOINT_IO_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/byte_sink.h"
#include "common/checkpoint_tables.h"
#include "common/file_system.h"

namespace ferry {

// Written for shards without embedding tables (1) and with them (3: rows,
// admission and event counters); 2 (rows and admission counters) was
// written before the event counters were kept. All three are read.
inline constexpr uint32_t kCheckpointFormatVersion = 1;
inline constexpr uint32_t kCheckpointFormatWithTables = 2;
inline constexpr uint32_t kCheckpointFormatWithTableCounters = 3;
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
  // version 3 when they have their counters (TableCheckpoint::counters),
  // else as version 2 (what a version 2 file decodes to); a version 1 file
  // has none.
  std::vector<TableCheckpoint> tables;
};

// A checkpoint's header and dense buffers, read in place (not owned).
struct CheckpointDenseView {
  CheckpointIdentity identity;
  int64_t version = 0;
  int64_t steps_applied = 0;
  absl::Span<const float> params;
  std::vector<absl::Span<const float>> state;
};

// A checkpoint read in place (DecodeCheckpointView): the fields of a
// ShardCheckpoint as views into the bytes it was decoded from, valid while
// those are.
struct CheckpointView {
  CheckpointIdentity identity;
  int64_t version = 0;
  int64_t steps_applied = 0;
  PackedColumn<float> params;
  std::vector<PackedColumn<float>> state;
  std::vector<TableCheckpointView> tables;

  ShardCheckpoint Copy() const;
};

// `checkpoint`'s dense part as a view (valid while it lives).
CheckpointDenseView DenseViewOf(const ShardCheckpoint& checkpoint);

// The file's bytes. REQUIRES: params.size() == range_end - range_begin,
// every state buffer has params.size() elements, and there are at most
// kMaxCheckpointStateBuffers of them; the tables pass ValidateTables.
std::string EncodeCheckpoint(const ShardCheckpoint& checkpoint);

// The file's bytes written to `sink` front to back, the CRC last: what
// EncodeCheckpoint gives for the same content (format 1 without tables, 3
// when they have counters, else 2). The tables are read while this runs
// (TablePartSource: column by column, several passes). REQUIRES: the sizes
// EncodeCheckpoint requires; the tables pass ValidateTableSources. Errors:
// the sink's; INTERNAL when a table source changes while it is read (see
// WriteTables). After an error the bytes written are not a checkpoint.
absl::Status EncodeCheckpointTo(const CheckpointDenseView& dense,
                                absl::Span<const TablePartSource* const> tables,
                                ByteSink& sink);

// Parses and verifies a file's bytes. Errors:
//  DATA_LOSS           bad magic, truncated or extended file, checksum
//                      mismatch, sizes that do not add up, more than
//                      kMaxCheckpointStateBuffers state buffers;
//  FAILED_PRECONDITION a format version this build does not know.
absl::StatusOr<ShardCheckpoint> DecodeCheckpoint(absl::string_view bytes);
// The same checks and errors without a copy of anything: views into
// `bytes`. The checksum pass, which reads every byte, hands each part it
// has read to `done` (when set); the decoding itself reads only headers.
absl::StatusOr<CheckpointView> DecodeCheckpointView(
    absl::string_view bytes, const BytesDone& done = nullptr);

// OK when `checkpoint` is of `expected`'s slice; else FAILED_PRECONDITION
// naming the first field that differs (job, shard, num_shards, range).
absl::Status CheckIdentity(const ShardCheckpoint& checkpoint,
                           const CheckpointIdentity& expected);
absl::Status CheckIdentityOf(const CheckpointIdentity& got,
                             const CheckpointIdentity& expected);

// "<dir>/shard-<shard_id>-v<version %012d>.ckpt".
std::string CheckpointPath(const std::string& dir, int32_t shard_id,
                           int64_t version);
// The version of a file named like CheckpointPath's basename for
// `shard_id`, or nullopt for any other name (other shards, temp files).
std::optional<int64_t> ParseCheckpointName(absl::string_view name,
                                           int32_t shard_id);

class CheckpointStore;

// A checkpoint file read in place (CheckpointStore::MapNewest and
// MapVersion): its mapping, and the view that points into it. Restoring
// from it walks the rows once and releases them behind it
// (file->Release), so no copy of the rows is ever whole in memory.
struct MappedCheckpoint {
  std::string path;
  std::unique_ptr<MappedFile> file;
  CheckpointView view;

  // Releases parts of the file's bytes (file->Release), for readers that
  // take a BytesDone. Valid while this object lives.
  BytesDone releaser() const {
    MappedFile* mapped = file.get();
    return [mapped](absl::string_view part) { mapped->Release(part); };
  }
};

// Maps the checkpoint file at `path` (FileSystem::MapFile), checks it
// (DecodeCheckpointView; the checksum pass releases what it read) and that
// it is of `expected`'s slice (CheckIdentityOf). Errors are prefixed with
// the path: the file system's, DecodeCheckpoint's, CheckIdentity's.
absl::StatusOr<MappedCheckpoint> MapCheckpoint(
    FileSystem* fs, const std::string& path,
    const CheckpointIdentity& expected);

// One checkpoint file written as it is encoded (CheckpointStore::
// NewWriter): Write() encodes the state it is given, read in place, into
// the file's temp name ("<path>.tmp", FileSystem::NewAtomicFile); Commit()
// makes it durable, puts it in place and prunes old checkpoints, as
// CheckpointStore::Write does. A caller that must keep the state unchanged
// while it is read (a shard: under its lock) holds its lock for Write() only
// and commits after releasing it (the fsync is the slow part). Destroyed
// without a successful Commit(), a writer leaves the directory as it was:
// the temp file is removed, every checkpoint file is untouched.
//
// Thread safety: one thread at a time; one writer per store at a time (a
// version's temp name is shared). Must not outlive its store.
class CheckpointWriter {
 public:
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Encodes the checkpoint of `dense.version` (EncodeCheckpointTo), creating
  // the directory. Call once. Errors: FAILED_PRECONDITION when `dense` is of
  // another slice or Write was called before; INVALID_ARGUMENT when its
  // buffers have the wrong sizes, there are more than
  // kMaxCheckpointStateBuffers, or the tables fail ValidateTableSources;
  // INTERNAL when a table changes while it is read; the file system's
  // (RESOURCE_EXHAUSTED for a full disk, ...).
  absl::Status Write(const CheckpointDenseView& dense,
                     absl::Span<const TablePartSource* const> tables);

  // Puts the written file in place; returns its path. Errors:
  // FAILED_PRECONDITION without a successful Write (or a second time); the
  // file system's (the checkpoint files are then as they were). A failed
  // deletion of an old checkpoint is only logged to stderr.
  absl::StatusOr<std::string> Commit();

 private:
  friend class CheckpointStore;
  explicit CheckpointWriter(CheckpointStore* store) : store_(store) {}

  CheckpointStore* const store_;
  std::unique_ptr<AtomicFile> file_;  // open between Write and Commit
  std::string path_;
  bool written_ = false;
  bool used_ = false;
};

// The checkpoints of one shard in one directory.
//
// Thread safety: thread-safe; writes and loads of one store are serialized
// (two processes must not share a shard's directory), but for a
// CheckpointWriter's Write, which runs beside loads (a temp file is never
// read as a checkpoint).
class CheckpointStore {
 public:
  // `fs` is not owned and must outlive the store. `dir` must be non-empty.
  CheckpointStore(FileSystem* fs, std::string dir, CheckpointIdentity identity,
                  int keep = kCheckpointsKept);

  // Writes `checkpoint` atomically (creating the directory), then deletes
  // this shard's checkpoints older than the newest `keep` but the pinned
  // ones (Pin). Returns the path.
  // A failed deletion is only logged to stderr. Errors: the file system's;
  // FAILED_PRECONDITION when the checkpoint is of another slice;
  // INVALID_ARGUMENT when its buffers have the wrong sizes, there are
  // more than kMaxCheckpointStateBuffers state buffers, or its tables do
  // not pass ValidateTables.
  absl::StatusOr<std::string> Write(const ShardCheckpoint& checkpoint);

  // A streamed write (see CheckpointWriter).
  std::unique_ptr<CheckpointWriter> NewWriter();

  // Versions that pruning keeps from now on, beside the newest `keep`
  // (replaces the previous set): the ones a rollback may still need.
  void Pin(std::vector<int64_t> versions) ABSL_LOCKS_EXCLUDED(mu_);

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
  // LoadNewest and LoadVersion read in place (FileSystem::MapFile), with
  // the same choices and errors. The checksum pass releases the pages it
  // has read.
  absl::StatusOr<MappedCheckpoint> MapNewest();
  absl::StatusOr<MappedCheckpoint> MapVersion(int64_t version);

  // Deletes this shard's checkpoints newer than `version` (after a
  // rollback they describe states the job abandoned). Returns how many.
  absl::StatusOr<int> DeleteNewerThan(int64_t version);

  const std::string& dir() const { return dir_; }
  const CheckpointIdentity& identity() const { return identity_; }

 private:
  friend class CheckpointWriter;

  // FAILED_PRECONDITION for another slice, INVALID_ARGUMENT for buffers of
  // the wrong sizes (Write's checks of the dense part).
  absl::Status CheckDense(const CheckpointDenseView& dense) const;
  // Deletes this shard's checkpoints older than the newest keep_, except
  // the pinned ones (warnings on stderr only).
  void PruneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::vector<int64_t>> ListVersionsLocked()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<MappedCheckpoint> MapLocked(const std::string& path)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  FileSystem* const fs_;
  const std::string dir_;
  const CheckpointIdentity identity_;
  const int keep_;
  absl::Mutex mu_;
  std::vector<int64_t> pinned_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_COMMON_CHECKPOINT_IO_H_
