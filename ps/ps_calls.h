// Internal to ps/ps_client.cc and ps/ps_client_rows.cc (not an API): the
// per-shard channel of a GrpcParameterClient, the two calls a client makes
// of one shard (ShardPullCall: one Pull into the flat buffer; ShardPushCall:
// one Push, messages queued by the push session), and their gRPC callback
// reactors PullCall and PushCall (reactions in ps_calls.cc). A shard this
// process hosts is called directly instead (ps/local_shard_calls.h);
// MakePullCall / MakePushCall choose.
#ifndef FERRY_PS_PS_CALLS_H_
#define FERRY_PS_PS_CALLS_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/byte_counter.h"
#include "common/link_shaper.h"
#include "common/sharding.h"
#include "ferry/v1/ps.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "proto/raw_wire.h"
#include "ps/call_rounds.h"
#include "ps/ps_client.h"

namespace ferry {

class PsShard;

// Push and Pull go through a generic stub with raw ByteBuffers, so that chunk
// data is written from and read into tensor memory without going through a
// protobuf `bytes` field (TensorFlow's grpc_tensor_coding pattern). The
// messages on the wire are exactly the canonical ferry.v1.PushRequest /
// PullResponse encodings; the shard is a normal ferry.v1.ParameterServer.
struct GrpcParameterClient::Shard {
  int id = 0;
  std::string address;
  std::unique_ptr<grpc::GenericStub> stub;
  // Typed stub on the same channel (one connection) for CheckShards().
  std::unique_ptr<v1::ParameterServer::Stub> control;
  int64_t num_chunks = 0;  // chunks this shard owns
  // Buffers for the chunks pushed to this shard (at most its bytes kept).
  std::shared_ptr<ChunkBufferPool> buffers;
  // Bytes exchanged with this shard alone (the client's counter has all).
  std::unique_ptr<ByteCounter> bytes = std::make_unique<ByteCounter>();
  LinkShaper* shaper = nullptr;  // the client's link emulation; null: none
  // Reached over an in-process channel (a shard this process hosts): no
  // link emulation, and its bytes are not counted as the client's wire
  // bytes (bytes()), only as the shard's (peer_bytes()).
  bool in_process = false;
  // A shard this process hosts, called directly for Push and Pull (no
  // gRPC, no serialization); null: over the channel.
  PsShard* local = nullptr;
};

namespace ps_internal {

using Shard = GrpcParameterClient::Shard;

inline constexpr char kPushMethod[] = "/ferry.v1.ParameterServer/Push";
inline constexpr char kPullMethod[] = "/ferry.v1.ParameterServer/Pull";

// "ps shard 1 (host:port) <call>: <message>", where <call> names what failed
// ("push", "pull of version >= 7", "shard info"), so that a deadline on a
// pull (waiting for the version other workers' pushes make) reads apart from
// one on a push (this worker's link to the shard).
absl::Status Annotate(const absl::Status& status, const Shard& shard,
                      absl::string_view call);

// Sets a call's deadline, `timeout` from now, and marks a call to an
// in-process shard as this process's own (MarkInProcessCall).
void PrepareContext(grpc::ClientContext& context, const Shard& shard,
                    absl::Duration timeout);

// One Pull from one shard into the flat buffer. Its last action is the
// group's Done(fatal: failed other than UNAVAILABLE); status() and version()
// are read after the group saw it. Cancel() may come from any thread.
class ShardPullCall {
 public:
  static constexpr int64_t kNoVersion = -1;
  virtual ~ShardPullCall() = default;
  virtual void Start() = 0;
  virtual void Cancel() = 0;
  virtual absl::Status status() const = 0;
  // The version of the chunks received; kNoVersion when none was (no chunk
  // of the shard in the range).
  virtual int64_t version() const = 0;
};

// One Push to one shard: the messages (the header first, each an encoded
// PushRequest) go in order; Close() commits once they are all taken.
// Its last action is the group's Done(false). Used by one thread at a time.
class ShardPushCall {
 public:
  virtual ~ShardPushCall() = default;
  virtual void Start() = 0;
  virtual void Enqueue(grpc::ByteBuffer request) = 0;
  virtual void Close() = 0;
  virtual void Cancel() = 0;
  virtual absl::Status status() const = 0;
  // The messages, for a retry (a new call with is_retry, which is closed).
  virtual std::deque<grpc::ByteBuffer> TakeRequests() = 0;
};

// The call to `shard`: direct for a hosted shard (Shard::local), else over
// gRPC. Arguments as PullCall's / PushCall's.
std::unique_ptr<ShardPullCall> MakePullCall(
    const Shard& shard, const std::vector<Chunk>& chunks,
    const v1::PullRequest& request, absl::Duration timeout, float* flat,
    ByteCounter* counter, CallGroup* group,
    ByteCounter* shard_counter = nullptr);
std::unique_ptr<ShardPushCall> MakePushCall(
    const Shard& shard, absl::Duration timeout, ByteCounter* counter,
    CallGroup* group, std::deque<grpc::ByteBuffer> requests, bool is_retry);

// One Pull from one shard over gRPC, writing each chunk straight from the
// received slices into the flat buffer. Reactions of one call never run
// concurrently.
class PullCall final
    : public ShardPullCall,
      public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // How many of `shard`'s chunks a pull of request's range carries.
  static int64_t ChunksInRange(const Shard& shard,
                               const std::vector<Chunk>& chunks,
                               const v1::PullRequest& request);

