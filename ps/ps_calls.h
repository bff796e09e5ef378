// Internal to ps/ps_client.cc (not an API): the per-shard channel of a
// GrpcParameterClient and the two gRPC callback reactors it runs, PullCall
// (one Pull from one shard into the flat buffer) and PushCall (one Push
// stream to one shard, messages queued by the push session).
#ifndef FERRY_PS_PS_CALLS_H_
#define FERRY_PS_PS_CALLS_H_

#include <algorithm>
#include <bit>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/memory/memory.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/link_shaper.h"
#include "ferry/v1/ps.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "proto/raw_wire.h"
#include "proto/rpc_util.h"
#include "ps/call_rounds.h"
#include "ps/ps_client.h"
#include "ps/ps_wire.h"

namespace ferry {

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
};

namespace ps_internal {

using Shard = GrpcParameterClient::Shard;

inline constexpr char kPushMethod[] = "/ferry.v1.ParameterServer/Push";
inline constexpr char kPullMethod[] = "/ferry.v1.ParameterServer/Pull";

// "ps shard 1 (host:port) <call>: <message>", where <call> names what failed
// ("push", "pull of version >= 7", "shard info"), so that a deadline on a
// pull (waiting for the version other workers' pushes make) reads apart from
// one on a push (this worker's link to the shard).
inline absl::Status Annotate(const absl::Status& status, const Shard& shard,
                             absl::string_view call) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat("ps shard ", shard.id, " (", shard.address,
                                   ") ", call, ": ", status.message()));
}

