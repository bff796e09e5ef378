// CheckpointStore and CheckpointWriter (common/checkpoint_io.h): naming,
// writing, finding, reading and pruning one shard's checkpoint files.
#include <algorithm>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checkpoint_io.h"
#include "common/status_macros.h"

namespace ferry {

CheckpointStore::CheckpointStore(FileSystem* fs, std::string dir,
                                 CheckpointIdentity identity, int keep)
    : fs_(fs),
      dir_(dir.size() > 1 && dir.back() == '/' ? dir.substr(0, dir.size() - 1)
                                               : std::move(dir)),
      identity_(std::move(identity)),
      keep_(std::max(keep, 1)) {}

absl::Status CheckpointStore::CheckDense(
    const CheckpointDenseView& dense) const {
  if (absl::Status s = CheckIdentityOf(dense.identity, identity_); !s.ok()) {
    return s;
  }
  const size_t n =
      static_cast<size_t>(identity_.range_end - identity_.range_begin);
  bool sizes_ok = dense.params.size() == n &&
                  dense.state.size() <= kMaxCheckpointStateBuffers;
  for (absl::Span<const float> buffer : dense.state) {
    sizes_ok = sizes_ok && buffer.size() == n;
  }
  if (!sizes_ok) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "checkpoint buffers do not hold the slice's %d elements (or more "
        "than %d state buffers)",
        n, kMaxCheckpointStateBuffers));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> CheckpointStore::Write(
    const ShardCheckpoint& checkpoint) {
  const CheckpointDenseView dense = DenseViewOf(checkpoint);
  if (absl::Status s = CheckDense(dense); !s.ok()) return s;
  if (absl::Status s = ValidateTables(checkpoint.tables); !s.ok()) return s;
  const TableCheckpointSources sources(checkpoint.tables);
  std::unique_ptr<CheckpointWriter> writer = NewWriter();
  if (absl::Status s = writer->Write(dense, sources.pointers()); !s.ok()) {
    return s;
  }
  return writer->Commit();
}

std::unique_ptr<CheckpointWriter> CheckpointStore::NewWriter() {
  return std::unique_ptr<CheckpointWriter>(new CheckpointWriter(this));
}

void CheckpointStore::Pin(std::vector<int64_t> versions) {
  absl::MutexLock lock(&mu_);
  pinned_ = std::move(versions);
}

void CheckpointStore::PruneLocked() {
  mu_.AssertHeld();
  absl::StatusOr<std::vector<int64_t>> versions = ListVersionsLocked();
  if (!versions.ok()) {
    std::fprintf(stderr, "warning: cannot prune checkpoints in %s: %s\n",
                 dir_.c_str(), versions.status().ToString().c_str());
    return;
  }
  const int excess = static_cast<int>(versions->size()) - keep_;
  for (int i = 0; i < excess; ++i) {
    if (std::find(pinned_.begin(), pinned_.end(), (*versions)[i]) !=
        pinned_.end())
      continue;
    const std::string old =
        CheckpointPath(dir_, identity_.shard_id, (*versions)[i]);
    if (absl::Status s = fs_->DeleteFile(old); !s.ok()) {
      std::fprintf(stderr, "warning: cannot delete old checkpoint: %s\n",
                   s.ToString().c_str());
    }
  }
}

absl::Status CheckpointWriter::Write(
    const CheckpointDenseView& dense,
    absl::Span<const TablePartSource* const> tables) {
  if (used_) {
    return absl::FailedPreconditionError(
        "a checkpoint writer writes one checkpoint");
  }
  used_ = true;
  if (absl::Status s = store_->CheckDense(dense); !s.ok()) return s;
  if (absl::Status s = ValidateTableSources(tables); !s.ok()) return s;
  path_ =
      CheckpointPath(store_->dir_, store_->identity_.shard_id, dense.version);
  if (absl::Status s = store_->fs_->CreateDirectories(store_->dir_); !s.ok()) {
    return s;
  }
  absl::StatusOr<std::unique_ptr<AtomicFile>> file =
      store_->fs_->NewAtomicFile(path_);
  if (!file.ok()) return file.status();
  if (absl::Status s = EncodeCheckpointTo(dense, tables, **file); !s.ok()) {
    return s;  // *file goes: its temp file is removed
  }
  file_ = *std::move(file);
  written_ = true;
  return absl::OkStatus();
}

absl::StatusOr<std::string> CheckpointWriter::Commit() {
  if (!written_) {
    return absl::FailedPreconditionError(
        "no checkpoint was written to commit (or it was committed)");
  }
  written_ = false;
  std::unique_ptr<AtomicFile> file = std::move(file_);
  absl::MutexLock lock(&store_->mu_);
  if (absl::Status s = file->Commit(); !s.ok()) return s;
  store_->PruneLocked();
  return path_;
}

