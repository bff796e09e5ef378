// PsService::ReadTables: the shard's embedding tables for an export, encoded
// at one version under the shard's lock (PsShard::EncodeTables), then
// written in pieces of at most kTablesPieceBytes, one after the other.
#include <algorithm>
#include <string>
#include <utility>

#include "proto/rpc_util.h"
#include "proto/unary_handler.h"
#include "ps/ps_service.h"

namespace ferry {
namespace {

constexpr size_t kTablesPieceBytes = 1 << 20;

// Deletes itself in OnDone. gRPC serializes its reactions.
class ReadTablesReactor final
    : public grpc::ServerWriteReactor<v1::ReadTablesChunk> {
 public:
  ReadTablesReactor(PsShard* shard, const v1::ReadTablesRequest& request)
      : shard_(shard) {
    absl::StatusOr<std::pair<int64_t, std::string>> tables =
        shard->EncodeTables(request.job_id(), request.min_version());
    if (!tables.ok()) {
      Finish(ToGrpcStatus(tables.status()));
      return;
    }
    version_ = tables->first;
    section_ = std::move(tables->second);
    WriteNext();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {  // the call is over (cancelled, deadline): OnDone follows
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "read cancelled"));
      return;
    }
    shard_->RecordBytes("coordinator",
                        static_cast<int64_t>(chunk_.ByteSizeLong()), 0);
    WriteNext();
  }

  void OnDone() override { delete this; }

 private:
  // Writes the next piece, or finishes once every byte was written (an
  // empty section still sends one piece: the version and size).
  void WriteNext() {
    if (written_ > 0 && written_ >= section_.size()) {
      Finish(grpc::Status::OK);
      return;
    }
    const size_t n = std::min(kTablesPieceBytes, section_.size() - written_);
    chunk_.Clear();
    chunk_.set_version(version_);
    chunk_.set_total_bytes(static_cast<int64_t>(section_.size()));
    chunk_.set_data(section_.data() + written_, n);
    written_ += std::max<size_t>(n, 1);
    StartWrite(&chunk_);
  }

  PsShard* const shard_;
  int64_t version_ = 0;
  std::string section_;
  size_t written_ = 0;  // bytes of section_ sent (1 after an empty one)
  v1::ReadTablesChunk chunk_;
};

}  // namespace

grpc::ServerWriteReactor<v1::ReadTablesChunk>* PsService::ReadTables(
    grpc::CallbackServerContext* context,
    const v1::ReadTablesRequest* request) {
  return AuthorizedWrite<v1::ReadTablesChunk>(
      context, [&] { return new ReadTablesReactor(shard_, *request); });
}

}  // namespace ferry
