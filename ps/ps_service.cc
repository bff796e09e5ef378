#include "ps/ps_service.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "proto/raw_wire.h"
#include "proto/rpc_auth.h"
#include "proto/rpc_util.h"
#include "proto/unary_handler.h"
#include "ps/push_intake.h"
#include "ps/sparse_rows_wire.h"

namespace ferry {
namespace {

// Peer roles for byte accounting.
constexpr char kWorkerRole[] = "worker";
constexpr char kCoordinatorRole[] = "coordinator";

// The shard's traffic with the coordinator (PsShard::RecordBytes).
CountCallBytes CoordinatorBytes(PsShard* shard) {
  return [shard](int64_t sent, int64_t received) {
    shard->RecordBytes(kCoordinatorRole, sent, received);
  };
}

absl::Status NoCheckpointDirectory() {
  return absl::FailedPreconditionError(
      "this shard has no checkpoint directory (--checkpoint-dir)");
}

// Push: header, then chunks, commit at end-of-stream. Reads the stream raw
// and parses each message itself, so that a message that does not parse is
// an error rather than the stream's end (see ps_service.h). Deletes itself
// in OnDone. gRPC serializes the reactions of one call, so no lock is
// needed.
class PushReactor final : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  PushReactor(grpc::CallbackServerContext* context, PsShard* shard,
              LinkShaper* shaper, grpc::ByteBuffer* response)
      : context_(context), shard_(shard), shaper_(shaper), response_(response) {
    StartRead(&buffer_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      EndOfStream();
      return;
    }
    ++received_;
    const int64_t size = static_cast<int64_t>(buffer_.Length());
    shard_->RecordBytes(kWorkerRole, 0, size);
    if (shaper_ != nullptr) {
      // Link emulation: the message is taken in once it passed the receive
      // bucket, so that workers pushing at once queue behind each other on
      // this shard's link (incast), the last message of a push included.
      // Nothing finishes the call meanwhile (only reactions to a read do),
      // so the reactor outlives the timer's callback.
      const absl::Time now = absl::Now();
      const absl::Time release = shaper_->ReserveReceive(size, now);
      if (release > now) {
        shaper_->RunAt(release, [this] { TakeIn(); });
        return;
      }
    }
    TakeIn();
  }

  void OnDone() override { delete this; }

 private:
  // Parses and stages the message read into buffer_, then reads on.
  void TakeIn() {
    const absl::Status status =
        TakePushWire(*shard_, buffer_, received_, staging_);
    if (!status.ok()) {
      Finish(ToGrpcStatus(status));
      return;
    }
    StartRead(&buffer_);
  }

  void EndOfStream() {
    if (context_->IsCancelled()) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "push cancelled"));
      return;
    }
    if (staging_ == nullptr) {
      Finish(ToGrpcStatus(shard_->RejectPush(
          absl::InvalidArgumentError("push stream ended without a header"))));
      return;
    }
    absl::StatusOr<int64_t> version = shard_->CommitPush(std::move(staging_));
    v1::PushResponse response;
    if (version.ok()) response.set_version(*version);
    *response_ = SerializeMessage(response);
    shard_->RecordBytes(kWorkerRole, static_cast<int64_t>(response_->Length()),
                        0);
    Finish(ToGrpcStatus(version.status()));
  }

  grpc::CallbackServerContext* const context_;
  PsShard* const shard_;
  LinkShaper* const shaper_;          // null: no link emulation
  grpc::ByteBuffer* const response_;  // the encoded PushResponse
  grpc::ByteBuffer buffer_;           // the message being read
  int64_t received_ = 0;              // messages read, the one in hand included
  std::unique_ptr<PsPushStaging> staging_;
};

