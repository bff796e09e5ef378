#include "coordinator/shard_tables_reader.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "proto/rpc_util.h"

namespace ferry {

absl::StatusOr<int64_t> ReadShardTablesToFile(
    v1::ParameterServer::Stub& stub, const std::string& job_id,
    int64_t min_version, const std::string& path, FileSystem* fs,
    absl::Duration timeout, ByteCounter* bytes) {
  ASSIGN_OR_RETURN(std::unique_ptr<AtomicFile> file, fs->NewScratchFile(path));
  grpc::ClientContext context;
  SetDeadline(context, timeout);
  v1::ReadTablesRequest request;
  request.set_job_id(job_id);
  request.set_min_version(min_version);
  if (bytes != nullptr) bytes->AddSent(request.ByteSizeLong());
  std::unique_ptr<grpc::ClientReader<v1::ReadTablesChunk>> reader =
      stub.ReadTables(&context, request);
  v1::ReadTablesChunk chunk;
  int64_t version = -1, total = -1, received = 0;
  absl::Status failed;
  while (reader->Read(&chunk)) {
    if (bytes != nullptr) bytes->AddReceived(chunk.ByteSizeLong());
    if (total < 0) {
      version = chunk.version();
      total = chunk.total_bytes();
      if (total < 0) {
        failed = absl::DataLossError(
            absl::StrCat("tables of negative size ", total));
        context.TryCancel();
        break;
      }
    }
    if (chunk.version() != version || chunk.total_bytes() != total ||
        received + static_cast<int64_t>(chunk.data().size()) > total) {
      failed = absl::DataLossError(
          absl::StrCat("tables pieces disagree: version ", chunk.version(),
                       " after ", version, ", size ", chunk.total_bytes(),
                       " after ", total, ", or more bytes than announced"));
      context.TryCancel();
      break;
    }
    received += static_cast<int64_t>(chunk.data().size());
    failed = file->Append(chunk.data());
    if (!failed.ok()) {
      context.TryCancel();
      break;
    }
  }
  const grpc::Status status = reader->Finish();
  if (!failed.ok()) return failed;
  if (!status.ok()) {
    return absl::Status(FromGrpcStatus(status).code(),
                        absl::StrCat("ReadTables: ", status.error_message()));
  }
  if (total < 0 || received != total) {
    return absl::DataLossError(absl::StrCat("ReadTables ended after ", received,
                                            " of ", total, " bytes"));
  }
  RETURN_IF_ERROR(file->Commit());
  return version;
}

}  // namespace ferry
