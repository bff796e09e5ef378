#include "coordinator/coordinator_service.h"

#include "proto/unary_handler.h"

namespace ferry {

namespace {

// The coordinator's own traffic with the workers (Coordinator::CountBytes).
CountCallBytes WorkerBytes(Coordinator* core) {
  return [core](int64_t sent, int64_t received) {
    core->CountBytes("worker", sent, received);
  };
}

}  // namespace

grpc::ServerUnaryReactor* CoordinatorService::Register(
    grpc::CallbackServerContext* context, const v1::RegisterRequest* request,
    v1::RegisterResponse* response) {
  return HandleUnary(context, *request, *response, WorkerBytes(core_), [&] {
    auto result = core_->Register(*request);
    if (result.ok()) *response = std::move(*result);
    return result.status();
  });
}

grpc::ServerUnaryReactor* CoordinatorService::Heartbeat(
    grpc::CallbackServerContext* context, const v1::HeartbeatRequest* request,
    v1::HeartbeatResponse* response) {
  return HandleUnary(context, *request, *response, WorkerBytes(core_), [&] {
    auto result = core_->Heartbeat(request->worker_id());
    if (result.ok()) *response = *result;
    return result.status();
  });
}

grpc::ServerUnaryReactor* CoordinatorService::Leave(
    grpc::CallbackServerContext* context, const v1::LeaveRequest* request,
    v1::LeaveResponse* response) {
  return HandleUnary(context, *request, *response, WorkerBytes(core_),
                     [&] { return core_->Leave(request->worker_id()); });
}

grpc::ServerUnaryReactor* CoordinatorService::GetJob(
    grpc::CallbackServerContext* context, const v1::GetJobRequest* request,
    v1::JobSpec* response) {
  return HandleUnary(context, *request, *response, WorkerBytes(core_), [&] {
    *response = core_->job();
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* CoordinatorService::NextTask(
    grpc::CallbackServerContext* context, const v1::NextTaskRequest* request,
    v1::NextTaskResponse* response) {
  return AuthorizedUnary(context, [&] {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    const int64_t request_bytes = request->ByteSizeLong();
    core_->NextTask(*request, [this, reactor, response, request_bytes](
                                  absl::StatusOr<v1::NextTaskResponse> result) {
      if (result.ok()) *response = std::move(*result);
      core_->CountBytes("worker", result.ok() ? response->ByteSizeLong() : 0,
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
  return HandleUnary(context, *request, *response, CountCallBytes(), [&] {
    *response = core_->Status();
    return absl::OkStatus();
  });
}

}  // namespace ferry