// A pull reactor's wait on the shard's version (no thread), and the race
// between its ready callback (another thread, or inline) and OnCancel:
// whichever resolves the wait finishes the call, and Finish is only called
// once the wait is resolved, so no callback touches a deleted reactor.
class VersionWait {
 public:
  // Registers `ready` for `min_version`. An error is the shard's refusal
  // (the caller finishes with it); on OK `ready` may already have run.
  // OnCancel cannot run before the reactor's constructor returns, so the id
  // is set before Cancel reads it.
  absl::Status Start(PsShard* shard, const std::string& job_id,
                     int64_t min_version, int64_t generation,
                     PsShard::ReadyCallback ready) {
    {
      absl::MutexLock lock(&mu_);
      waiting_ = true;
    }
    absl::StatusOr<PullWaitId> id = shard->WaitForVersion(
        job_id, min_version, std::move(ready), generation);
    absl::MutexLock lock(&mu_);
    if (!id.ok()) {
      waiting_ = false;
      return id.status();
    }
    wait_id_ = *id;
    return absl::OkStatus();
  }

  // From OnCancel: true when the wait was withdrawn before its callback ran
  // (the caller finishes CANCELLED); false when the callback runs or ran
  // (it sees the cancellation) or the call is past waiting.
  bool Cancel(PsShard* shard) {
    PullWaitId id = kNoPullWait;
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      if (!waiting_) return false;
      id = wait_id_;
    }
    if (id == kNoPullWait || !shard->CancelWait(id)) return false;
    absl::MutexLock lock(&mu_);
    waiting_ = false;
    return true;
  }

  // First thing in the ready callback: true when the call was cancelled
  // meanwhile (the caller finishes CANCELLED).
  bool Ready() {
    absl::MutexLock lock(&mu_);
    waiting_ = false;
    return cancelled_;
  }

 private:
  absl::Mutex mu_;
  bool waiting_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  PullWaitId wait_id_ ABSL_GUARDED_BY(mu_) = kNoPullWait;
};

// The encoded fields of a PullResponse before its data (version, chunk_id,
// data's tag and length), canonical protobuf encoding.
grpc::Slice PullPrefix(int64_t version, int32_t chunk_id, size_t data_size) {
  constexpr uint8_t kVersionTag = 1 << 3 | kWireVarint;
  constexpr uint8_t kChunkIdTag = 2 << 3 | kWireVarint;
  constexpr uint8_t kDataTag = 3 << 3 | kWireLength;
  uint8_t buffer[40];
  uint8_t* p = buffer;
  if (version != 0) {  // proto3 omits zero scalars
    *p++ = kVersionTag;
    p = PutVarint(static_cast<uint64_t>(version), p);
  }
  if (chunk_id != 0) {
    *p++ = kChunkIdTag;
    p = PutVarint(static_cast<uint64_t>(static_cast<int64_t>(chunk_id)), p);
  }
  if (data_size != 0) {
    *p++ = kDataTag;
    p = PutVarint(data_size, p);
  }
  return grpc::Slice(buffer, static_cast<size_t>(p - buffer));
}

// A slice over `n` bytes at `data` inside `snapshot`, which it keeps alive
// until gRPC has sent them: no copy of the parameters.
grpc::Slice SnapshotSlice(std::shared_ptr<const PsSnapshot> snapshot,
                          const void* data, size_t n) {
  using Ref = std::shared_ptr<const PsSnapshot>;
  return grpc::Slice(
      const_cast<void*>(data), n,
      [](void* ref) { delete static_cast<Ref*>(ref); },
      new Ref(std::move(snapshot)));
}

