#include "worker/ps_client.h"

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
#include "absl/synchronization/mutex.h"
#include "ferry/v1/ps.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "proto/raw_wire.h"
#include "worker/call_rounds.h"
#include "worker/ps_wire.h"
#include "proto/rpc_util.h"

namespace ferry {

static_assert(std::endian::native == std::endian::little,
              "tensor bytes on the wire are little-endian fp32");

// Push and Pull go through a generic stub with raw ByteBuffers, so that chunk
// data is written from and read into tensor memory without going through a
// protobuf `bytes` field (TensorFlow's grpc_tensor_coding pattern). The
// messages on the wire are exactly the canonical ferry.v1.PushRequest /
// PullResponse encodings; the shard is a normal ferry.v1.ParameterServer.
struct GrpcParameterClient::Shard {
  int id = 0;
  std::string address;
  std::unique_ptr<grpc::GenericStub> stub;
  int64_t num_chunks = 0;  // chunks this shard owns
  // Buffers for the chunks pushed to this shard (at most its bytes kept).
  std::shared_ptr<ChunkBufferPool> buffers;
  // Bytes exchanged with this shard alone (the client's counter has all).
  std::unique_ptr<ByteCounter> bytes = std::make_unique<ByteCounter>();
};

namespace {

using Shard = GrpcParameterClient::Shard;

constexpr char kPushMethod[] = "/ferry.v1.ParameterServer/Push";
constexpr char kPullMethod[] = "/ferry.v1.ParameterServer/Pull";

absl::Status Annotate(const absl::Status& status, const Shard& shard) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat("ps shard ", shard.id, " (", shard.address,
                                   "): ", status.message()));
}

// One Pull from one shard, writing each chunk straight from the received
// slices into the flat buffer. Reactions of one call never run concurrently;
// status() and version() are read after the group saw Done().
class PullCall final
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  static constexpr int64_t kNoVersion = -1;

  PullCall(const Shard& shard, const std::vector<Chunk>& chunks,
           const v1::PullRequest& request, absl::Duration timeout, float* flat,
           ByteCounter* counter, CallGroup* group)
      : shard_(shard),
        chunks_(chunks),
        min_version_(request.min_version()),
        request_size_(static_cast<int64_t>(request.ByteSizeLong())),
        request_(SerializeMessage(request)),
        timeout_(timeout),
        flat_(flat),
        counter_(counter),
        group_(group),
        seen_(chunks.size(), 0) {}

  void Start() {
    counter_->AddSent(request_size_);
    shard_.bytes->AddSent(request_size_);
    SetDeadline(context_, timeout_);
    shard_.stub->PrepareBidiStreamingCall(&context_, kPullMethod,
                                          grpc::StubOptions(), this);
    StartWriteLast(&request_, grpc::WriteOptions());
    StartRead(&response_);
    StartCall();
  }
  void Cancel() { context_.TryCancel(); }

  void OnWriteDone(bool /*ok*/) override {}  // a failure shows in OnDone

  void OnReadDone(bool ok) override {
    if (!ok) return;  // end of stream or failure: OnDone follows
    counter_->AddReceived(static_cast<int64_t>(response_.Length()));
    shard_.bytes->AddReceived(static_cast<int64_t>(response_.Length()));
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
    if (status.ok() && received_ != shard_.num_chunks) {
      status = absl::DataLossError(absl::StrCat(
          "pull returned ", received_, " of ", shard_.num_chunks, " chunks"));
    }
    if (status.ok() && received_ > 0 && version_ < min_version_) {
      status = absl::DataLossError(absl::StrCat("pull returned version ",
                                                version_, " below min_version ",
                                                min_version_));
    }
    status_ = Annotate(status, shard_);
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
    in.CopyOut(message.data_begin, message.data_size,
               reinterpret_cast<char*>(flat_ + chunk.flat_offset));
    seen_[id] = 1;
    ++received_;
    return absl::OkStatus();
  }

  const Shard& shard_;
  const std::vector<Chunk>& chunks_;
  const int64_t min_version_;
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
        is_retry_(is_retry),
        requests_(std::move(requests)),
        closed_(is_retry) {}

  void Start() {
    SetDeadline(context_, timeout_);
    shard_.stub->PrepareBidiStreamingCall(&context_, kPushMethod,
                                          grpc::StubOptions(), this);
    StartRead(&response_);
    AddHold();
    Run(Pump());
    StartCall();
  }
  void Enqueue(grpc::ByteBuffer request) {
    Action action;
    {
      absl::MutexLock lock(&mu_);
      requests_.push_back(std::move(request));
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
    // A retry may meet our own earlier attempt, which did get through.
    if (is_retry_ && absl::IsAlreadyExists(status)) status = absl::OkStatus();
    status_ = Annotate(status, shard_);
    group_->Done(false);
  }

  absl::Status status() const { return status_; }
  std::deque<grpc::ByteBuffer> TakeRequests() {
    absl::MutexLock lock(&mu_);
    return std::move(requests_);
  }

 private:
  struct Action {
    enum Kind { kNone, kWrite, kWritesDone, kRelease } kind = kNone;
    const grpc::ByteBuffer* message = nullptr;
  };

  Action Pump() {
    absl::MutexLock lock(&mu_);
    return PumpLocked();
  }
  // Decides the next operation; the caller runs it after unlocking, since
  // gRPC may run a reaction inline.
  Action PumpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (released_ || writing_) return {};
    if (!broken_ && next_ < requests_.size()) {
      writing_ = true;
      return {Action::kWrite, &requests_[next_]};
    }
    if (!closed_) return {};
    released_ = true;
    return {broken_ ? Action::kRelease : Action::kWritesDone};
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
    }
  }

  const Shard& shard_;
  const absl::Duration timeout_;
  ByteCounter* const counter_;
  CallGroup* const group_;
  const bool is_retry_;
  grpc::ClientContext context_;
  grpc::ByteBuffer response_;
  bool got_response_ = false;  // OnReadDone, read in OnDone
  absl::Status status_;

  absl::Mutex mu_;
  // A deque: push_back() keeps the messages gRPC is writing in place.
  std::deque<grpc::ByteBuffer> requests_ ABSL_GUARDED_BY(mu_);
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;  // first message not yet written
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_);
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool released_ ABSL_GUARDED_BY(mu_) = false;  // hold removed
};

