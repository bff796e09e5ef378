#include "ps/local_shard_calls.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/step_trace.h"
#include "proto/raw_wire.h"
#include "ps/push_intake.h"

namespace ferry {
namespace ps_internal {
namespace {

// The shard's peer role for byte accounting, as ps_service.cc counts a
// worker's calls.
constexpr char kWorkerRole[] = "worker";

}  // namespace

// Who ends the wait: the shard's callback (Land), or the first Abandon whose
// CancelWait succeeded. `resolved` is set by the one that does, before it
// touches the call; the other then leaves the call alone.
struct LocalPullCall::Wait {
  absl::Mutex mu;
  bool resolved ABSL_GUARDED_BY(mu) = false;
  PullWaitId id ABSL_GUARDED_BY(mu) = kNoPullWait;
  PsShard* ps = nullptr;
  LocalPullCall* call = nullptr;  // alive until it finished
};

LocalPullCall::LocalPullCall(const Shard& shard,
                             const std::vector<Chunk>& chunks,
                             const v1::PullRequest& request,
                             absl::Duration timeout, float* flat,
                             ByteCounter* shard_counter, CallGroup* group)
    : shard_(shard),
      ps_(shard.local),
      shard_counter_(shard_counter != nullptr ? shard_counter
                                              : shard.bytes.get()),
      chunks_(chunks),
      request_(request),
      timeout_(timeout),
      flat_(flat),
      group_(group),
      wait_(std::make_shared<Wait>()) {
  wait_->ps = ps_;
  wait_->call = this;
}

void LocalPullCall::Start() {
  const int64_t request_size = static_cast<int64_t>(request_.ByteSizeLong());
  shard_counter_->AddSent(request_size);
  shard_counter_->AddCall();
  ps_->RecordBytes(kWorkerRole, 0, request_size);
  absl::StatusOr<PullWaitId> id = ps_->WaitForVersion(
      request_.job_id(), request_.min_version(),
      [this](absl::StatusOr<std::shared_ptr<const PsSnapshot>> snapshot) {
        Land(std::move(snapshot));
      },
      request_.generation());
  {
    absl::MutexLock lock(&wait_->mu);
    if (wait_->resolved) return;  // landed already (inline or meanwhile)
    if (id.ok()) {
      wait_->id = *id;
    } else {
      wait_->resolved = true;
    }
  }
  if (!id.ok()) {
    Finish(id.status());
    return;
  }
  std::shared_ptr<Wait> wait = wait_;
  const absl::Duration timeout = timeout_;
  alarm_.Set(
      absl::ToChronoTime(absl::Now() + timeout_), [wait, timeout](bool fired) {
        if (!fired) return;  // cancelled: the call is over
        Abandon(wait, absl::DeadlineExceededError(
                          absl::StrCat("the version did not come within ",
                                       absl::FormatDuration(timeout))));
      });
}

void LocalPullCall::Cancel() {
  Abandon(wait_, absl::CancelledError("pull cancelled"));
}

void LocalPullCall::Abandon(const std::shared_ptr<Wait>& wait,
                            const absl::Status& status) {
  PullWaitId id = kNoPullWait;
  {
    absl::MutexLock lock(&wait->mu);
    if (wait->resolved || wait->id == kNoPullWait) return;
    id = wait->id;
  }
  // False: the shard's callback runs or ran, or another Abandon won.
  if (!wait->ps->CancelWait(id)) return;
  LocalPullCall* call = nullptr;
  {
    absl::MutexLock lock(&wait->mu);
    wait->resolved = true;
    call = wait->call;
  }
  call->Finish(status);
}

void LocalPullCall::Land(
    absl::StatusOr<std::shared_ptr<const PsSnapshot>> snapshot) {
  {
    absl::MutexLock lock(&wait_->mu);
    wait_->resolved = true;
  }
  if (!snapshot.ok()) {  // the shard shut down or was rolled back
    Finish(snapshot.status());
    return;
  }
  const FlatRange range{request_.range_begin(), request_.range_end()};
  const int64_t slice_begin = ps_->range().begin;
  int64_t bytes = 0;
  int64_t landed = 0;
  for (const Chunk& chunk : chunks_) {
    if (chunk.shard != shard_.id || !ChunkInPullRange(chunk, range)) continue;
    const FlatRange part = ChunkPartInRange(chunk, range);
    if (part.end > part.begin) {
      std::memcpy(flat_ + (part.begin - range.begin),
                  (*snapshot)->values.data() + (part.begin - slice_begin),
                  static_cast<size_t>(part.size()) * sizeof(float));
    }
    bytes += chunk.length * static_cast<int64_t>(sizeof(float));
    ++landed;
  }
  if (landed > 0) version_ = (*snapshot)->version;
  shard_counter_->AddReceived(bytes);
  ps_->RecordBytes(kWorkerRole, bytes, 0);
  Finish(absl::OkStatus());
}

void LocalPullCall::Finish(const absl::Status& status) {
  status_ =
      Annotate(status, shard_,
               absl::StrCat("pull of version >= ", request_.min_version()));
  if (status_.ok()) {
    StepTrace::Record(StepEvent::kPullLanded, request_.min_version() - 1,
                      shard_.id);
  }
  group_->Done(!status_.ok() && !absl::IsUnavailable(status_));
}

LocalPushCall::LocalPushCall(const Shard& shard, CallGroup* group,
                             std::deque<grpc::ByteBuffer> requests,
                             bool is_retry)
    : shard_(shard),
      ps_(shard.local),
      group_(group),
      requests_(std::move(requests)),
      is_retry_(is_retry) {}

void LocalPushCall::Start() {
  shard_.bytes->AddCall();
  for (const grpc::ByteBuffer& message : requests_) Take(message);
  if (is_retry_) Close();
}

void LocalPushCall::Enqueue(grpc::ByteBuffer request) {
  if (done_) return;
  requests_.push_back(std::move(request));
  Take(requests_.back());
}

void LocalPushCall::Take(const grpc::ByteBuffer& message) {
  if (!error_.ok()) return;
  ++taken_;
  const int64_t size = static_cast<int64_t>(message.Length());
  shard_.bytes->AddSent(size);
  ps_->RecordBytes(kWorkerRole, 0, size);
  grpc::ByteBuffer wire(message);  // parsing may consume its input
  error_ = TakePushWire(*ps_, wire, taken_, staging_);
}

void LocalPushCall::Close() {
  if (done_) return;
  if (!error_.ok()) {
    Finish(error_);
    return;
  }
  if (staging_ == nullptr) {
    Finish(ps_->RejectPush(
        absl::InvalidArgumentError("push stream ended without a header")));
    return;
  }
  absl::StatusOr<int64_t> version = ps_->CommitPush(std::move(staging_));
  v1::PushResponse response;
  if (version.ok()) response.set_version(*version);
  const int64_t size = static_cast<int64_t>(response.ByteSizeLong());
  shard_.bytes->AddReceived(size);
  ps_->RecordBytes(kWorkerRole, size, 0);
  Finish(version.status());
}

void LocalPushCall::Cancel() {
  if (done_) return;
  staging_.reset();  // an open push dropped: the shard applies nothing
  Finish(absl::CancelledError("push cancelled"));
}

std::deque<grpc::ByteBuffer> LocalPushCall::TakeRequests() {
  return std::move(requests_);
}

void LocalPushCall::Finish(absl::Status status) {
  done_ = true;
  // ALREADY_EXISTS: the shard holds this push from an earlier attempt
  // (PushCall::OnDone says why that counts as accepted).
  if (absl::IsAlreadyExists(status)) status = absl::OkStatus();
  status_ = Annotate(status, shard_, "push");
  StepTrace::Record(StepEvent::kPushAcked, StepTrace::kUnknownStep, shard_.id);
  group_->Done(false);
}

}  // namespace ps_internal
}  // namespace ferry
