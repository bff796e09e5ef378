// PsService: the gRPC callback-API adapter of ferry.v1.ParameterServer over a
// PsShard. It translates protos and statuses and counts the bytes of every
// message it receives and sends (pushes and pulls as role "worker", finalize
// as role "coordinator"); all rules live in PsShard.
//
//  - Push: a read reactor that opens the push on the header, copies every
//    chunk straight into the shard's staging buffer and commits on
//    end-of-stream; the first error finishes the call with that status.
//    The method is registered raw (ByteBuffer) and parses each PushRequest
//    itself: gRPC reports a message that does not parse to a read reactor
//    exactly like the end of the stream, which would commit a push whose
//    tail was lost. Instead such a message ends the call INVALID_ARGUMENT
//    "push message N does not parse" (N counts from 1) and nothing of the
//    push is applied. The response is the canonical PushResponse encoding.
//  - Pull: a write reactor that registers a PsShard wait (no thread blocks)
//    and streams one PullResponse per owned chunk of the snapshot, one write
//    in flight at a time. The method is registered raw (ByteBuffer): each
//    message is the canonical PullResponse encoding whose `data` is a slice
//    over the snapshot itself (kept alive until sent), so the parameters are
//    never copied into a message. A cancelled call (client deadline included)
//    cancels its wait; the client sees its own DEADLINE_EXCEEDED / CANCELLED.
//    UNAVAILABLE when the shard shuts its waits down, ABORTED "shard S
//    rolled back to version V" when a Restore ends them.
//  - Link emulation (an optional LinkShaper): each push message received
//    waits for the shaper's receive bucket before the next is read, each
//    pull message waits for its send bucket before it is written, on the
//    shaper's timer thread. The coordinator's control RPCs are not shaped.
//  - FinalizeStep, Fence, ShardInfo: unary.
//  - ReadTables: server streaming; the tables are written at once, under
//    the shard's lock (pushes and pulls wait), to a spool file in the
//    checkpoint directory (else the temp directory), then sent from it in
//    1 MiB pieces.
//  - Checkpoint, Restore: unary, through a PsCheckpointer (file I/O on the
//    gRPC thread); FAILED_PRECONDITION "no checkpoint directory" when the
//    service has none.
//  - Every method first checks the process's bearer token
//    (proto/rpc_auth.h): UNAUTHENTICATED "missing bearer token" / "wrong
//    bearer token" when one is configured and the call lacks it; nothing
//    is read, counted or waited for then.
//
// Thread safety: gRPC calls the methods concurrently; the shard and the
// checkpointer are thread-safe. They must outlive the service, and the
// service must outlive the grpc::Server that serves it.
#ifndef FERRY_PS_PS_SERVICE_H_
#define FERRY_PS_PS_SERVICE_H_

#include <string>

#include "common/file_system.h"
#include "common/link_shaper.h"
#include "ferry/v1/ps.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "ps/ps_checkpointer.h"
#include "ps/ps_shard.h"

namespace ferry {

// The names of ReadTables' spool files start with this.
inline constexpr char kTablesSpoolPrefix[] = ".read-tables-";

// Deletes the spool files a shard killed during a ReadTables left in `dir`
// (its checkpoint directory), at start, before it serves; returns how many.
// Errors: listing the directory (NOT_FOUND counts as none) or deleting.
absl::StatusOr<int> DeleteStaleTablesSpools(FileSystem* fs,
                                            const std::string& dir);

class PsService final : public v1::ParameterServer::WithRawCallbackMethod_Push<
                            v1::ParameterServer::WithRawCallbackMethod_Pull<
                                v1::ParameterServer::CallbackService>> {
 public:
  // `checkpointer` may be null (no checkpoints); when set, it is `shard`'s.
  // `shaper` may be null (no link emulation); it must outlive the service.
  // In-process calls (a worker hosting this shard) bypass it: they use no
  // link.
  explicit PsService(PsShard* shard, PsCheckpointer* checkpointer = nullptr,
                     LinkShaper* shaper = nullptr)
      : shard_(shard), checkpointer_(checkpointer), shaper_(shaper) {}

  // The stream carries encoded ferry.v1.PushRequest messages; `response`
  // receives the encoded ferry.v1.PushResponse.
  grpc::ServerReadReactor<grpc::ByteBuffer>* Push(
      grpc::CallbackServerContext* context,
      grpc::ByteBuffer* response) override;
  // `request` is an encoded ferry.v1.PullRequest; the stream carries
  // encoded ferry.v1.PullResponse messages.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Pull(
      grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* Fence(grpc::CallbackServerContext* context,
                                  const v1::FenceRequest* request,
                                  v1::FenceResponse* response) override;
  grpc::ServerUnaryReactor* FinalizeStep(
      grpc::CallbackServerContext* context,
      const v1::FinalizeStepRequest* request,
      v1::FinalizeStepResponse* response) override;
  grpc::ServerUnaryReactor* ShardInfo(grpc::CallbackServerContext* context,
                                      const v1::ShardInfoRequest* request,
                                      v1::ShardInfoResponse* response) override;
  grpc::ServerUnaryReactor* Checkpoint(
      grpc::CallbackServerContext* context,
      const v1::CheckpointRequest* request,
      v1::CheckpointResponse* response) override;
  grpc::ServerUnaryReactor* Restore(grpc::CallbackServerContext* context,
                                    const v1::RestoreRequest* request,
                                    v1::RestoreResponse* response) override;
  // Waits for the version like Pull (no thread), then answers the rows.
  grpc::ServerUnaryReactor* PullRows(grpc::CallbackServerContext* context,
                                     const v1::PullRowsRequest* request,
                                     v1::PullRowsResponse* response) override;
  // The shard's tables, for an export (ps_service_tables.cc).
  grpc::ServerWriteReactor<v1::ReadTablesChunk>* ReadTables(
      grpc::CallbackServerContext* context,
      const v1::ReadTablesRequest* request) override;

 private:
  // The link a push or pull of `context` crosses: shaper_, or none for an
  // in-process call.
  LinkShaper* LinkOf(const grpc::CallbackServerContext* context) const;

  PsShard* const shard_;
  PsCheckpointer* const checkpointer_;
  LinkShaper* const shaper_;
};

}  // namespace ferry

#endif  // FERRY_PS_PS_SERVICE_H_
