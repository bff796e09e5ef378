#include "tests/worker/ps_test_fixture.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace ferry::testing {
namespace {

// Collects the ranges of one push, then hands the whole gradient over.
class InMemoryPushSession final : public PushSession {
 public:
  InMemoryPushSession(InMemoryPs* ps, std::string worker_id, PushInfo info)
      : ps_(ps),
        worker_id_(std::move(worker_id)),
        info_(info),
        grads_(ps->num_elements(), 0.0f),
        declared_(ps->num_elements(), false) {}

  absl::Status Ready(int64_t offset, int64_t length,
                     const float* grads) override {
    if (finished_) return absl::FailedPreconditionError("push finished");
    if (offset < 0 || length < 0 || offset + length > ps_->num_elements()) {
      return absl::InvalidArgumentError("range outside the parameters");
    }
    for (int64_t i = 0; i < length; ++i) {
      if (declared_[offset + i]) {
        return absl::InvalidArgumentError("range declared twice");
      }
      declared_[offset + i] = true;
      grads_[offset + i] = grads == nullptr ? 0.0f : grads[i];
    }
    return absl::OkStatus();
  }
  absl::Status ReadyZeros(int64_t offset, int64_t length) override {
    return Ready(offset, length, nullptr);
  }
  // Zeros: this in-memory PS skips nothing in its optimizer.
  absl::Status ReadyAbsent(int64_t offset, int64_t length) override {
    return Ready(offset, length, nullptr);
  }

  absl::Status Finish() override {
    if (finished_) return absl::FailedPreconditionError("finished twice");
    finished_ = true;
    if (std::find(declared_.begin(), declared_.end(), false) !=
        declared_.end()) {
      return absl::FailedPreconditionError("a range was never declared");
    }
    ps_->Push(info_.step, worker_id_, info_.num_samples, std::move(grads_));
    return absl::OkStatus();
  }

 private:
  InMemoryPs* const ps_;
  const std::string worker_id_;
  const PushInfo info_;
  std::vector<float> grads_;
  std::vector<bool> declared_;
  bool finished_ = false;
};

class InMemoryParameterClient final : public ParameterClient {
 public:
  InMemoryParameterClient(InMemoryPs* ps, std::string worker_id)
      : ps_(ps), worker_id_(std::move(worker_id)) {}
  int64_t num_elements() const override { return ps_->num_elements(); }
  absl::StatusOr<int64_t> Pull(int64_t min_version,
                               float* flat_params) override {
    if (range_.end == 0) {
      return ps_->Pull(min_version, flat_params, absl::Minutes(1));
    }
    std::vector<float> whole(ps_->num_elements());
    ASSIGN_OR_RETURN(const int64_t version,
                     ps_->Pull(min_version, whole.data(), absl::Minutes(1)));
    std::copy(whole.begin() + range_.begin, whole.begin() + range_.end,
              flat_params);
    return version;
  }
  void SetPullRange(FlatRange range) override { range_ = range; }
  absl::StatusOr<std::unique_ptr<PushSession>> BeginPush(
      const PushInfo& info) override {
    if (info.num_samples < 0) {
      return absl::InvalidArgumentError("negative num_samples");
    }
    return std::unique_ptr<PushSession>(
        std::make_unique<InMemoryPushSession>(ps_, worker_id_, info));
  }
  TransferBytes bytes() const override { return {}; }

 private:
  InMemoryPs* const ps_;
  const std::string worker_id_;
  FlatRange range_;
};

}  // namespace

InMemoryPs::InMemoryPs(const OptimizerConfig& optimizer,
                       std::vector<float> initial)
    : n_(static_cast<int64_t>(initial.size())),
      backend_(*MakeBackend(DeviceChoice::kCpu, 1)) {
  absl::MutexLock lock(&mu_);
  params_ = *backend_->Allocate(n_);
  grads_ = *backend_->Allocate(n_);
  std::copy(initial.begin(), initial.end(), params_.data());
  optimizer_ = std::make_unique<Optimizer>(
      *Optimizer::Create(optimizer, backend_.get(), n_));
}

ParameterClientFactory InMemoryPs::ClientFactory() {
  return [this](const v1::JobSpec&, const std::string& worker_id,
                const ParameterLayout&)
             -> absl::StatusOr<std::unique_ptr<ParameterClient>> {
    return std::unique_ptr<ParameterClient>(
        std::make_unique<InMemoryParameterClient>(this, worker_id));
  };
}

absl::Status InMemoryPs::FinalizeStep(
    int64_t step, int64_t, const std::vector<v1::Contributor>& contributors) {
  absl::MutexLock lock(&mu_);
  if (step < version_) return absl::OkStatus();  // applied already
  if (step != version_) {
    return absl::FailedPreconditionError(
        absl::StrFormat("finalize of step %d at version %d", step, version_));
  }
  std::fill(grads_.data(), grads_.data() + n_, 0.0f);
  int64_t samples = 0;
  for (const v1::Contributor& c : contributors) {
    auto it = pushes_.find({step, c.worker_id()});
    if (it == pushes_.end()) {
      return absl::FailedPreconditionError(
          absl::StrFormat("%s did not push step %d", c.worker_id(), step));
    }
    for (int64_t i = 0; i < n_; ++i) grads_.data()[i] += it->second.grads[i];
    samples += it->second.num_samples;
  }
  if (samples > 0) {
    RETURN_IF_ERROR(
        backend_->Scale(n_, 1.0f / static_cast<float>(samples), grads_.data()));
    RETURN_IF_ERROR(optimizer_->Apply(grads_.data(), params_.data()));
  }
  version_ = step + 1;
  pushes_.erase(pushes_.begin(), pushes_.lower_bound({step + 1, ""}));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> InMemoryPs::Versions() {
  absl::MutexLock lock(&mu_);
  return std::vector<int64_t>{version_};
}

absl::StatusOr<int64_t> InMemoryPs::Pull(int64_t min_version, float* out,
                                         absl::Duration timeout) {
  struct Reached {
    const int64_t* version;
    int64_t min;
    bool operator()() const { return *version >= min; }
  };
  absl::MutexLock lock(&mu_);
  const Reached reached{&version_, min_version};
  if (!mu_.AwaitWithTimeout(absl::Condition(&reached), timeout)) {
    return absl::DeadlineExceededError(
        absl::StrFormat("version %d not reached", min_version));
  }
  std::copy(params_.data(), params_.data() + n_, out);
  return version_;
}

void InMemoryPs::Push(int64_t step, const std::string& worker_id,
                      int64_t num_samples, std::vector<float> grads) {
  absl::MutexLock lock(&mu_);
  if (step < version_) {
    ++late_pushes_;
    return;
  }
  pushes_[{step, worker_id}] = Pushed{num_samples, std::move(grads)};
}

int64_t InMemoryPs::version() const {
  absl::MutexLock lock(&mu_);
  return version_;
}

int64_t InMemoryPs::late_pushes() const {
  absl::MutexLock lock(&mu_);
  return late_pushes_;
}

}  // namespace ferry::testing
