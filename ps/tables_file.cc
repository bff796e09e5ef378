#include "ps/tables_file.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checkpoint_io.h"
#include "common/status_macros.h"

namespace ferry {
namespace {

CheckpointIdentity TablesFileIdentity() {
  CheckpointIdentity identity;
  identity.job_id = kTablesFileJob;
  return identity;
}

absl::Status Prefixed(const std::string& path, const absl::Status& s,
                      absl::string_view hint = "") {
  return absl::Status(s.code(), absl::StrCat(path, ": ", s.message(), hint));
}

}  // namespace

absl::Status WriteTablesFile(const std::string& path, const SparseStore& store,
                             FileSystem* fs) {
  const std::vector<std::unique_ptr<TablePartSource>> sources =
      store.CheckpointSources();
  std::vector<const TablePartSource*> tables;
  for (const auto& source : sources) tables.push_back(source.get());
  RETURN_IF_ERROR(ValidateTableSources(tables));
  CheckpointDenseView dense;
  dense.identity = TablesFileIdentity();
  ASSIGN_OR_RETURN(std::unique_ptr<AtomicFile> file, fs->NewAtomicFile(path));
  RETURN_IF_ERROR(EncodeCheckpointTo(dense, tables, *file));
  return file->Commit();
}

absl::Status RestoreTablesFile(const std::string& path, SparseStore& store,
                               TableScope scope, FileSystem* fs) {
  absl::StatusOr<std::unique_ptr<MappedFile>> file = fs->MapFile(path);
  if (!file.ok()) return Prefixed(path, file.status());
  MappedFile* mapped = file->get();
  const auto release = [mapped](absl::string_view part) {
    mapped->Release(part);
  };
  absl::StatusOr<CheckpointView> view =
      DecodeCheckpointView(mapped->bytes(), release);
  if (!view.ok()) return Prefixed(path, view.status());
  if (absl::Status s = CheckIdentityOf(view->identity, TablesFileIdentity());
      !s.ok()) {
    return Prefixed(path, s);
  }
  if (absl::Status s = store.Restore(view->tables, release, scope); !s.ok()) {
    return Prefixed(path, s,
                    absl::IsFailedPrecondition(s)
                        ? " (written with another --embedding-optimizer or "
                          "embedding dimension?)"
                        : "");
  }
  return absl::OkStatus();
}

}  // namespace ferry