absl::StatusOr<std::vector<int64_t>> CheckpointStore::ListVersions() {
  absl::MutexLock lock(&mu_);
  return ListVersionsLocked();
}

absl::StatusOr<std::vector<int64_t>> CheckpointStore::ListVersionsLocked() {
  mu_.AssertHeld();
  absl::StatusOr<std::vector<std::string>> names = fs_->ListDirectory(dir_);
  if (absl::IsNotFound(names.status())) return std::vector<int64_t>();
  if (!names.ok()) return names.status();
  std::vector<int64_t> versions;
  for (const std::string& name : *names) {
    if (std::optional<int64_t> v =
            ParseCheckpointName(name, identity_.shard_id)) {
      versions.push_back(*v);
    }
  }
  std::sort(versions.begin(), versions.end());
  return versions;
}

absl::StatusOr<MappedCheckpoint> MapCheckpoint(
    FileSystem* fs, const std::string& path,
    const CheckpointIdentity& expected) {
  const auto prefixed = [&](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
  };
  MappedCheckpoint c;
  c.path = path;
  absl::StatusOr<std::unique_ptr<MappedFile>> file = fs->MapFile(path);
  if (!file.ok()) return file.status();  // NOT_FOUND names the path
  c.file = *std::move(file);
  absl::StatusOr<CheckpointView> view =
      DecodeCheckpointView(c.file->bytes(), c.releaser());
  if (!view.ok()) return prefixed(view.status());
  if (absl::Status s = CheckIdentityOf(view->identity, expected); !s.ok()) {
    return prefixed(s);
  }
  c.view = *std::move(view);
  return c;
}

absl::StatusOr<MappedCheckpoint> CheckpointStore::MapLocked(
    const std::string& path) {
  mu_.AssertHeld();
  return MapCheckpoint(fs_, path, identity_);
}

absl::StatusOr<MappedCheckpoint> CheckpointStore::MapNewest() {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::vector<int64_t>> versions = ListVersionsLocked();
  if (!versions.ok()) return versions.status();
  for (auto it = versions->rbegin(); it != versions->rend(); ++it) {
    absl::StatusOr<MappedCheckpoint> checkpoint =
        MapLocked(CheckpointPath(dir_, identity_.shard_id, *it));
    if (checkpoint.ok()) return checkpoint;
    std::fprintf(stderr, "warning: skipping checkpoint: %s\n",
                 checkpoint.status().ToString().c_str());
  }
  return absl::NotFoundError(absl::StrFormat(
      "no valid checkpoint of shard %d in %s", identity_.shard_id, dir_));
}

absl::StatusOr<MappedCheckpoint> CheckpointStore::MapVersion(int64_t version) {
  absl::MutexLock lock(&mu_);
  const std::string path = CheckpointPath(dir_, identity_.shard_id, version);
  absl::StatusOr<MappedCheckpoint> checkpoint = MapLocked(path);
  if (absl::IsNotFound(checkpoint.status())) {
    return absl::NotFoundError(
        absl::StrFormat("no checkpoint of shard %d at version %d in %s",
                        identity_.shard_id, version, dir_));
  }
  if (checkpoint.ok() && checkpoint->view.version != version) {
    return absl::DataLossError(absl::StrFormat("%s holds version %d, not %d",
                                               path, checkpoint->view.version,
                                               version));
  }
  return checkpoint;
}

absl::StatusOr<ShardCheckpoint> CheckpointStore::LoadNewest(std::string* path) {
  ASSIGN_OR_RETURN(MappedCheckpoint checkpoint, MapNewest());
  if (path != nullptr) *path = checkpoint.path;
  return checkpoint.view.Copy();
}

absl::StatusOr<ShardCheckpoint> CheckpointStore::LoadVersion(int64_t version) {
  ASSIGN_OR_RETURN(MappedCheckpoint checkpoint, MapVersion(version));
  return checkpoint.view.Copy();
}

absl::StatusOr<int> CheckpointStore::DeleteNewerThan(int64_t version) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::vector<int64_t>> versions = ListVersionsLocked();
  if (!versions.ok()) return versions.status();
  int deleted = 0;
  for (int64_t v : *versions) {
    if (v <= version) continue;
    absl::Status s =
        fs_->DeleteFile(CheckpointPath(dir_, identity_.shard_id, v));
    if (!s.ok()) return s;
    ++deleted;
  }
  return deleted;
}

}  // namespace ferry
