#include "common/ring_checkpoint.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checkpoint_tables.h"
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
                                              const RingCheckpointPart& part) {
  CheckpointIdentity identity;
  identity.job_id = job_id;
  identity.shard_id = part.index;
  identity.num_shards = part.parts;
  identity.range_begin = part.range.begin;
  identity.range_end = part.range.end;
  return identity;
}

CheckpointIdentity RingCheckpointPartIdentity(const std::string& job_id,
                                              int rank, int parts, int64_t n) {
  return RingCheckpointPartIdentity(
      job_id, RingCheckpointPart{rank, parts, ShardRange(n, parts, rank)});
}

absl::StatusOr<std::vector<RingCheckpointPart>> RingCheckpointPartsOf(
    const std::vector<FlatRange>& ranges,
    const std::vector<std::vector<int>>& holders, int rank) {
  if (ranges.size() != holders.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ring checkpoint: %d ranges, holders of %d",
                        ranges.size(), holders.size()));
  }
  int parts = 0;
  int64_t end = 0;
  for (size_t j = 0; j < ranges.size(); ++j) {
    if (ranges[j].begin != end || ranges[j].end < ranges[j].begin ||
        holders[j].empty()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "ring checkpoint: range %d [%d, %d) does not follow %d or has no "
          "holder",
          j, ranges[j].begin, ranges[j].end, end));
    }
    end = ranges[j].end;
    parts += static_cast<int>(holders[j].size());
  }
  std::vector<RingCheckpointPart> own;
  int index = 0;
  for (size_t j = 0; j < ranges.size(); ++j) {
    const int h = static_cast<int>(holders[j].size());
    for (int i = 0; i < h; ++i, ++index) {
      if (holders[j][i] != rank) continue;
      FlatRange range = ShardRange(ranges[j].size(), h, i);
      range.begin += ranges[j].begin;
      range.end += ranges[j].begin;
      own.push_back({index, parts, range});
    }
  }
  return own;
}

namespace {

// Deletes, best effort, the files of parts other than 0 whose versions are
// older than `oldest_kept`, part 0's oldest kept version: no complete
// checkpoint can use them any more (among them the parts that departed
// ranks of a ring that since shrank wrote, which no writer prunes).
void PruneOrphanParts(FileSystem* fs, const std::string& dir,
                      int64_t oldest_kept) {
  absl::StatusOr<std::vector<std::string>> names = fs->ListDirectory(dir);
  if (!names.ok()) return;
  constexpr absl::string_view kPrefix = "shard-";
  for (const std::string& name : *names) {
    if (!absl::StartsWith(name, kPrefix)) continue;
    const size_t at = name.find("-v", kPrefix.size());
    int32_t index = 0;
    if (at == std::string::npos ||
        !absl::SimpleAtoi(
            absl::string_view(name).substr(kPrefix.size(), at - kPrefix.size()),
            &index) ||
        index < 1) {
      continue;
    }
    const std::optional<int64_t> version = ParseCheckpointName(name, index);
    if (version.has_value() && *version < oldest_kept) {
      (void)fs->DeleteFile(CheckpointPath(dir, index, *version));
    }
  }
}

}  // namespace

absl::StatusOr<std::string> WriteRingCheckpointPart(
    FileSystem* fs, const std::string& dir, const ShardCheckpoint& part) {
  return WriteRingCheckpointPart(fs, dir, DenseViewOf(part), part.tables);
}

