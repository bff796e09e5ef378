#include "coordinator/coordinator_service.h"

#include "proto/rpc_auth.h"
#include "proto/rpc_util.h"

namespace ferry {
namespace {

// Finishes `context`'s default reactor with `status`, counting the bytes.
grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* context,
                                Coordinator* core,
                                const google::protobuf::Message& request,
                                const google::protobuf::Message& response,
                                const absl::Status& status) {
  core->CountBytes("worker", status.ok() ? response.ByteSizeLong() : 0,
                   request.ByteSizeLong());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* CoordinatorService::Register(
    grpc::CallbackServerContext* context, const v1::RegisterRequest* request,
    v1::RegisterResponse* response) {
  if (grpc::Status auth = CheckCallAuth(context); !auth.ok()) {
    return RejectUnary(context, auth);
  }
  auto result = core_->Register(*request);
  if (result.ok()) *response = std::move(*result);
  return Reply(context, core_, *request, *response, result.status());
}

grpc::ServerUnaryReactor* CoordinatorService::Heartbeat(
    grpc::CallbackServerContext* context, const v1::HeartbeatRequest* request,
    v1::HeartbeatResponse* response) {
  if (grpc::Status auth = CheckCallAuth(context); !auth.ok()) {
    return RejectUnary(context, auth);
  }
  auto result = core_->Heartbeat(request->worker_id());
  if (result.ok()) *response = *result;
  return Reply(context, core_, *request, *response, result.status());
}

grpc::ServerUnaryReactor* CoordinatorService::Leave(
    grpc::CallbackServerContext* context, const v1::LeaveRequest* request,
    v1::LeaveResponse* response) {
  if (grpc::Status auth = CheckCallAuth(context); !auth.ok()) {
    return RejectUnary(context, auth);
  }
  return Reply(context, core_, *request, *response,
               core_->Leave(request->worker_id()));
}

grpc::ServerUnaryReactor* CoordinatorService::GetJob(
    grpc::CallbackServerContext* context, const v1::GetJobRequest* request,
    v1::JobSpec* response) {
  if (grpc::Status auth = CheckCallAuth(context); !auth.ok()) {
    return RejectUnary(context, auth);
  }
  *response = core_->job();
  return Reply(context, core_, *request, *response, absl::OkStatus());
}

grpc::ServerUnaryReactor* CoordinatorService::NextTask(
    grpc::CallbackServerContext* context, const v1::NextTaskRequest* request,
    v1::NextTaskResponse* response) {
  if (grpc::Status auth = CheckCallAuth(context); !auth.ok()) {
    return RejectUnary(context, auth);
  }
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
}

grpc::ServerUnaryReactor* CoordinatorService::Status(
    grpc::CallbackServerContext* context, const v1::StatusRequest* request,
    v1::StatusResponse* response) {
  if (grpc::Status auth = CheckCallAuth(context); !auth.ok()) {
    return RejectUnary(context, auth);
  }
  *response = core_->Status();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  (void)request;
  return reactor;
}

}  // namespace ferry
