#include "coordinator/coordinator_client.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "coordinator/model_intake.h"
#include "proto/rpc_util.h"

namespace ferry {

CoordinatorClient::CoordinatorClient(
    std::unique_ptr<v1::Coordinator::StubInterface> stub,
    CoordinatorClientOptions options)
    : stub_(std::move(stub)), options_(std::move(options)) {}

std::unique_ptr<CoordinatorClient> CoordinatorClient::Connect(
    const std::string& address, CoordinatorClientOptions options) {
  return std::make_unique<CoordinatorClient>(
      v1::Coordinator::NewStub(MakeChannel(address)), std::move(options));
}

template <typename Request, typename Response>
absl::StatusOr<Response> CoordinatorClient::Call(
    grpc::Status (v1::Coordinator::StubInterface::*method)(grpc::ClientContext*,
                                                           const Request&,
                                                           Response*),
    const Request& request, absl::Duration timeout, bool retry) {
  Backoff backoff(options_.retry);
  while (true) {
    grpc::ClientContext context;
    SetDeadline(context, timeout);
    Response response;
    counter_.AddSent(static_cast<int64_t>(request.ByteSizeLong()));
    const absl::Status status =
        FromGrpcStatus(((*stub_).*method)(&context, request, &response));
    if (status.ok()) {
      counter_.AddReceived(static_cast<int64_t>(response.ByteSizeLong()));
      return response;
    }
    const bool cancelled =
        options_.cancel != nullptr && options_.cancel->load();
    if (!retry || !absl::IsUnavailable(status) || cancelled ||
        !backoff.Wait()) {
      return status;
    }
  }
}

absl::StatusOr<v1::RegisterResponse> CoordinatorClient::Register(
    const v1::RegisterRequest& request) {
  return Call(&v1::Coordinator::StubInterface::Register, request,
              options_.rpc_timeout, /*retry=*/true);
}

absl::StatusOr<v1::JobSpec> CoordinatorClient::GetJob() {
  return Call(&v1::Coordinator::StubInterface::GetJob, v1::GetJobRequest(),
              options_.rpc_timeout, /*retry=*/true);
}

absl::StatusOr<bool> CoordinatorClient::DefineModel(
    const std::string& job_id, const std::vector<v1::TensorSpec>& tensors,
    absl::Span<const float> values, const v1::OptimizerSpec* optimizer) {
  absl::BitGen bitgen;
  v1::DefineModelRequest request;
  request.set_job_id(job_id);
  request.set_definition_id(absl::StrFormat("%016x%016x",
                                            absl::Uniform<uint64_t>(bitgen),
                                            absl::Uniform<uint64_t>(bitgen)));
  for (const v1::TensorSpec& t : tensors) *request.add_tensors() = t;
  if (optimizer != nullptr) *request.mutable_optimizer() = *optimizer;
  const int64_t total = static_cast<int64_t>(values.size());
  // The first call names the tensors only: a worker that is not the one to
  // define the model learns it before sending any value.
  int64_t offset = 0;
  for (bool first = true; first || offset < total; first = false) {
    const int64_t n =
        first ? 0 : std::min(kMaxModelValuesPerCall, total - offset);
    request.set_offset(offset);
    request.set_values(reinterpret_cast<const char*>(values.data() + offset),
                       static_cast<size_t>(n) * sizeof(float));
    request.set_done(offset + n == total);
    absl::StatusOr<v1::DefineModelResponse> response =
        Call(&v1::Coordinator::StubInterface::DefineModel, request,
             options_.rpc_timeout, /*retry=*/true);
    if (absl::IsAlreadyExists(response.status()) ||
        absl::IsAborted(response.status())) {
      return false;
    }
    RETURN_IF_ERROR(response.status());
    if (response->defined()) return true;
    request.clear_tensors();
    request.clear_optimizer();
    offset += n;
  }
  return absl::InternalError(
      "the coordinator took every model value but did not define the model");
}

absl::StatusOr<std::vector<float>> CoordinatorClient::ModelValues(
    const std::string& job_id, int64_t begin, int64_t end) {
  std::vector<float> values;
  values.reserve(static_cast<size_t>(std::max<int64_t>(0, end - begin)));
  v1::ModelValuesRequest request;
  request.set_job_id(job_id);
  for (int64_t at = begin; at < end;) {
    const int64_t n = std::min(kMaxModelValuesPerCall, end - at);
    request.set_begin(at);
    request.set_end(at + n);
    ASSIGN_OR_RETURN(const v1::ModelValuesResponse response,
                     Call(&v1::Coordinator::StubInterface::ModelValues, request,
                          options_.rpc_timeout, /*retry=*/true));
    if (response.values().size() != static_cast<size_t>(n) * sizeof(float)) {
      return absl::DataLossError(
          absl::StrCat("the coordinator sent ", response.values().size(),
                       " bytes for model values [", at, ", ", at + n, ")"));
    }
    const size_t old = values.size();
    values.resize(old + static_cast<size_t>(n));
    std::memcpy(values.data() + old, response.values().data(),
                response.values().size());
    at += n;
  }
  return values;
}

std::function<absl::StatusOr<std::vector<float>>(int64_t, int64_t)>
CoordinatorModelValues(const std::string& address, const std::string& job_id) {
  return [address, job_id](int64_t begin, int64_t end) {
    CoordinatorClientOptions options;
    options.retry.budget = absl::Seconds(60);
    return CoordinatorClient::Connect(address, options)
        ->ModelValues(job_id, begin, end);
  };
}

absl::StatusOr<v1::HeartbeatResponse> CoordinatorClient::Heartbeat(
    const v1::HeartbeatRequest& request) {
  return Call(&v1::Coordinator::StubInterface::Heartbeat, request,
              options_.short_timeout, /*retry=*/false);
}

absl::StatusOr<v1::NextTaskResponse> CoordinatorClient::NextTask(
    const v1::NextTaskRequest& request) {
  return Call(&v1::Coordinator::StubInterface::NextTask, request,
              options_.rpc_timeout, /*retry=*/true);
}

absl::Status CoordinatorClient::Leave(const v1::LeaveRequest& request) {
  return Call(&v1::Coordinator::StubInterface::Leave, request,
              options_.short_timeout, /*retry=*/false)
      .status();
}

Heartbeater::Heartbeater(CoordinatorApi* client, std::string worker_id,
                         int64_t generation, absl::Duration interval)
    : client_(client),
      worker_id_(std::move(worker_id)),
      interval_(interval),
      generation_(generation) {
  thread_ = std::thread([this] { Loop(); });
}

Heartbeater::~Heartbeater() { Stop(); }

void Heartbeater::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

bool Heartbeater::evicted() const {
  absl::MutexLock lock(&mu_);
  return evicted_;
}

int64_t Heartbeater::generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

void Heartbeater::ObserveGeneration(int64_t generation) {
  absl::MutexLock lock(&mu_);
  generation_ = std::max(generation_, generation);
}

int64_t Heartbeater::fence() const {
  absl::MutexLock lock(&mu_);
  return fence_;
}

void Heartbeater::SetFenceListener(std::function<void(int64_t)> listener) {
  absl::MutexLock lock(&mu_);
  fence_listener_ = std::move(listener);
}

void Heartbeater::SetCommittedListener(std::function<void(int64_t)> listener) {
  absl::MutexLock lock(&mu_);
  committed_listener_ = std::move(listener);
}

void Heartbeater::ObserveCommitted(int64_t steps) {
  std::function<void(int64_t)> listener;
  {
    absl::MutexLock lock(&mu_);
    if (steps <= committed_) return;
    committed_ = steps;
    listener = committed_listener_;
  }
  if (listener) listener(steps);
}

void Heartbeater::Loop() {
  absl::StatusCode last_code = absl::StatusCode::kOk;
  while (true) {
    v1::HeartbeatRequest request;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stop_), interval_);
      if (stop_) return;
      request.set_worker_id(worker_id_);
      request.set_generation(generation_);
    }
    absl::StatusOr<v1::HeartbeatResponse> response =
        client_->Heartbeat(request);
    if (response.ok()) {
      ObserveGeneration(response->generation());
      std::function<void(int64_t)> listener;
      {
        absl::MutexLock lock(&mu_);
        if (response->fence() > fence_) {
          fence_ = response->fence();
          listener = fence_listener_;
        }
      }
      if (listener) listener(response->fence());
      ObserveCommitted(response->committed_steps());
      if (last_code != absl::StatusCode::kOk) {
        LogInfo("heartbeats accepted again");
      }
      last_code = absl::StatusCode::kOk;
      continue;
    }
    if (absl::IsNotFound(response.status())) {
      LogError("evicted by the coordinator", {{"error", response.status()}});
      absl::MutexLock lock(&mu_);
      evicted_ = true;
      return;
    }
    if (response.status().code() != last_code) {
      LogWarn("heartbeat failed (will keep trying)",
              {{"error", response.status()}});
    }
    last_code = response.status().code();
  }
}

}  // namespace ferry
