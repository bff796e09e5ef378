#include "worker/ring_checkpoint.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/sharding.h"
#include "common/status_macros.h"

namespace ferry {
namespace {

// A part's bytes decoded, its identity checked against `expected`; errors
// prefixed with the path.
absl::StatusOr<ShardCheckpoint> ReadPart(FileSystem* fs,
                                         const std::string& path,
                                         const CheckpointIdentity* expected) {
  absl::StatusOr<std::string> bytes = fs->ReadFile(path);
  if (!bytes.ok()) {
    return absl::Status(bytes.status().code(),
                        absl::StrCat(path, ": ", bytes.status().message()));
  }
  absl::StatusOr<ShardCheckpoint> part = DecodeCheckpoint(*bytes);
  if (part.ok() && expected != nullptr) {
    if (absl::Status s = CheckIdentity(*part, *expected); !s.ok()) {
      part = s;
    }
  }
  if (!part.ok()) {
    return absl::Status(part.status().code(),
                        absl::StrCat(path, ": ", part.status().message()));
  }
  return part;
}

}  // namespace

CheckpointIdentity RingCheckpointPartIdentity(const std::string& job_id,
                                              int rank, int parts, int64_t n) {
  const FlatRange range = ShardRange(n, parts, rank);
  CheckpointIdentity identity;
  identity.job_id = job_id;
  identity.shard_id = rank;
  identity.num_shards = parts;
  identity.range_begin = range.begin;
  identity.range_end = range.end;
  return identity;
}

absl::StatusOr<std::string> WriteRingCheckpointPart(
    FileSystem* fs, const std::string& dir, const ShardCheckpoint& part) {
  CheckpointStore store(fs, dir, part.identity);
  // Parts of later versions describe states the job abandoned (it went
  // back to this version): they must not count among the kept ones.
  if (absl::StatusOr<std::vector<int64_t>> versions = store.ListVersions();
      versions.ok() && !versions->empty() && versions->back() > part.version) {
    RETURN_IF_ERROR(store.DeleteNewerThan(part.version).status());
  }
  return store.Write(part);
}

absl::StatusOr<RingCheckpoint> LoadRingCheckpoint(FileSystem* fs,
                                                  const std::string& dir,
                                                  const std::string& job_id,
                                                  int64_t version, int64_t n,
                                                  size_t state_buffers) {
  ASSIGN_OR_RETURN(ShardCheckpoint first,
                   ReadPart(fs, CheckpointPath(dir, 0, version), nullptr));
  const int parts = first.identity.num_shards;
  const std::string first_path = CheckpointPath(dir, 0, version);
  if (parts < 1 || parts > 1 << 20) {
    return absl::DataLossError(
        absl::StrCat(first_path, ": a checkpoint of ", parts, " parts"));
  }
  RingCheckpoint checkpoint;
  checkpoint.version = version;
  checkpoint.steps_applied = first.steps_applied;
  checkpoint.params.assign(static_cast<size_t>(n), 0.0f);
  checkpoint.state.assign(state_buffers,
                          std::vector<float>(static_cast<size_t>(n), 0.0f));
  for (int rank = 0; rank < parts; ++rank) {
    const std::string path = CheckpointPath(dir, rank, version);
    const CheckpointIdentity expected =
        RingCheckpointPartIdentity(job_id, rank, parts, n);
    ShardCheckpoint part;
    if (rank == 0) {
      RETURN_IF_ERROR(CheckIdentity(first, expected));
      part = std::move(first);
    } else {
      ASSIGN_OR_RETURN(part, ReadPart(fs, path, &expected));
    }
    if (part.version != version) {
      return absl::DataLossError(absl::StrFormat("%s holds version %d, not %d",
                                                 path, part.version, version));
    }
    if (part.steps_applied != checkpoint.steps_applied) {
      return absl::DataLossError(
          absl::StrFormat("%s holds the state after %d steps, part 0 after %d",
                          path, part.steps_applied, checkpoint.steps_applied));
    }
    if (part.state.size() != state_buffers) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s holds %d optimizer state buffers; the job's optimizer has %d",
          path, part.state.size(), state_buffers));
    }
    const auto begin = static_cast<size_t>(expected.range_begin);
    std::copy(part.params.begin(), part.params.end(),
              checkpoint.params.begin() + static_cast<std::ptrdiff_t>(begin));
    for (size_t k = 0; k < state_buffers; ++k) {
      std::copy(
          part.state[k].begin(), part.state[k].end(),
          checkpoint.state[k].begin() + static_cast<std::ptrdiff_t>(begin));
    }
  }
  return checkpoint;
}

}  // namespace ferry
