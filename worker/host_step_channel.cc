#include "worker/host_step_channel.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ferry {

absl::Status HostStepChannel::EndedLocked() const {
  if (closed_) return absl::FailedPreconditionError("the job was closed");
  if (ended_.has_value() && !ended_->ok()) return *ended_;
  return absl::OkStatus();
}

absl::StatusOr<std::optional<HostLease>> HostStepChannel::NextLease(
    int64_t train_samples, absl::Duration wait) {
  if (train_samples <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the training set is empty (", train_samples, " samples)"));
  }
  absl::MutexLock lock(&mu_);
  if (absl::Status s = EndedLocked(); !s.ok()) return s;
  if (host_ == HostState::kInStep || host_ == HostState::kFinishing) {
    return absl::FailedPreconditionError(
        "a step is open: call step() before asking for the next batch");
  }
  host_ = HostState::kAsking;
  train_samples_ = train_samples;
  const bool answered = mu_.AwaitWithTimeout(
      absl::Condition(
          +[](HostStepChannel* c) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return c->offered_.has_value() || c->ended_.has_value() ||
                   c->closed_;
          },
          this),
      wait);
  if (!answered) {
    return absl::DeadlineExceededError("no lease yet");  // still asking
  }
  if (offered_.has_value()) {
    std::optional<HostLease> lease = std::move(offered_);
    offered_.reset();
    // An evaluation alone opens no step.
    host_ = lease->samples.empty() ? HostState::kIdle : HostState::kInStep;
    return lease;
  }
  host_ = HostState::kIdle;
  if (absl::Status s = EndedLocked(); !s.ok()) return s;
  return std::optional<HostLease>();  // finished
}

absl::Status HostStepChannel::Ready(int64_t offset, int64_t length,
                                    bool absent) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = EndedLocked(); !s.ok()) return s;
  if (host_ != HostState::kInStep) {
    return absl::FailedPreconditionError(
        "no step is open: gradients are declared between a batch and step()");
  }
  events_.push_back(HostEvent{.kind = HostEvent::Kind::kReady,
                              .offset = offset,
                              .length = length,
                              .absent = absent});
  return absl::OkStatus();
}

absl::StatusOr<bool> HostStepChannel::Finish(double loss_sum, int64_t correct) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = EndedLocked(); !s.ok()) return s;
  if (host_ != HostState::kInStep) {
    return absl::FailedPreconditionError("step() without a batch");
  }
  host_ = HostState::kFinishing;
  verdict_.reset();
  events_.push_back(HostEvent{.kind = HostEvent::Kind::kFinish,
                              .loss_sum = loss_sum,
                              .correct = correct});
  mu_.Await(absl::Condition(
      +[](HostStepChannel* c) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return c->verdict_.has_value() || c->ended_.has_value() || c->closed_;
      },
      this));
  host_ = HostState::kIdle;
  if (verdict_.has_value()) {
    absl::StatusOr<bool> verdict = std::move(*verdict_);
    verdict_.reset();
    return verdict;
  }
  if (absl::Status s = EndedLocked(); !s.ok()) return s;
  return false;  // the worker finished without this step
}

void HostStepChannel::SetEvaluates(bool evaluates) {
  absl::MutexLock lock(&mu_);
  evaluates_ = evaluates;
}

absl::Status HostStepChannel::ReportEvaluation(const HostEvaluation& result) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = EndedLocked(); !s.ok()) return s;
  evaluation_ = result;
  return absl::OkStatus();
}

bool HostStepChannel::evaluates() const {
  absl::MutexLock lock(&mu_);
  return evaluates_;
}

absl::StatusOr<HostEvaluation> HostStepChannel::AwaitEvaluation() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](HostStepChannel* c) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return c->evaluation_.has_value() || c->closed_ ||
               (c->host_ == HostState::kAsking && !c->offered_.has_value());
      },
      this));
  if (evaluation_.has_value()) {
    HostEvaluation result = std::move(*evaluation_);
    evaluation_.reset();
    return result;
  }
  if (closed_) return absl::CancelledError("the host program left the job");
  return absl::FailedPreconditionError(
      "the host asked for its next lease without reporting the evaluation "
      "it was given");
}

void HostStepChannel::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

absl::StatusOr<int64_t> HostStepChannel::WaitForHost() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](HostStepChannel* c) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return c->host_ == HostState::kAsking || c->closed_;
      },
      this));
  if (closed_) return absl::CancelledError("the host program left the job");
  return train_samples_;
}

void HostStepChannel::Offer(HostLease lease) {
  absl::MutexLock lock(&mu_);
  events_.clear();
  offered_ = std::move(lease);
}

absl::StatusOr<HostEvent> HostStepChannel::TakeEvent() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](HostStepChannel* c) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return !c->events_.empty() || c->closed_;
      },
      this));
  if (closed_) return absl::CancelledError("the host program left the job");
  HostEvent event = events_.front();
  events_.pop_front();
  return event;
}

void HostStepChannel::Complete(absl::StatusOr<bool> verdict) {
  absl::MutexLock lock(&mu_);
  verdict_ = std::move(verdict);
}

void HostStepChannel::End(absl::Status status) {
  absl::MutexLock lock(&mu_);
  ended_ = std::move(status);
}

}  // namespace ferry