// One Pull from one shard, writing each chunk straight from the received
// slices into the flat buffer. Reactions of one call never run concurrently;
// status() and version() are read after the group saw Done().
class PullCall final
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  static constexpr int64_t kNoVersion = -1;

  // How many of `shard`'s chunks a pull of request's range carries.
  static int64_t ChunksInRange(const Shard& shard,
                               const std::vector<Chunk>& chunks,
                               const v1::PullRequest& request) {
    const FlatRange range{request.range_begin(), request.range_end()};
    int64_t n = 0;
    for (const Chunk& c : chunks) {
      if (c.shard == shard.id && ChunkInPullRange(c, range)) ++n;
    }
    return n;
  }

  // `counter` gets every byte; so does `shard_counter` (null: the shard's
  // own counter).
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
        counter_(counter),
        group_(group),
        seen_(chunks.size(), 0) {}

  void Start() {
    counter_->AddSent(request_size_);
    shard_counter_->AddSent(request_size_);
    shard_counter_->AddCall();
    SetDeadline(context_, timeout_);
    shard_.stub->PrepareBidiStreamingCall(&context_, kPullMethod,
                                          grpc::StubOptions(), this);
    const absl::Time now = absl::Now();
    const absl::Time release =
        shard_.shaper == nullptr
            ? now
            : shard_.shaper->ReserveSend(request_size_, now);
    if (release > now) {
      // Link emulation: the request waits for the link (a hold keeps the
      // call alive until the timer has started the write).
      AddHold();
      shard_.shaper->RunAt(release, [this] {
        StartWriteLast(&request_, grpc::WriteOptions());
        RemoveHold();
      });
    } else {
      StartWriteLast(&request_, grpc::WriteOptions());
    }
    StartRead(&response_);
    StartCall();
  }
  void Cancel() { context_.TryCancel(); }

  void OnWriteDone(bool /*ok*/) override {}  // a failure shows in OnDone

  void OnReadDone(bool ok) override {
    if (!ok) return;  // end of stream or failure: OnDone follows
    const int64_t size = static_cast<int64_t>(response_.Length());
    counter_->AddReceived(size);
    shard_counter_->AddReceived(size);
    if (shard_.shaper != nullptr) {
      // Link emulation: the message is taken in once it has passed the
      // receive bucket, so that slices from several shards at once queue
      // behind each other on this worker's link, the last one included.
      const absl::Time now = absl::Now();
      const absl::Time release = shard_.shaper->ReserveReceive(size, now);
      if (release > now) {
        AddHold();  // inside a reaction: the call is alive
        shard_.shaper->RunAt(release, [this] {
          TakeIn();
          RemoveHold();
        });
        return;
      }
    }
    TakeIn();
  }

  // Accepts the message read into response_, then reads on (or cancels
  // the call on a bad message).
  void TakeIn() {
    error_ = Accept();
    response_.Clear();
    if (!error_.ok()) {
      context_.TryCancel();
      return;
    }
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& grpc_status) override {
    absl::Status status = error_.ok() ? FromGrpcStatus(grpc_status) : error_;
    if (status.ok() && received_ != expected_) {
      status = absl::DataLossError(absl::StrCat("pull returned ", received_,
                                                " of ", expected_, " chunks"));
    }
    if (status.ok() && received_ > 0 && version_ < min_version_) {
      status = absl::DataLossError(absl::StrCat("pull returned version ",
                                                version_, " below min_version ",
                                                min_version_));
    }
    if (!status.ok()) {  // the call's name is built only for an error
      status_ = Annotate(status, shard_,
                         absl::StrCat("pull of version >= ", min_version_));
    }
    group_->Done(!status_.ok() && !absl::IsUnavailable(status_));
  }

  absl::Status status() const { return status_; }
  int64_t version() const { return received_ > 0 ? version_ : kNoVersion; }

 private:
  absl::Status Accept() {
    WireReader in(response_);
    PullMessage message;
    if (!ParsePullMessage(in, &message)) {
      return absl::DataLossError(absl::StrCat(
          "pull sent a malformed message of ", in.size(), " bytes"));
    }
    const int64_t id = message.chunk_id;
    if (id < 0 || id >= static_cast<int64_t>(chunks_.size()) ||
        chunks_[id].shard != shard_.id) {
      return absl::DataLossError(absl::StrCat(
          "pull sent chunk ", id, ", which the shard does not own"));
    }
    if (!ChunkInPullRange(chunks_[id], range_)) {
      return absl::DataLossError(
          absl::StrCat("pull sent chunk ", id, ", outside the range [",
                       range_.begin, ", ", range_.end, ") asked for"));
    }
    if (seen_[id]) {
      return absl::DataLossError(
          absl::StrCat("pull sent chunk ", id, " twice"));
    }
    const Chunk& chunk = chunks_[id];
    if (message.data_size !=
        static_cast<size_t>(chunk.length) * sizeof(float)) {
      return absl::DataLossError(absl::StrCat("pull sent ", message.data_size,
                                              " bytes for chunk ", id, " of ",
                                              chunk.length, " floats"));
    }
    if (received_ > 0 && message.version != version_) {
      return absl::DataLossError(absl::StrCat("pull mixed versions ", version_,
                                              " and ", message.version));
    }
    version_ = message.version;
    // The destination holds the range (the whole buffer without one): a
    // chunk's elements outside it are dropped.
    const int64_t lo = std::max(chunk.flat_offset, range_.begin);
    const int64_t hi =
        range_.end == 0
            ? chunk.flat_offset + chunk.length
            : std::min(chunk.flat_offset + chunk.length, range_.end);
    if (hi > lo) {
      in.CopyOut(
          message.data_begin +
              static_cast<size_t>(lo - chunk.flat_offset) * sizeof(float),
          static_cast<size_t>(hi - lo) * sizeof(float),
          reinterpret_cast<char*>(flat_ + (lo - range_.begin)));
    }
    seen_[id] = 1;
    ++received_;
    return absl::OkStatus();
  }

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