// Pull: waits on the shard without a thread, then streams the snapshot one
// chunk per message (an encoded PullResponse whose data references the
// snapshot). VersionWait settles the race of the ready callback with
// OnCancel.
class PullReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  PullReactor(PsShard* shard, LinkShaper* shaper,
              const grpc::ByteBuffer& raw_request)
      : shard_(shard), shaper_(shaper) {
    v1::PullRequest request;
    grpc::ByteBuffer copy(raw_request);  // parsing consumes its input
    if (absl::Status parsed = ParseStreamMessage(copy, request, "pull", 1);
        !parsed.ok()) {
      Finish(ToGrpcStatus(parsed));
      return;
    }
    shard_->RecordBytes(kWorkerRole, 0,
                        static_cast<int64_t>(request.ByteSizeLong()));
    if (request.range_end() != 0 &&
        (request.range_begin() < 0 ||
         request.range_begin() >= request.range_end())) {
      Finish(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("pull range [", request.range_begin(), ", ",
                       request.range_end(), ") is empty or negative")));
      return;
    }
    const FlatRange range{request.range_begin(), request.range_end()};
    for (const Chunk& chunk : shard_->owned_chunks()) {
      if (ChunkInPullRange(chunk, range)) chunks_.push_back(&chunk);
    }
    if (absl::Status started = wait_.Start(
            shard_, request.job_id(), request.min_version(),
            request.generation(),
            [this](absl::StatusOr<std::shared_ptr<const PsSnapshot>> snapshot) {
              OnReady(std::move(snapshot));
            });
        !started.ok()) {
      Finish(ToGrpcStatus(started));
    }
  }

  void OnCancel() override {
    if (wait_.Cancel(shard_)) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "pull cancelled"));
    }
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "pull stream broken"));
      return;
    }
    WriteNext();
  }

  void OnDone() override { delete this; }

 private:
  void OnReady(absl::StatusOr<std::shared_ptr<const PsSnapshot>> snapshot) {
    if (wait_.Ready()) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "pull cancelled"));
      return;
    }
    if (!snapshot.ok()) {  // shut down or rolled back
      Finish(ToGrpcStatus(snapshot.status()));
      return;
    }
    snapshot_ = *std::move(snapshot);
    ready_ = absl::Now();
    WriteNext();
  }

  // One write in flight at a time: called by OnReady, then by OnWriteDone.
  void WriteNext() {
    if (next_chunk_ >= chunks_.size()) {  // no chunk (in the range)
      Finish(grpc::Status::OK);
      return;
    }
    const Chunk& chunk = *chunks_[next_chunk_++];
    const float* values =
        snapshot_->values.data() + (chunk.flat_offset - shard_->range().begin);
    const size_t size = static_cast<size_t>(chunk.length) * sizeof(float);
    const grpc::Slice slices[2] = {
        PullPrefix(snapshot_->version, chunk.id, size),
        SnapshotSlice(snapshot_, values, size)};
    response_ = grpc::ByteBuffer(slices, 2);
    shard_->RecordBytes(kWorkerRole, static_cast<int64_t>(response_.Length()),
                        0);
    const bool last = next_chunk_ == chunks_.size();
    if (shaper_ != nullptr) {
      // Link emulation: every chunk was ready at ready_; the shaper clamps
      // that to now - latency, so the latency of the previous message does
      // not delay this one's serialization. Finish comes only from the
      // write (or its failure), after the timer's callback.
      const absl::Time now = absl::Now();
      const absl::Time release = shaper_->ReserveSend(
          static_cast<int64_t>(response_.Length()), now, ready_);
      if (release > now) {
        shaper_->RunAt(release, [this, last] { StartNextWrite(last); });
        return;
      }
    }
    StartNextWrite(last);
  }

  void StartNextWrite(bool last) {
    if (last) {
      StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
    } else {
      StartWrite(&response_);
    }
  }

  PsShard* const shard_;
  LinkShaper* const shaper_;  // null: no link emulation
  absl::Time ready_;          // when the snapshot came (link emulation)
  VersionWait wait_;
  // Owned by the writer chain (OnReady -> WriteNext -> OnWriteDone ...).
  std::shared_ptr<const PsSnapshot> snapshot_;
  std::vector<const Chunk*> chunks_;  // the owned chunks the pull asked for
  size_t next_chunk_ = 0;
  grpc::ByteBuffer response_;
};

