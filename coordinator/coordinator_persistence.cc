#include "coordinator/coordinator_persistence.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/crc32c.h"
#include "common/status_macros.h"

namespace ferry {
namespace {

constexpr char kMagic[8] = {'F', 'E', 'R', 'R', 'Y', 'C', 'S', '1'};
constexpr size_t kHeaderBytes = 8 + 8 + 8 + 4;

void StoreLittleEndian(char* at, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) at[i] = static_cast<char>(value >> (8 * i));
}

uint64_t LoadLittleEndian(const char* at, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) {
    value |= uint64_t{static_cast<unsigned char>(at[i])} << (8 * i);
  }
  return value;
}

std::string EncodeRecord(uint64_t sequence, const std::string& state) {
  std::string record(kHeaderBytes, '\0');
  std::memcpy(record.data(), kMagic, sizeof(kMagic));
  StoreLittleEndian(record.data() + 8, sequence, 8);
  StoreLittleEndian(record.data() + 16, state.size(), 8);
  StoreLittleEndian(record.data() + 24, Crc32c(state), 4);
  record += state;
  return record;
}

// The record's sequence number and state bytes; nullopt for anything but a
// whole record (torn, truncated, another file).
std::optional<std::pair<uint64_t, absl::string_view>> DecodeRecord(
    absl::string_view bytes) {
  if (bytes.size() < kHeaderBytes ||
      std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return std::nullopt;
  }
  const uint64_t sequence = LoadLittleEndian(bytes.data() + 8, 8);
  const uint64_t length = LoadLittleEndian(bytes.data() + 16, 8);
  const uint64_t crc = LoadLittleEndian(bytes.data() + 24, 4);
  if (length != bytes.size() - kHeaderBytes) return std::nullopt;
  const absl::string_view state = bytes.substr(kHeaderBytes);
  if (Crc32c(state) != crc) return std::nullopt;
  return std::make_pair(sequence, state);
}

absl::Status CheckFormat(const v1::CoordinatorState& state) {
  if (state.format() != CoordinatorPersistence::kFormat) {
    return absl::FailedPreconditionError(
        absl::StrCat("saved coordinator state has format ", state.format(),
                     ", this build reads ", CoordinatorPersistence::kFormat));
  }
  return absl::OkStatus();
}

}  // namespace

CoordinatorPersistence::CoordinatorPersistence(FileSystem* fs, std::string dir)
    : fs_(fs),
      dir_(std::move(dir)),
      path_(dir_.empty() ? "" : dir_ + "/coordinator.state") {}

std::string CoordinatorPersistence::SlotPath(int slot) const {
  return absl::StrCat(path_, ".", slot);
}

absl::StatusOr<std::optional<v1::CoordinatorState>>
CoordinatorPersistence::Load() {
  if (!enabled()) return std::nullopt;
  const absl::Status created = fs_->CreateDirectories(dir_);
  if (!created.ok()) {
    return absl::Status(created.code(),
                        absl::StrCat("cannot create the state directory ", dir_,
                                     ": ", created.message()));
  }
  int newest = -1;
  uint64_t newest_sequence = 0;
  std::string newest_state;
  bool torn = false;
  for (int slot = 0; slot < kSlots; ++slot) {
    absl::StatusOr<std::string> bytes = fs_->ReadFile(SlotPath(slot));
    if (absl::IsNotFound(bytes.status())) continue;
    if (!bytes.ok()) return bytes.status();
    const auto record = DecodeRecord(*bytes);
    if (!record.has_value()) {
      torn = torn || !bytes->empty();
      continue;
    }
    if (newest < 0 || record->first > newest_sequence) {
      newest = slot;
      newest_sequence = record->first;
      newest_state = std::string(record->second);
    }
  }
  if (newest < 0) {
    absl::StatusOr<std::optional<v1::CoordinatorState>> legacy = LoadLegacy();
    if (legacy.ok() && !legacy->has_value() && torn) {
      return absl::DataLossError(
          absl::StrCat("no slot of the coordinator state ", path_,
                       ".N holds a whole record"));
    }
    return legacy;
  }
  v1::CoordinatorState state;
  if (!state.ParseFromString(newest_state)) {
    return absl::DataLossError(
        absl::StrCat("cannot parse the coordinator state ", SlotPath(newest)));
  }
  RETURN_IF_ERROR(CheckFormat(state));
  absl::MutexLock lock(&io_mu_);
  sequence_ = newest_sequence;
  last_saved_ = newest;
  protected_ = newest;  // the only whole state until a newer one is synced
  return state;
}

absl::StatusOr<std::optional<v1::CoordinatorState>>
CoordinatorPersistence::LoadLegacy() {
  absl::StatusOr<std::string> bytes = fs_->ReadFile(path_);
  if (absl::IsNotFound(bytes.status())) return std::nullopt;
  if (!bytes.ok()) return bytes.status();
  v1::CoordinatorState state;
  if (!state.ParseFromString(*bytes)) {
    return absl::DataLossError(
        absl::StrCat("cannot parse the coordinator state ", path_));
  }
  RETURN_IF_ERROR(CheckFormat(state));
  return state;
}

int CoordinatorPersistence::NextSlot() const {
  for (int slot = 0; slot < kSlots; ++slot) {
    if (slot != protected_ && slot != last_saved_) return slot;
  }
  return 0;  // unreachable with three slots
}

absl::Status CoordinatorPersistence::Save(const v1::CoordinatorState& state) {
  if (!enabled()) return absl::OkStatus();
  const std::string bytes = state.SerializeAsString();
  absl::MutexLock lock(&io_mu_);
  const int slot = NextSlot();
  if (files_[slot] == nullptr) {
    ASSIGN_OR_RETURN(files_[slot], fs_->OpenRewritable(SlotPath(slot)));
  }
  const absl::Status written =
      files_[slot]->Rewrite(EncodeRecord(sequence_ + 1, bytes));
  // On error the slot is torn; the newest whole record is the one before
  // (last_saved_), and the next Save rewrites this slot again.
  if (!written.ok()) return written;
  ++sequence_;
  last_saved_ = slot;
  return absl::OkStatus();
}

absl::Status CoordinatorPersistence::Sync() {
  if (!enabled()) return absl::OkStatus();
  absl::MutexLock lock(&io_mu_);
  if (last_saved_ < 0 || files_[last_saved_] == nullptr) {
    return absl::OkStatus();  // nothing saved in this run
  }
  RETURN_IF_ERROR(files_[last_saved_]->Sync());
  protected_ = last_saved_;
  if (!synced_once_) {
    synced_once_ = true;
    // An earlier build's file: the slots hold a newer state now.
    const absl::Status deleted = fs_->DeleteFile(path_);
    if (!deleted.ok() && !absl::IsNotFound(deleted)) return deleted;
  }
  return absl::OkStatus();
}

}  // namespace ferry