// One Push stream to one shard. Messages (the header first, each an encoded
// PushRequest) are queued by Enqueue() and written one at a time; Close()
// half-closes once the queue is drained. A hold keeps the call open until
// Close(), so that Enqueue() from the trainer thread never races the end of
// the call. The messages (references to their slices) are kept for a retry
// (TakeRequests()). The one response is read as soon as the server sends it.
class PushCall final
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  PushCall(const Shard& shard, absl::Duration timeout, ByteCounter* counter,
           CallGroup* group, std::deque<grpc::ByteBuffer> requests,
           bool is_retry)
      : shard_(shard),
        timeout_(timeout),
        counter_(counter),
        group_(group),
        requests_(std::move(requests)),
        closed_(is_retry) {}

  void Start() {
    shard_.bytes->AddCall();
    SetDeadline(context_, timeout_);
    shard_.stub->PrepareBidiStreamingCall(&context_, kPushMethod,
                                          grpc::StubOptions(), this);
    StartRead(&response_);
    AddHold();
    if (shard_.shaper != nullptr) {
      absl::MutexLock lock(&mu_);
      for (const grpc::ByteBuffer& r : requests_) Reserve(r);
    }
    Run(Pump());
    StartCall();
  }
  void Enqueue(grpc::ByteBuffer request) {
    Action action;
    {
      absl::MutexLock lock(&mu_);
      requests_.push_back(std::move(request));
      if (shard_.shaper != nullptr) Reserve(requests_.back());
      action = PumpLocked();
    }
    Run(action);
  }
  void Close() {
    {
      absl::MutexLock lock(&mu_);
      closed_ = true;
    }
    Run(Pump());
  }
  void Cancel() {
    context_.TryCancel();
    Close();
  }

  void OnWriteDone(bool ok) override {
    Action action;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (ok) {
        counter_->AddSent(static_cast<int64_t>(requests_[next_].Length()));
        shard_.bytes->AddSent(static_cast<int64_t>(requests_[next_].Length()));
        ++next_;
      } else {
        broken_ = true;  // the call is over; OnDone() tells why
      }
      action = PumpLocked();
    }
    Run(action);
  }

  void OnReadDone(bool ok) override { got_response_ = ok; }

  void OnDone(const grpc::Status& grpc_status) override {
    absl::Status status = FromGrpcStatus(grpc_status);
    if (status.ok()) {
      // What the typed stub of a client-streaming method checks.
      const int64_t size = static_cast<int64_t>(response_.Length());
      v1::PushResponse response;
      if (!got_response_) {
        status = absl::InternalError("push: no response message");
      } else if (!grpc::SerializationTraits<v1::PushResponse>::Deserialize(
                      &response_, &response)
                      .ok()) {
        status = absl::InternalError("push: malformed response message");
      } else {
        counter_->AddReceived(size);
        shard_.bytes->AddReceived(size);
      }
    }
    // ALREADY_EXISTS: the shard holds this worker's push of this step from
    // an earlier attempt that did get through: a retry of this session
    // whose answer was lost, or an abandoned attempt at the same lease
    // (another shard failed it, e.g. cut off by a network partition). The
    // shard has the gradient, so this shard accepted the push. Refusing it
    // instead made the worker abandon the step, be given the same step
    // again and meet ALREADY_EXISTS again, forever (a livelock that stalled
    // the sync job; tests/fault/network_partition_test.py). It is this
    // lease's gradient: a sync shard drops a step's pushes whenever the
    // step could be formed again (Restore), and FinalizeStep checks the
    // sample count.
    if (absl::IsAlreadyExists(status)) status = absl::OkStatus();
    status_ = Annotate(status, shard_, "push");
    group_->Done(false);
  }

  absl::Status status() const { return status_; }
  std::deque<grpc::ByteBuffer> TakeRequests() {
    absl::MutexLock lock(&mu_);
    release_.clear();  // a retry books them again
    return std::move(requests_);
  }

 private:
  struct Action {
    enum Kind { kNone, kWrite, kWritesDone, kRelease, kDelay } kind = kNone;
    const grpc::ByteBuffer* message = nullptr;
    absl::Time when;  // kDelay: pump again then
  };

  // Link emulation: books `request` on the send bucket when it is queued.
  void Reserve(const grpc::ByteBuffer& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    release_.push_back(shard_.shaper->ReserveSend(
        static_cast<int64_t>(request.Length()), absl::Now()));
  }

  Action Pump() {
    absl::MutexLock lock(&mu_);
    return PumpLocked();
  }
  // Decides the next operation; the caller runs it after unlocking, since
  // gRPC may run a reaction inline.
  Action PumpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (released_ || writing_) return {};
    if (!broken_ && next_ < requests_.size()) {
      writing_ = true;  // also while the message waits for the link
      if (next_ < release_.size() && release_[next_] > absl::Now()) {
        return {Action::kDelay, nullptr, release_[next_]};
      }
      return {Action::kWrite, &requests_[next_], absl::Time()};
    }
    if (!closed_) return {};
    released_ = true;
    return {broken_ ? Action::kRelease : Action::kWritesDone, nullptr,
            absl::Time()};
  }
  void Run(const Action& action) {
    switch (action.kind) {
      case Action::kNone:
        return;
      case Action::kWrite:
        StartWrite(action.message);
        return;
      case Action::kWritesDone:
        StartWritesDone();
        RemoveHold();
        return;
      case Action::kRelease:
        RemoveHold();
        return;
      case Action::kDelay:
        // The hold keeps the call alive until the timer has pumped; no
        // other operation starts meanwhile (writing_ is set).
        AddHold();
        shard_.shaper->RunAt(action.when, [this] {
          {
            absl::MutexLock lock(&mu_);
            writing_ = false;
          }
          Run(Pump());
          RemoveHold();
        });
        return;
    }
  }

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