// PullRows: waits on the shard for min_version without a thread (as Pull),
// then reads the rows under the shard's lock and answers.
class PullRowsReactor final : public grpc::ServerUnaryReactor {
 public:
  PullRowsReactor(PsShard* shard, const v1::PullRowsRequest& request,
                  v1::PullRowsResponse* response)
      : shard_(shard), request_(request), response_(response) {
    shard_->RecordBytes(kWorkerRole, 0,
                        static_cast<int64_t>(request_.ByteSizeLong()));
    if (absl::Status started = wait_.Start(
            shard_, request_.job_id(), request_.min_version(),
            request_.generation(),
            [this](absl::StatusOr<std::shared_ptr<const PsSnapshot>> snapshot) {
              OnReady(snapshot.status());
            });
        !started.ok()) {
      Finish(ToGrpcStatus(started));
    }
  }

  void OnCancel() override {
    if (wait_.Cancel(shard_)) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "row pull cancelled"));
    }
  }

  void OnDone() override { delete this; }

 private:
  void OnReady(const absl::Status& waited) {
    if (wait_.Ready()) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "row pull cancelled"));
      return;
    }
    Finish(ToGrpcStatus(waited.ok() ? Read() : waited));
  }

  absl::Status Read() {
    std::vector<SparseRows> parts;
    std::vector<PsShard::RowsToRead> tables;
    parts.reserve(request_.tables_size());
    for (const v1::SparseRowsPart& part : request_.tables()) {
      absl::StatusOr<SparseRows> rows = FromSparseRowsPart(part);
      if (!rows.ok()) return rows.status();
      parts.push_back(*std::move(rows));
    }
    for (const SparseRows& part : parts) {
      tables.push_back({part.table, part.ids});
    }
    std::vector<std::vector<float>> values;
    absl::StatusOr<int64_t> version =
        shard_->ReadRows(request_.job_id(), tables, values);
    if (!version.ok()) return version.status();
    response_->set_version(*version);
    for (size_t i = 0; i < parts.size(); ++i) {
      ToSparseRowsPart(parts[i].table, {}, values[i], response_->add_tables());
    }
    shard_->RecordBytes(kWorkerRole,
                        static_cast<int64_t>(response_->ByteSizeLong()), 0);
    return absl::OkStatus();
  }

  PsShard* const shard_;
  const v1::PullRowsRequest& request_;    // owned by gRPC until OnDone
  v1::PullRowsResponse* const response_;  // likewise
  VersionWait wait_;
};

}  // namespace

grpc::ServerUnaryReactor* PsService::PullRows(
    grpc::CallbackServerContext* context, const v1::PullRowsRequest* request,
    v1::PullRowsResponse* response) {
  return AuthorizedUnary(context, RpcMethod::kPsPullRows, [&] {
    return new PullRowsReactor(shard_, *request, response);
  });
}

LinkShaper* PsService::LinkOf(
    const grpc::CallbackServerContext* context) const {
  // The worker of this process (a colocated shard) uses no link.
  return IsInProcessCall(context) ? nullptr : shaper_;
}