// Waits for started `calls` of `group`; cancels the rest after a fatal one.
class GrpcPushSession final : public PushSession {
 public:
  GrpcPushSession(const GrpcParameterClientOptions& options,
                  const std::vector<std::unique_ptr<Shard>>& shards,
                  int64_t num_elements, ByteCounter* counter,
                  const PushInfo& info)
      : options_(options),
        shards_(shards),
        num_elements_(num_elements),
        counter_(counter),
        group_(static_cast<int>(shards.size())),
        partial_(options.chunks.size()),
        covered_(options.chunks.size(), 0) {
    v1::PushRequest header;
    v1::PushHeader* h = header.mutable_header();
    h->set_job_id(options.job_id);
    h->set_worker_id(options.worker_id);
    h->set_generation(info.generation);
    h->set_step(info.step);
    h->set_num_samples(info.num_samples);
    h->set_base_version(info.base_version);
    const grpc::ByteBuffer header_message = SerializeMessage(header);
    for (const auto& shard : shards_) {
      calls_.push_back(std::make_unique<PushCall>(
          *shard, options.rpc_timeout, counter_, &group_,
          std::deque<grpc::ByteBuffer>{header_message}, /*is_retry=*/false));
    }
    for (auto& call : calls_) call->Start();
  }

  ~GrpcPushSession() override {
    if (finished_) return;
    for (auto& call : calls_) call->Cancel();
    group_.WaitAll();
  }

