#include "pipeline/in_memory_stage_link.h"

#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ferry {

class InMemoryStageHub::HubLink final : public StageLink {
 public:
  HubLink(InMemoryStageHub* hub, int stage) : hub_(hub), stage_(stage) {}

  absl::Status SendActivations(int64_t step, int micro,
                               std::vector<float> values) override {
    if (stage_ + 1 >= hub_->stages()) return NoNeighbour("next");
    sent_ += 4 * static_cast<int64_t>(values.size());
    return hub_->Deliver({kForward, stage_ + 1, step, micro},
                         std::move(values));
  }
  absl::StatusOr<std::vector<float>> ReceiveActivations(
      int64_t step, int micro, int64_t count, absl::Duration timeout) override {
    if (stage_ == 0) return NoNeighbour("previous");
    return Count(hub_->Take({kForward, stage_, step, micro}, timeout), count);
  }
  absl::Status SendInputGradient(int64_t step, int micro,
                                 std::vector<float> values) override {
    if (stage_ == 0) return NoNeighbour("previous");
    sent_ += 4 * static_cast<int64_t>(values.size());
    return hub_->Deliver({kBackward, stage_ - 1, step, micro},
                         std::move(values));
  }
  absl::StatusOr<std::vector<float>> ReceiveOutputGradient(
      int64_t step, int micro, int64_t count, absl::Duration timeout) override {
    if (stage_ + 1 >= hub_->stages()) return NoNeighbour("next");
    return Count(hub_->Take({kBackward, stage_, step, micro}, timeout), count);
  }
  int64_t bytes_sent() const override { return sent_; }
  int64_t bytes_received() const override { return received_; }

 private:
  absl::Status NoNeighbour(const char* which) const {
    return absl::FailedPreconditionError(
        absl::StrCat("pipeline stage ", stage_, " has no ", which, " stage"));
  }
  absl::StatusOr<std::vector<float>> Count(
      absl::StatusOr<std::vector<float>> got, int64_t count) {
    if (!got.ok()) return got;
    received_ += 4 * static_cast<int64_t>(got->size());
    if (static_cast<int64_t>(got->size()) != count) {
      return absl::DataLossError(absl::StrCat("pipeline stage ", stage_,
                                              ": expected ", count,
                                              " floats, got ", got->size()));
    }
    return got;
  }

  InMemoryStageHub* hub_;
  const int stage_;
  std::atomic<int64_t> sent_{0};
  std::atomic<int64_t> received_{0};
};

InMemoryStageHub::InMemoryStageHub(int stages) : stages_(stages) {
  for (int s = 0; s < stages; ++s) {
    links_.push_back(std::make_unique<HubLink>(this, s));
  }
}

InMemoryStageHub::~InMemoryStageHub() = default;

StageLink& InMemoryStageHub::Link(int stage) { return *links_[stage]; }

void InMemoryStageHub::Abort(absl::Status status) {
  absl::MutexLock lock(&mu_);
  aborted_ = std::move(status);
}

absl::Status InMemoryStageHub::Deliver(Key key, std::vector<float> values) {
  absl::MutexLock lock(&mu_);
  if (!aborted_.ok()) return aborted_;
  mail_[key] = std::move(values);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> InMemoryStageHub::Take(
    Key key, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const auto there = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !aborted_.ok() || mail_.contains(key);
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&there), timeout)) {
    const auto& [direction, stage, step, micro] = key;
    return absl::DeadlineExceededError(absl::StrCat(
        "pipeline stage ", stage, ": no ",
        direction == kForward ? "activations from stage "
                              : "output gradient from stage ",
        direction == kForward ? stage - 1 : stage + 1, " for step ", step,
        " micro-batch ", micro, " within ", absl::FormatDuration(timeout)));
  }
  if (!aborted_.ok()) return aborted_;
  auto node = mail_.extract(key);
  return std::move(node.mapped());
}

}  // namespace ferry