grpc::ServerReadReactor<grpc::ByteBuffer>* PsService::Push(
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response) {
  return AuthorizedRead<grpc::ByteBuffer>(context, RpcMethod::kPsPush, [&] {
    return new PushReactor(context, shard_, LinkOf(context), response);
  });
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* PsService::Pull(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return AuthorizedWrite<grpc::ByteBuffer>(context, RpcMethod::kPsPull, [&] {
    return new PullReactor(shard_, LinkOf(context), *request);
  });
}

grpc::ServerUnaryReactor* PsService::FinalizeStep(
    grpc::CallbackServerContext* context,
    const v1::FinalizeStepRequest* request,
    v1::FinalizeStepResponse* response) {
  return HandleUnary(
      context, RpcMethod::kPsFinalizeStep, *request, *response,
      CoordinatorBytes(shard_), [&] {
        std::vector<PsContributor> contributors;
        contributors.reserve(request->contributors_size());
        for (const v1::Contributor& c : request->contributors()) {
          contributors.push_back(PsContributor{c.worker_id(), c.num_samples()});
        }
        absl::StatusOr<int64_t> version =
            shard_->FinalizeStep(request->job_id(), request->step(),
                                 contributors, request->generation());
        if (version.ok()) response->set_version(*version);
        return version.status();
      });
}

grpc::ServerUnaryReactor* PsService::Fence(grpc::CallbackServerContext* context,
                                           const v1::FenceRequest* request,
                                           v1::FenceResponse* response) {
  return HandleUnary(context, RpcMethod::kPsFence, *request, *response,
                     CoordinatorBytes(shard_), [&] {
                       absl::StatusOr<int64_t> fence = shard_->RaiseFence(
                           request->job_id(), request->generation());
                       if (fence.ok()) response->set_generation(*fence);
                       return fence.status();
                     });
}

grpc::ServerUnaryReactor* PsService::ShardInfo(
    grpc::CallbackServerContext* context, const v1::ShardInfoRequest* request,
    v1::ShardInfoResponse* response) {
  // Not counted: a status read.
  return HandleUnary(
      context, RpcMethod::kPsShardInfo, *request, *response, CountCallBytes(),
      [&] {
        const PsShardInfo info = shard_->Info();
        response->set_job_id(info.job_id);
        response->set_shard_id(info.shard_id);
        response->set_num_shards(info.num_shards);
        response->set_version(info.version);
        response->set_num_elements(info.num_elements);
        for (int32_t id : info.chunk_ids) response->add_chunk_ids(id);
        response->set_rejected_pushes(info.rejected_pushes);
        auto& sent = *response->mutable_bytes()->mutable_sent();
        for (const auto& [role, bytes] : info.bytes_sent) sent[role] = bytes;
        auto& received = *response->mutable_bytes()->mutable_received();
        for (const auto& [role, bytes] : info.bytes_received)
          received[role] = bytes;
        response->set_pending_pulls(info.pending_pulls);
        response->set_steps_finalized_on_push(info.steps_finalized_on_push);
        if (info.sparse.has_value()) {
          const SparseTableStats& t = info.sparse->total;
          v1::SparseStats* sparse = response->mutable_sparse();
          sparse->set_rows(t.rows);
          sparse->set_pending_ids(t.pending_ids);
          sparse->set_rows_created(t.rows_created);
          sparse->set_ids_admitted(t.ids_admitted);
          sparse->set_updates_dropped(t.updates_dropped);
          sparse->set_evicted_ttl(t.evicted_ttl);
          sparse->set_evicted_memory(t.evicted_memory);
          sparse->set_bytes(info.sparse->bytes);
        }
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* PsService::Checkpoint(
    grpc::CallbackServerContext* context, const v1::CheckpointRequest* request,
    v1::CheckpointResponse* response) {
  return HandleUnary(
      context, RpcMethod::kPsCheckpoint, *request, *response,
      CoordinatorBytes(shard_), [&] {
        if (checkpointer_ == nullptr) return NoCheckpointDirectory();
        absl::StatusOr<PsCheckpointWritten> written = checkpointer_->Checkpoint(
            request->job_id(), request->version(),
            {request->keep().begin(), request->keep().end()});
        if (written.ok()) {
          response->set_path(written->path);
          response->set_version(written->version);
        }
        return written.status();
      });
}

grpc::ServerUnaryReactor* PsService::Restore(
    grpc::CallbackServerContext* context, const v1::RestoreRequest* request,
    v1::RestoreResponse* response) {
  return HandleUnary(context, RpcMethod::kPsRestore, *request, *response,
                     CoordinatorBytes(shard_), [&] {
                       if (checkpointer_ == nullptr)
                         return NoCheckpointDirectory();
                       absl::StatusOr<int64_t> version = checkpointer_->Restore(
                           request->job_id(), request->version(),
                           request->generation());
                       if (version.ok()) response->set_version(*version);
                       return version.status();
                     });
}

}  // namespace ferry