  absl::Status Ready(int64_t offset, int64_t length,
                     const float* grads) override {
    if (finished_)
      return absl::FailedPreconditionError("push already finished");
    if (offset < 0 || length < 0 || offset + length > num_elements_) {
      return absl::InvalidArgumentError(
          absl::StrCat("gradient range [", offset, ", ", offset + length,
                       ") is outside the ", num_elements_, " parameters"));
    }
    if (length == 0) return absl::OkStatus();
    const int64_t end = offset + length;
    auto next = declared_.lower_bound(offset);
    if ((next != declared_.end() && next->first < end) ||
        (next != declared_.begin() && std::prev(next)->second > offset)) {
      return absl::InvalidArgumentError(
          absl::StrCat("gradient range [", offset, ", ", end,
                       ") overlaps one declared before"));
    }
    declared_.emplace(offset, end);
    declared_elements_ += length;
    const std::vector<Chunk>& chunks = options_.chunks;
    // The last chunk starting at or before `offset`, then on while they
    // overlap.
    auto first = std::upper_bound(
        chunks.begin(), chunks.end(), offset,
        [](int64_t value, const Chunk& c) { return value < c.flat_offset; });
    if (first != chunks.begin()) --first;
    for (size_t i = first - chunks.begin();
         i < chunks.size() && chunks[i].flat_offset < end; ++i) {
      const Chunk& c = chunks[i];
      const int64_t lo = std::max(offset, c.flat_offset);
      const int64_t hi = std::min(end, c.flat_offset + c.length);
      if (lo >= hi) continue;
      // The chunk's bytes go into a slice of their own, which the message
      // then references: one copy, from `grads` to the slice.
      grpc::Slice& data = partial_[i];
      if (data.size() == 0) {
        data = shards_[c.shard]->buffers->Make(c.length * sizeof(float));
      }
      // The slice was just allocated for this chunk and nobody else
      // references it yet: writing through begin() is safe.
      std::memcpy(const_cast<uint8_t*>(data.begin()) +
                      (lo - c.flat_offset) * sizeof(float),
                  grads + (lo - offset), (hi - lo) * sizeof(float));
      covered_[i] += hi - lo;
      if (covered_[i] == c.length) {
        calls_[c.shard]->Enqueue(ChunkMessage(c.id, data));
        data = grpc::Slice();
      }
    }
    return absl::OkStatus();
  }

  absl::Status Finish() override {
    if (finished_)
      return absl::FailedPreconditionError("push already finished");
    finished_ = true;
    if (declared_elements_ != num_elements_) {
      for (auto& call : calls_) call->Cancel();
      group_.WaitAll();
      return absl::FailedPreconditionError(absl::StrCat(
          "push finished with ", declared_elements_, " of ", num_elements_,
          " gradient elements declared; the push was cancelled"));
    }
    for (auto& call : calls_) call->Close();
    // Round 0 is the streams opened in the constructor; later rounds resend
    // the kept messages to the shards that were UNAVAILABLE.
    return RetryRounds(
        static_cast<int>(shards_.size()), options_.retry,
        [this](const std::vector<int>& shards, int round) {
          std::vector<absl::Status> statuses;
          if (round == 0) {
            group_.WaitAll();
            for (int s : shards) statuses.push_back(calls_[s]->status());
            return statuses;
          }
          CallGroup group(static_cast<int>(shards.size()));
          std::vector<std::unique_ptr<PushCall>> calls;
          for (int s : shards) {
            calls.push_back(std::make_unique<PushCall>(
                *shards_[s], options_.rpc_timeout, counter_, &group,
                calls_[s]->TakeRequests(), /*is_retry=*/true));
          }
          for (auto& call : calls) call->Start();
          group.WaitAll();
          for (size_t i = 0; i < shards.size(); ++i) {
            statuses.push_back(calls[i]->status());
            calls_[shards[i]] = std::move(calls[i]);
          }
          return statuses;
        });
  }

 private:
  const GrpcParameterClientOptions& options_;
  const std::vector<std::unique_ptr<Shard>>& shards_;
  const int64_t num_elements_;
  ByteCounter* const counter_;
  CallGroup group_;                               // the calls of round 0
  std::vector<std::unique_ptr<PushCall>> calls_;  // [shard], latest attempt
  std::map<int64_t, int64_t> declared_;           // begin -> end, disjoint
  int64_t declared_elements_ = 0;
  std::vector<grpc::Slice> partial_;  // [chunk] data being assembled
  std::vector<int64_t> covered_;      // [chunk] elements declared
  bool finished_ = false;
};

}  // namespace

