// PsService::ReadTables: the shard's embedding tables for an export, written
// at one version under the shard's lock (PsShard::WriteTablesSection) to a
// spool file (in the shard's checkpoint directory, else the temp
// directory), which is then mapped, deleted and sent in pieces of at most
// kTablesPieceBytes, one after the other, each piece's pages released once
// sent: the shard holds no copy of its rows in memory for an export.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_system.h"
#include "common/status_macros.h"
#include "proto/rpc_util.h"
#include "proto/unary_handler.h"
#include "ps/ps_service.h"

namespace ferry {
namespace {

constexpr size_t kTablesPieceBytes = 1 << 20;

// The shard's tables at a version >= `min_version`, mapped from a spool file
// named `name` in `dir` (deleted again before this returns).
absl::StatusOr<std::pair<int64_t, std::unique_ptr<MappedFile>>> SpoolTables(
    PsShard& shard, const v1::ReadTablesRequest& request,
    const std::string& dir, const std::string& name) {
  FileSystem* fs = PosixFileSystem();
  const std::string path = absl::StrCat(dir, "/", name);
  int64_t version = 0;
  {
    ASSIGN_OR_RETURN(std::unique_ptr<AtomicFile> file,
                     fs->NewScratchFile(path));
    ASSIGN_OR_RETURN(version,
                     shard.WriteTablesSection(request.job_id(),
                                              request.min_version(), *file));
    RETURN_IF_ERROR(file->Commit());
  }
  absl::StatusOr<std::unique_ptr<MappedFile>> mapped = fs->MapFile(path);
  (void)fs->DeleteFile(path);  // the mapping keeps the bytes
  if (!mapped.ok()) return mapped.status();
  return std::make_pair(version, *std::move(mapped));
}

// Deletes itself in OnDone. gRPC serializes its reactions.
class ReadTablesReactor final
    : public grpc::ServerWriteReactor<v1::ReadTablesChunk> {
 public:
  ReadTablesReactor(PsShard* shard, PsCheckpointer* checkpointer,
                    const v1::ReadTablesRequest& request)
      : shard_(shard) {
    std::string dir;
    if (checkpointer != nullptr && checkpointer->has_directory()) {
      dir = checkpointer->dir();
    } else {
      std::error_code error;
      dir = std::filesystem::temp_directory_path(error).string();
      if (error) dir = "/tmp";
    }
    auto spooled = SpoolTables(
        *shard, request, dir,
        absl::StrCat(kTablesSpoolPrefix, getpid(), "-",
                     reinterpret_cast<uintptr_t>(this), ".section"));
    if (!spooled.ok()) {
      Finish(ToGrpcStatus(absl::Status(
          spooled.status().code(),
          absl::StrCat("tables for an export: ", spooled.status().message()))));
      return;
    }
    version_ = spooled->first;
    section_ = std::move(spooled->second);
    WriteNext();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {  // the call is over (cancelled, deadline): OnDone follows
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "read cancelled"));
      return;
    }
    shard_->RecordBytes("coordinator",
                        static_cast<int64_t>(chunk_.ByteSizeLong()), 0);
    section_->Release(sent_);
    WriteNext();
  }

  void OnDone() override { delete this; }

 private:
  // Writes the next piece, or finishes once every byte was written (an
  // empty section still sends one piece: the version and size).
  void WriteNext() {
    const absl::string_view bytes = section_->bytes();
    if (written_ > 0 && written_ >= bytes.size()) {
      Finish(grpc::Status::OK);
      return;
    }
    const size_t n = std::min(kTablesPieceBytes, bytes.size() - written_);
    sent_ = bytes.substr(written_, n);
    chunk_.Clear();
    chunk_.set_version(version_);
    chunk_.set_total_bytes(static_cast<int64_t>(bytes.size()));
    chunk_.set_data(sent_.data(), sent_.size());
    written_ += std::max<size_t>(n, 1);
    StartWrite(&chunk_);
  }

  PsShard* const shard_;
  int64_t version_ = 0;
  std::unique_ptr<MappedFile> section_;
  absl::string_view sent_;  // the piece in flight
  size_t written_ = 0;      // bytes of the section sent (1 after an empty one)
  v1::ReadTablesChunk chunk_;
};

}  // namespace

absl::StatusOr<int> DeleteStaleTablesSpools(FileSystem* fs,
                                            const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> names = fs->ListDirectory(dir);
  if (absl::IsNotFound(names.status())) return 0;
  if (!names.ok()) return names.status();
  int deleted = 0;
  for (const std::string& name : *names) {
    if (!absl::StartsWith(name, kTablesSpoolPrefix)) continue;
    RETURN_IF_ERROR(fs->DeleteFile(absl::StrCat(dir, "/", name)));
    ++deleted;
  }
  return deleted;
}

grpc::ServerWriteReactor<v1::ReadTablesChunk>* PsService::ReadTables(
    grpc::CallbackServerContext* context,
    const v1::ReadTablesRequest* request) {
  return AuthorizedWrite<v1::ReadTablesChunk>(
      context, RpcMethod::kPsReadTables,
      [&] { return new ReadTablesReactor(shard_, checkpointer_, *request); });
}

}  // namespace ferry
