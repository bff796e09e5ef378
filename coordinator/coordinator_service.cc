#include "coordinator/coordinator_service.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "proto/unary_handler.h"

namespace ferry {

namespace {

// Little-endian fp32 bytes (the hosts ferry runs on are little-endian).
std::vector<float> FloatsOf(const std::string& bytes) {
  std::vector<float> values(bytes.size() / sizeof(float));
  if (!values.empty())
    std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

}  // namespace

CountCallBytes CoordinatorService::WorkerBytes() const {
  return [this](int64_t sent, int64_t received) {
    if (Coordinator* core = core_.load(std::memory_order_acquire)) {
      core->CountBytes("worker", sent, received);
    }
  };
}

absl::StatusOr<Coordinator*> CoordinatorService::Core() const {
  Coordinator* core = core_.load(std::memory_order_acquire);
  if (core == nullptr) {
    return absl::UnavailableError(
        "the job's model is not defined yet: its first worker (a ferry.torch "
        "script) defines it");
  }
  return core;
}

absl::StatusOr<ModelIntake*> CoordinatorService::Intake(
    const std::string& job_id) const {
  if (intake_ == nullptr) {
    return absl::FailedPreconditionError(
        "this job trains ferry's own model; only a job started with --model "
        "external takes its model from a worker");
  }
  if (!job_id.empty() && job_id != pending_job_.job_id()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this coordinator runs job ", pending_job_.job_id(), ", not ", job_id));
  }
  return intake_;
}

grpc::ServerUnaryReactor* CoordinatorService::Register(
    grpc::CallbackServerContext* context, const v1::RegisterRequest* request,
    v1::RegisterResponse* response) {
  return HandleUnary(context, RpcMethod::kCoordinatorRegister, *request,
                     *response, WorkerBytes(), [&] {
                       ASSIGN_OR_RETURN(Coordinator * core, Core());
                       auto result = core->Register(*request);
                       if (result.ok()) *response = std::move(*result);
                       return result.status();
                     });
}

grpc::ServerUnaryReactor* CoordinatorService::Heartbeat(
    grpc::CallbackServerContext* context, const v1::HeartbeatRequest* request,
    v1::HeartbeatResponse* response) {
  return HandleUnary(context, RpcMethod::kCoordinatorHeartbeat, *request,
                     *response, WorkerBytes(), [&] {
                       ASSIGN_OR_RETURN(Coordinator * core, Core());
                       auto result = core->Heartbeat(request->worker_id());
                       if (result.ok()) *response = *result;
                       return result.status();
                     });
}

grpc::ServerUnaryReactor* CoordinatorService::Leave(
    grpc::CallbackServerContext* context, const v1::LeaveRequest* request,
    v1::LeaveResponse* response) {
  return HandleUnary(context, RpcMethod::kCoordinatorLeave, *request, *response,
                     WorkerBytes(), [&] {
                       ASSIGN_OR_RETURN(Coordinator * core, Core());
                       return core->Leave(request->worker_id());
                     });
}

grpc::ServerUnaryReactor* CoordinatorService::GetJob(
    grpc::CallbackServerContext* context, const v1::GetJobRequest* request,
    v1::JobSpec* response) {
  return HandleUnary(context, RpcMethod::kCoordinatorGetJob, *request,
                     *response, WorkerBytes(), [&] {
                       absl::StatusOr<Coordinator*> core = Core();
                       *response = core.ok() ? (*core)->job() : pending_job_;
                       return absl::OkStatus();
                     });
}

grpc::ServerUnaryReactor* CoordinatorService::NextTask(
    grpc::CallbackServerContext* context, const v1::NextTaskRequest* request,
    v1::NextTaskResponse* response) {
  return AuthorizedUnary(context, RpcMethod::kCoordinatorNextTask, [&] {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    absl::StatusOr<Coordinator*> core = Core();
    if (!core.ok()) {
      reactor->Finish(ToGrpcStatus(core.status()));
      return reactor;
    }
    const int64_t request_bytes = request->ByteSizeLong();
    (*core)->NextTask(
        *request, [core = *core, reactor, response,
                   request_bytes](absl::StatusOr<v1::NextTaskResponse> result) {
          if (result.ok()) *response = std::move(*result);
          core->CountBytes("worker", result.ok() ? response->ByteSizeLong() : 0,
                           request_bytes);
          reactor->Finish(ToGrpcStatus(result.status()));
        });
    return reactor;
  });
}

grpc::ServerUnaryReactor* CoordinatorService::Status(
    grpc::CallbackServerContext* context, const v1::StatusRequest* request,
    v1::StatusResponse* response) {
  // Not counted: status reads are the operator's, not a worker's.
  return HandleUnary(context, RpcMethod::kCoordinatorStatus, *request,
                     *response, CountCallBytes(), [&] {
                       absl::StatusOr<Coordinator*> core = Core();
                       if (core.ok()) {
                         *response = (*core)->Status();
                       } else {
                         *response->mutable_job() = pending_job_;
                       }
                       return absl::OkStatus();
                     });
}

grpc::ServerUnaryReactor* CoordinatorService::DefineModel(
    grpc::CallbackServerContext* context, const v1::DefineModelRequest* request,
    v1::DefineModelResponse* response) {
  return HandleUnary(
      context, RpcMethod::kCoordinatorDefineModel, *request, *response,
      WorkerBytes(), [&] {
        ASSIGN_OR_RETURN(ModelIntake * intake, Intake(request->job_id()));
        if (request->values().size() % sizeof(float) != 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("model values of ", request->values().size(),
                           " bytes are not whole fp32 values"));
        }
        ModelIntake::Offer offer;
        offer.definition_id = request->definition_id();
        for (const v1::TensorSpec& t : request->tensors()) {
          offer.tensors.push_back(
              {t.name(),
               std::vector<int64_t>(t.shape().begin(), t.shape().end())});
          offer.buffers.push_back(t.buffer());
        }
        if (request->has_optimizer()) offer.optimizer = request->optimizer();
        offer.offset = request->offset();
        const std::vector<float> values = FloatsOf(request->values());
        offer.values = values;
        offer.done = request->done();
        ASSIGN_OR_RETURN(const ModelIntake::Progress progress,
                         intake->Take(offer));
        response->set_received(progress.received);
        response->set_defined(progress.defined);
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* CoordinatorService::ModelValues(
    grpc::CallbackServerContext* context, const v1::ModelValuesRequest* request,
    v1::ModelValuesResponse* response) {
  return HandleUnary(
      context, RpcMethod::kCoordinatorModelValues, *request, *response,
      CountCallBytes(), [&] {
        ASSIGN_OR_RETURN(ModelIntake * intake, Intake(request->job_id()));
        ASSIGN_OR_RETURN(const std::vector<float> values,
                         intake->Values(request->begin(), request->end()));
        response->mutable_values()->assign(
            reinterpret_cast<const char*>(values.data()),
            values.size() * sizeof(float));
        return absl::OkStatus();
      });
}

}  // namespace ferry