GrpcParameterClient::GrpcParameterClient(GrpcParameterClientOptions options)
    : options_(std::move(options)) {}

GrpcParameterClient::~GrpcParameterClient() = default;

absl::StatusOr<std::unique_ptr<GrpcParameterClient>>
GrpcParameterClient::Create(GrpcParameterClientOptions options) {
  const int num_shards = static_cast<int>(options.shard_addresses.size());
  if (num_shards == 0) {
    return absl::InvalidArgumentError("parameter client: no shard addresses");
  }
  auto client = absl::WrapUnique(new GrpcParameterClient(std::move(options)));
  for (int s = 0; s < num_shards; ++s) {
    auto shard = std::make_unique<Shard>();
    shard->id = s;
    shard->address = client->options_.shard_addresses[s];
    shard->stub =
        std::make_unique<grpc::GenericStub>(MakeChannel(shard->address));
    client->shards_.push_back(std::move(shard));
  }
  int64_t flat = 0;
  const std::vector<Chunk>& chunks = client->options_.chunks;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const Chunk& c = chunks[i];
    if (c.id != static_cast<int32_t>(i) || c.flat_offset != flat ||
        c.length < 1 || c.shard < 0 || c.shard >= num_shards) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter client: chunk ", i, " (id ", c.id, ", offset ",
          c.flat_offset, ", shard ", c.shard,
          ") does not continue a placement over ", num_shards, " shards"));
    }
    flat += c.length;
    ++client->shards_[c.shard]->num_chunks;
  }
  for (auto& shard : client->shards_) {
    int64_t bytes = 0;
    for (const Chunk& c : chunks) {
      if (c.shard == shard->id) bytes += c.length * sizeof(float);
    }
    shard->buffers =
        std::make_shared<ChunkBufferPool>(static_cast<size_t>(bytes));
  }
  client->num_elements_ = flat;
  return client;
}

absl::StatusOr<int64_t> GrpcParameterClient::Pull(int64_t min_version,
                                                  float* flat_params) {
  v1::PullRequest request;
  request.set_job_id(options_.job_id);
  request.set_worker_id(options_.worker_id);
  request.set_min_version(min_version);
  int64_t version = PullCall::kNoVersion;
  const absl::Status status = RetryRounds(
      static_cast<int>(shards_.size()), options_.retry,
      [&](const std::vector<int>& shards, int) {
        CallGroup group(static_cast<int>(shards.size()));
        std::vector<std::unique_ptr<PullCall>> calls;
        for (int s : shards) {
          calls.push_back(std::make_unique<PullCall>(
              *shards_[s], options_.chunks, request, options_.rpc_timeout,
              flat_params, &counter_, &group));
        }
        for (auto& call : calls) call->Start();
        std::vector<absl::Status> statuses = WaitCalls(group, calls);
        for (size_t i = 0; i < calls.size(); ++i) {
          const int64_t v = calls[i]->version();
          if (statuses[i].ok() && v != PullCall::kNoVersion &&
              (version == PullCall::kNoVersion || v < version)) {
            version = v;
          }
        }
        return statuses;
      });
  if (!status.ok()) return status;
  // Only shards without chunks answered: nothing tells the version.
  return version == PullCall::kNoVersion ? min_version : version;
}

std::map<std::string, TransferBytes> GrpcParameterClient::peer_bytes() const {
  std::map<std::string, TransferBytes> bytes;
  for (const auto& shard : shards_) {
    bytes[absl::StrCat("ps", shard->id)] = shard->bytes->Get();
  }
  return bytes;
}

absl::StatusOr<std::unique_ptr<PushSession>> GrpcParameterClient::BeginPush(
    const PushInfo& info) {
  if (info.num_samples < 0) {
    return absl::InvalidArgumentError("push: negative num_samples");
  }
  return std::make_unique<GrpcPushSession>(options_, shards_, num_elements_,
                                           &counter_, info);
}

}  // namespace ferry
