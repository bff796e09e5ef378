#include "coordinator/shard_tables_reader.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "proto/rpc_util.h"

namespace ferry {

absl::StatusOr<std::vector<TableCheckpoint>> ReadShardTables(
    v1::ParameterServer::Stub& stub, const std::string& job_id,
    int64_t min_version, absl::Duration timeout, ByteCounter* bytes) {
  grpc::ClientContext context;
  SetDeadline(context, timeout);
  v1::ReadTablesRequest request;
  request.set_job_id(job_id);
  request.set_min_version(min_version);
  if (bytes != nullptr) bytes->AddSent(request.ByteSizeLong());
  std::unique_ptr<grpc::ClientReader<v1::ReadTablesChunk>> reader =
      stub.ReadTables(&context, request);
  v1::ReadTablesChunk chunk;
  std::string section;
  int64_t version = -1, total = -1;
  absl::Status mismatch;
  while (reader->Read(&chunk)) {
    if (bytes != nullptr) bytes->AddReceived(chunk.ByteSizeLong());
    if (total < 0) {
      version = chunk.version();
      total = chunk.total_bytes();
      if (total < 0) {
        mismatch = absl::DataLossError(
            absl::StrCat("tables of negative size ", total));
        context.TryCancel();
        break;
      }
      section.reserve(static_cast<size_t>(total));
    }
    if (chunk.version() != version || chunk.total_bytes() != total ||
        static_cast<int64_t>(section.size() + chunk.data().size()) > total) {
      mismatch = absl::DataLossError(
          absl::StrCat("tables pieces disagree: version ", chunk.version(),
                       " after ", version, ", size ", chunk.total_bytes(),
                       " after ", total, ", or more bytes than announced"));
      context.TryCancel();
      break;
    }
    section.append(chunk.data());
  }
  const grpc::Status status = reader->Finish();
  if (!mismatch.ok()) return mismatch;
  if (!status.ok()) {
    return absl::Status(FromGrpcStatus(status).code(),
                        absl::StrCat("ReadTables: ", status.error_message()));
  }
  if (total < 0 || static_cast<int64_t>(section.size()) != total) {
    return absl::DataLossError(absl::StrCat(
        "ReadTables ended after ", section.size(), " of ", total, " bytes"));
  }
  return DecodeTables(section, /*with_counters=*/true);
}

}  // namespace ferry