absl::StatusOr<std::string> WriteRingCheckpointPart(
    FileSystem* fs, const std::string& dir, const CheckpointDenseView& dense,
    const std::vector<TableCheckpoint>& tables) {
  RETURN_IF_ERROR(ValidateTables(tables));
  CheckpointStore store(fs, dir, dense.identity);
  // Parts of later versions describe states the job abandoned (it went
  // back to this version): they must not count among the kept ones.
  if (absl::StatusOr<std::vector<int64_t>> versions = store.ListVersions();
      versions.ok() && !versions->empty() && versions->back() > dense.version) {
    RETURN_IF_ERROR(store.DeleteNewerThan(dense.version).status());
  }
  const TableCheckpointSources sources(tables);
  std::unique_ptr<CheckpointWriter> writer = store.NewWriter();
  RETURN_IF_ERROR(writer->Write(dense, sources.pointers()));
  ASSIGN_OR_RETURN(std::string path, writer->Commit());
  if (dense.identity.shard_id == 0) {
    if (absl::StatusOr<std::vector<int64_t>> kept = store.ListVersions();
        kept.ok() && !kept->empty()) {
      PruneOrphanParts(fs, dir, kept->front());
    }
  }
  return path;
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
  int64_t begin = 0;  // where the next part's range must begin
  for (int index = 0; index < parts; ++index) {
    const std::string path = CheckpointPath(dir, index, version);
    ShardCheckpoint part;
    if (index == 0) {
      part = std::move(first);
    } else {
      ASSIGN_OR_RETURN(part, ReadPart(fs, path, nullptr));
    }
    // The part's own range, checked against the job's size and the parts
    // before it; everything else must be what this job's part `index` is.
    const CheckpointIdentity& got = part.identity;
    const int64_t end = got.range_end;
    if (got.job_id == job_id) {
      if (end > n || (index == parts - 1 && end < n)) {
        return absl::FailedPreconditionError(absl::StrFormat(
            "%s: the checkpoint holds a state of %s%d elements; this job's "
            "has %d",
            path, end > n ? "more than " : "", end, n));
      }
      if (got.range_begin != begin || end < begin) {
        return absl::DataLossError(absl::StrFormat(
            "%s holds [%d, %d): the parts do not tile the state (the part "
            "before it ends at %d)",
            path, got.range_begin, end, begin));
      }
    }
    const CheckpointIdentity expected = RingCheckpointPartIdentity(
        job_id, RingCheckpointPart{index, parts, FlatRange{begin, end}});
    if (absl::Status s = CheckIdentity(part, expected); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
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
    if (index > 0 && !part.tables.empty()) {
      return absl::DataLossError(
          absl::StrFormat("%s holds embedding tables: only part 0 does", path));
    }
    if (index == 0) checkpoint.tables = std::move(part.tables);
    const auto at = static_cast<std::ptrdiff_t>(begin);
    std::copy(part.params.begin(), part.params.end(),
              checkpoint.params.begin() + at);
    for (size_t k = 0; k < state_buffers; ++k) {
      std::copy(part.state[k].begin(), part.state[k].end(),
                checkpoint.state[k].begin() + at);
    }
    begin = end;
  }
  return checkpoint;
}

namespace {

// The versions of `dir` with a part 0, newest first.
absl::StatusOr<std::vector<int64_t>> PartZeroVersions(FileSystem* fs,
                                                      const std::string& dir) {
  ASSIGN_OR_RETURN(const std::vector<std::string> names,
                   fs->ListDirectory(dir));
  std::vector<int64_t> versions;
  for (const std::string& name : names) {
    if (std::optional<int64_t> v = ParseCheckpointName(name, 0))
      versions.push_back(*v);
  }
  std::sort(versions.rbegin(), versions.rend());
  return versions;
}

}  // namespace

bool HasRingCheckpoint(FileSystem* fs, const std::string& dir) {
  absl::StatusOr<std::vector<int64_t>> versions = PartZeroVersions(fs, dir);
  return versions.ok() && !versions->empty();
}

absl::StatusOr<RingCheckpoint> LoadNewestRingCheckpoint(FileSystem* fs,
                                                        const std::string& dir,
                                                        int64_t n) {
  ASSIGN_OR_RETURN(const std::vector<int64_t> versions,
                   PartZeroVersions(fs, dir));
  absl::Status newest_failure = absl::NotFoundError("no part 0 of any version");
  for (const int64_t version : versions) {
    absl::StatusOr<ShardCheckpoint> first =
        ReadPart(fs, CheckpointPath(dir, 0, version), nullptr);
    absl::StatusOr<RingCheckpoint> loaded =
        first.ok() ? LoadRingCheckpoint(fs, dir, first->identity.job_id,
                                        version, n, first->state.size())
                   : first.status();
    if (loaded.ok() || absl::IsFailedPrecondition(loaded.status()))
      return loaded;
    if (version == versions.front()) newest_failure = loaded.status();
  }
  return absl::NotFoundError(absl::StrCat("no complete ring checkpoint in ",
                                          dir, " (", newest_failure.message(),
                                          ")"));
}

}  // namespace ferry
