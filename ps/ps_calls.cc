#include "ps/ps_calls.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/step_trace.h"
#include "proto/rpc_util.h"
#include "ps/local_shard_calls.h"
#include "ps/ps_wire.h"

namespace ferry {
namespace ps_internal {

absl::Status Annotate(const absl::Status& status, const Shard& shard,
                      absl::string_view call) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat("ps shard ", shard.id, " (", shard.address,
                                   ") ", call, ": ", status.message()));
}

void PrepareContext(grpc::ClientContext& context, const Shard& shard,
                    absl::Duration timeout) {
  SetDeadline(context, timeout);
  if (shard.in_process) MarkInProcessCall(context);
}

std::unique_ptr<ShardPullCall> MakePullCall(
    const Shard& shard, const std::vector<Chunk>& chunks,
    const v1::PullRequest& request, absl::Duration timeout, float* flat,
    ByteCounter* counter, CallGroup* group, ByteCounter* shard_counter) {
  if (shard.local != nullptr) {
    return std::make_unique<LocalPullCall>(shard, chunks, request, timeout,
                                           flat, shard_counter, group);
  }
  return std::make_unique<PullCall>(shard, chunks, request, timeout, flat,
                                    counter, group, shard_counter);
}

std::unique_ptr<ShardPushCall> MakePushCall(
    const Shard& shard, absl::Duration timeout, ByteCounter* counter,
    CallGroup* group, std::deque<grpc::ByteBuffer> requests, bool is_retry) {
  if (shard.local != nullptr) {
    return std::make_unique<LocalPushCall>(shard, group, std::move(requests),
                                           is_retry);
  }
  return std::make_unique<PushCall>(shard, timeout, counter, group,
                                    std::move(requests), is_retry);
}

int64_t PullCall::ChunksInRange(const Shard& shard,
                                const std::vector<Chunk>& chunks,
                                const v1::PullRequest& request) {
  const FlatRange range{request.range_begin(), request.range_end()};
  int64_t n = 0;
  for (const Chunk& c : chunks) {
    if (c.shard == shard.id && ChunkInPullRange(c, range)) ++n;
  }
  return n;
}

void PullCall::Start() {
  if (counter_ != nullptr) counter_->AddSent(request_size_);
  shard_counter_->AddSent(request_size_);
  shard_counter_->AddCall();
  PrepareContext(context_, shard_, timeout_);
  shard_.stub->PrepareBidiStreamingCall(&context_, kPullMethod,
                                        grpc::StubOptions(), this);
  const absl::Time now = absl::Now();
  const absl::Time release =
      shard_.shaper == nullptr ? now
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

void PullCall::OnReadDone(bool ok) {
  if (!ok) return;  // end of stream or failure: OnDone follows
  const int64_t size = static_cast<int64_t>(response_.Length());
  if (counter_ != nullptr) counter_->AddReceived(size);
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

void PullCall::TakeIn() {
  error_ = Accept();
  response_.Clear();
  if (!error_.ok()) {
    context_.TryCancel();
    return;
  }
  StartRead(&response_);
}

void PullCall::OnDone(const grpc::Status& grpc_status) {
  absl::Status status = error_.ok() ? FromGrpcStatus(grpc_status) : error_;
  if (status.ok() && received_ != expected_) {
    status = absl::DataLossError(absl::StrCat("pull returned ", received_,
                                              " of ", expected_, " chunks"));
  }
  if (status.ok() && received_ > 0 && version_ < min_version_) {
    status =
        absl::DataLossError(absl::StrCat("pull returned version ", version_,
                                         " below min_version ", min_version_));
  }
  if (!status.ok()) {  // the call's name is built only for an error
    status_ = Annotate(status, shard_,
                       absl::StrCat("pull of version >= ", min_version_));
  }
  if (status_.ok()) {
    StepTrace::Record(StepEvent::kPullLanded, min_version_ - 1, shard_.id);
  }
  group_->Done(!status_.ok() && !absl::IsUnavailable(status_));
}

absl::Status PullCall::Accept() {
  WireReader in(response_);
  PullMessage message;
  if (!ParsePullMessage(in, &message)) {
    return absl::DataLossError(
        absl::StrCat("pull sent a malformed message of ", in.size(), " bytes"));
  }
  const int64_t id = message.chunk_id;
  if (id < 0 || id >= static_cast<int64_t>(chunks_.size()) ||
      chunks_[id].shard != shard_.id) {
    return absl::DataLossError(
        absl::StrCat("pull sent chunk ", id, ", which the shard does not own"));
  }
  if (!ChunkInPullRange(chunks_[id], range_)) {
    return absl::DataLossError(
        absl::StrCat("pull sent chunk ", id, ", outside the range [",
                     range_.begin, ", ", range_.end, ") asked for"));
  }
  if (seen_[id]) {
    return absl::DataLossError(absl::StrCat("pull sent chunk ", id, " twice"));
  }
  const Chunk& chunk = chunks_[id];
  if (message.data_size != static_cast<size_t>(chunk.length) * sizeof(float)) {
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
  const FlatRange part = ChunkPartInRange(chunk, range_);
  if (part.end > part.begin) {
    in.CopyOut(
        message.data_begin +
            static_cast<size_t>(part.begin - chunk.flat_offset) * sizeof(float),
        static_cast<size_t>(part.size()) * sizeof(float),
        reinterpret_cast<char*>(flat_ + (part.begin - range_.begin)));
  }
  seen_[id] = 1;
  ++received_;
  return absl::OkStatus();
}

void PushCall::Start() {
  shard_.bytes->AddCall();
  PrepareContext(context_, shard_, timeout_);
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

void PushCall::Enqueue(grpc::ByteBuffer request) {
  Action action;
  {
    absl::MutexLock lock(&mu_);
    requests_.push_back(std::move(request));
    if (shard_.shaper != nullptr) Reserve(requests_.back());
    action = PumpLocked();
  }
  Run(action);
}

void PushCall::Close() {
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }
  Run(Pump());
}

void PushCall::Cancel() {
  context_.TryCancel();
  Close();
}

void PushCall::OnWriteDone(bool ok) {
  Action action;
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (ok) {
      if (counter_ != nullptr) {
        counter_->AddSent(static_cast<int64_t>(requests_[next_].Length()));
      }
      shard_.bytes->AddSent(static_cast<int64_t>(requests_[next_].Length()));
      ++next_;
    } else {
      broken_ = true;  // the call is over; OnDone() tells why
    }
    action = PumpLocked();
  }
  Run(action);
}

void PushCall::OnDone(const grpc::Status& grpc_status) {
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
      if (counter_ != nullptr) counter_->AddReceived(size);
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
  StepTrace::Record(StepEvent::kPushAcked, StepTrace::kUnknownStep, shard_.id);
  group_->Done(false);
}

std::deque<grpc::ByteBuffer> PushCall::TakeRequests() {
  absl::MutexLock lock(&mu_);
  release_.clear();  // a retry books them again
  return std::move(requests_);
}

void PushCall::Reserve(const grpc::ByteBuffer& request) {
  release_.push_back(shard_.shaper->ReserveSend(
      static_cast<int64_t>(request.Length()), absl::Now()));
}

PushCall::Action PushCall::Pump() {
  absl::MutexLock lock(&mu_);
  return PumpLocked();
}

PushCall::Action PushCall::PumpLocked() {
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

void PushCall::Run(const Action& action) {
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

}  // namespace ps_internal
}  // namespace ferry
