#include "coordinator/coordinator_persistence.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ferry {

CoordinatorPersistence::CoordinatorPersistence(FileSystem* fs, std::string dir)
    : fs_(fs),
      dir_(std::move(dir)),
      path_(dir_.empty() ? "" : dir_ + "/coordinator.state") {}

absl::StatusOr<std::optional<v1::CoordinatorState>>
CoordinatorPersistence::Load() {
  if (!enabled()) return std::nullopt;
  const absl::Status created = fs_->CreateDirectories(dir_);
  if (!created.ok()) {
    return absl::Status(created.code(),
                        absl::StrCat("cannot create the state directory ", dir_,
                                     ": ", created.message()));
  }
  absl::StatusOr<std::string> bytes = fs_->ReadFile(path_);
  if (absl::IsNotFound(bytes.status())) return std::nullopt;
  if (!bytes.ok()) return bytes.status();
  v1::CoordinatorState state;
  if (!state.ParseFromString(*bytes)) {
    return absl::DataLossError(
        absl::StrCat("cannot parse the coordinator state ", path_));
  }
  if (state.format() != kFormat) {
    return absl::FailedPreconditionError(
        absl::StrCat("saved coordinator state has format ", state.format(),
                     ", this build reads ", kFormat));
  }
  return state;
}

absl::Status CoordinatorPersistence::Save(const v1::CoordinatorState& state) {
  if (!enabled()) return absl::OkStatus();
  // Written twice per sync step: the fsync is batched (Sync, called by the
  // Coordinator at most every state_sync_interval and where it matters;
  // docs/elasticity.md).
  const std::string bytes = state.SerializeAsString();
  absl::MutexLock lock(&io_mu_);
  return fs_->ReplaceFile(path_, bytes);
}

absl::Status CoordinatorPersistence::Sync() {
  if (!enabled()) return absl::OkStatus();
  absl::MutexLock lock(&io_mu_);
  absl::Status synced = fs_->SyncFile(path_);
  if (absl::IsNotFound(synced)) return absl::OkStatus();  // nothing saved yet
  return synced;
}

}  // namespace ferry
