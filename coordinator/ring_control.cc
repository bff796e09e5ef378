#include "coordinator/ring_control.h"

#include <cstring>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/backoff.h"
#include "common/status_macros.h"
#include "ferry/v1/ring.grpc.pb.h"
#include "proto/job_convert.h"
#include "proto/rpc_util.h"

namespace ferry {
namespace {
constexpr absl::Duration kRetryPause = absl::Milliseconds(50);
constexpr absl::Duration kCallTimeout = absl::Seconds(10);
}  // namespace

absl::StatusOr<std::unique_ptr<RingControl>> RingControl::Create(
    const v1::JobSpec& job, Dataset test_set, const std::string& export_dir,
    absl::Duration fetch_timeout) {
  std::unique_ptr<RingControl> control(new RingControl());
  control->job_ = job;
  control->fetch_timeout_ = fetch_timeout;
  ASSIGN_OR_RETURN(ModelDef model, JobModel(job));  // refuses a DLRM
  ASSIGN_OR_RETURN(
      control->evaluator_,
      TestSetEvaluator::Create(model, std::move(test_set), export_dir));
  return control;
}

void RingControl::set_member_source(MemberSource source) {
  absl::MutexLock lock(&mu_);
  members_ = std::move(source);
}

absl::Status RingControl::Fetch(const std::string& address, int64_t min_step,
                                std::vector<float>& params) {
  auto stub = v1::RingPeer::NewStub(MakeChannel(address));
  grpc::ClientContext context;
  SetDeadline(context, kCallTimeout);
  v1::WeightsRequest request;
  request.set_job_id(job_.job_id());
  request.set_min_step(min_step);
  counter_.AddSent(static_cast<int64_t>(request.ByteSizeLong()));
  auto reader = stub->GetWeights(&context, request);
  v1::WeightsChunk chunk;
  const int64_t n = static_cast<int64_t>(params.size());
  int64_t filled = 0;
  while (reader->Read(&chunk)) {
    counter_.AddReceived(static_cast<int64_t>(chunk.ByteSizeLong()));
    const int64_t count =
        static_cast<int64_t>(chunk.data().size() / sizeof(float));
    if (chunk.total_elements() != n || chunk.offset() != filled ||
        chunk.data().size() % sizeof(float) != 0 || filled + count > n) {
      context.TryCancel();
      reader->Finish();
      return absl::DataLossError(absl::StrFormat(
          "weights from %s: chunk at %d of %d bytes (total %d) does not "
          "continue the %d of %d elements received",
          address, chunk.offset(), chunk.data().size(), chunk.total_elements(),
          filled, n));
    }
    std::memcpy(params.data() + filled, chunk.data().data(),
                chunk.data().size());
    filled += count;
  }
  RETURN_IF_ERROR(FromGrpcStatus(reader->Finish()));
  if (filled != n) {
    return absl::DataLossError(absl::StrFormat(
        "weights from %s: %d of %d elements received", address, filled, n));
  }
  return absl::OkStatus();
}

absl::StatusOr<TestScores> RingControl::Evaluate(int64_t min_version) {
  return EvaluateAndNotify(min_version, [] {});
}

absl::StatusOr<TestScores> RingControl::EvaluateAndNotify(
    int64_t min_version, absl::FunctionRef<void()> fetched) {
  MemberSource source;
  {
    absl::MutexLock lock(&mu_);
    source = members_;
  }
  std::vector<float> params(evaluator_->num_parameters());
  Backoff backoff(RetryPolicy{.initial_backoff = kRetryPause,
                              .max_backoff = kRetryPause * 8,
                              .budget = fetch_timeout_});
  absl::Status last = absl::UnavailableError("the ring has no members");
  do {
    const std::vector<std::string> members =
        source ? source() : std::vector<std::string>();
    for (const std::string& address : members) {
      if (address.empty()) continue;
      last = Fetch(address, min_version, params);
      if (last.ok()) {
        fetched();
        return evaluator_->Evaluate(params.data());
      }
      if (!absl::IsUnavailable(last)) break;  // a real fault: try again later
    }
  } while (backoff.Wait());
  return absl::DeadlineExceededError(absl::StrFormat(
      "no ring member gave its weights after step %d within %s: %s",
      min_version, absl::FormatDuration(fetch_timeout_), last.ToString()));
}

}  // namespace ferry