  // `counter` gets every byte that crosses a socket (none of an in-process
  // shard's); `shard_counter` (null: the shard's own counter) every byte.
  PullCall(const Shard& shard, const std::vector<Chunk>& chunks,
           const v1::PullRequest& request, absl::Duration timeout, float* flat,
           ByteCounter* counter, CallGroup* group,
           ByteCounter* shard_counter = nullptr)
      : shard_(shard),
        shard_counter_(shard_counter != nullptr ? shard_counter
                                                : shard.bytes.get()),
        chunks_(chunks),
        min_version_(request.min_version()),
        range_{request.range_begin(), request.range_end()},
        expected_(ChunksInRange(shard, chunks, request)),
        request_size_(static_cast<int64_t>(request.ByteSizeLong())),
        request_(SerializeMessage(request)),
        timeout_(timeout),
        flat_(flat),
        counter_(shard.in_process ? nullptr : counter),
        group_(group),
        seen_(chunks.size(), 0) {}

  void Start() override;
  void Cancel() override { context_.TryCancel(); }

  void OnWriteDone(bool /*ok*/) override {}  // a failure shows in OnDone

  void OnReadDone(bool ok) override;

  // Accepts the message read into response_, then reads on (or cancels
  // the call on a bad message).
  void TakeIn();

  void OnDone(const grpc::Status& grpc_status) override;

  absl::Status status() const override { return status_; }
  int64_t version() const override {
    return received_ > 0 ? version_ : kNoVersion;
  }

 private:
  absl::Status Accept();

  const Shard& shard_;
  ByteCounter* const shard_counter_;
  const std::vector<Chunk>& chunks_;
  const int64_t min_version_;
  const FlatRange range_;   // {0, 0}: every chunk
  const int64_t expected_;  // chunks the pull carries
  const int64_t request_size_;
  const grpc::ByteBuffer request_;
  const absl::Duration timeout_;
  float* const flat_;
  ByteCounter* const counter_;
  CallGroup* const group_;
  grpc::ClientContext context_;
  grpc::ByteBuffer response_;
  std::vector<char> seen_;  // [chunk id]
  int64_t received_ = 0;
  int64_t version_ = 0;
  absl::Status error_;
  absl::Status status_;
};

// One Push stream to one shard over gRPC. Messages are queued by Enqueue()
// and written one at a time; Close() half-closes once the queue is drained. A
// hold keeps the call open until Close(), so that Enqueue() from the trainer
// thread never races the end of the call. The messages (references to their
// slices) are kept for a retry (TakeRequests()). The one response is read as
// soon as the server sends it.
class PushCall final
    : public ShardPushCall,
      public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  PushCall(const Shard& shard, absl::Duration timeout, ByteCounter* counter,
           CallGroup* group, std::deque<grpc::ByteBuffer> requests,
           bool is_retry)
      : shard_(shard),
        timeout_(timeout),
        counter_(shard.in_process ? nullptr : counter),
        group_(group),
        requests_(std::move(requests)),
        closed_(is_retry) {}

  void Start() override;
  void Enqueue(grpc::ByteBuffer request) override;
  void Close() override;
  void Cancel() override;

  void OnWriteDone(bool ok) override;

  void OnReadDone(bool ok) override { got_response_ = ok; }

  void OnDone(const grpc::Status& grpc_status) override;

  absl::Status status() const override { return status_; }
  std::deque<grpc::ByteBuffer> TakeRequests() override;

 private:
  struct Action {
    enum Kind { kNone, kWrite, kWritesDone, kRelease, kDelay } kind = kNone;
    const grpc::ByteBuffer* message = nullptr;
    absl::Time when;  // kDelay: pump again then
  };

  // Link emulation: books `request` on the send bucket when it is queued.
  void Reserve(const grpc::ByteBuffer& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Action Pump();
  // Decides the next operation; the caller runs it after unlocking, since
  // gRPC may run a reaction inline.
  Action PumpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Run(const Action& action);

  const Shard& shard_;
  const absl::Duration timeout_;
  ByteCounter* const counter_;
  CallGroup* const group_;
  grpc::ClientContext context_;
  grpc::ByteBuffer response_;
  bool got_response_ = false;  // OnReadDone, read in OnDone
  absl::Status status_;

  absl::Mutex mu_;
  // A deque: push_back() keeps the messages gRPC is writing in place.
  std::deque<grpc::ByteBuffer> requests_ ABSL_GUARDED_BY(mu_);
  // Link emulation: when each of requests_ may go (empty without a shaper).
  std::deque<absl::Time> release_ ABSL_GUARDED_BY(mu_);
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;  // first message not yet written
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_);
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool released_ ABSL_GUARDED_BY(mu_) = false;  // hold removed
};

}  // namespace ps_internal
}  // namespace ferry

#endif  // FERRY_PS_PS_CALLS_H_
