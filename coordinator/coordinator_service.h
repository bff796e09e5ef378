// gRPC adapter of the Coordinator core: translates protos and statuses, and
// counts the bytes of every message it receives and sends. No logic.
// Every method first checks the process's bearer token (proto/rpc_auth.h):
// UNAUTHENTICATED "missing bearer token" / "wrong bearer token" when one is
// configured and the call lacks it.
#ifndef FERRY_COORDINATOR_COORDINATOR_SERVICE_H_
#define FERRY_COORDINATOR_COORDINATOR_SERVICE_H_

#include "coordinator/coordinator.h"
#include "ferry/v1/coordinator.grpc.pb.h"

namespace ferry {

class CoordinatorService final : public v1::Coordinator::CallbackService {
 public:
  // `core` must outlive the service.
  explicit CoordinatorService(Coordinator* core) : core_(core) {}

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* context,
                                     const v1::RegisterRequest* request,
                                     v1::RegisterResponse* response) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
                                      const v1::HeartbeatRequest* request,
                                      v1::HeartbeatResponse* response) override;
  grpc::ServerUnaryReactor* Leave(grpc::CallbackServerContext* context,
                                  const v1::LeaveRequest* request,
                                  v1::LeaveResponse* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                   const v1::GetJobRequest* request,
                                   v1::JobSpec* response) override;
  grpc::ServerUnaryReactor* NextTask(grpc::CallbackServerContext* context,
                                     const v1::NextTaskRequest* request,
                                     v1::NextTaskResponse* response) override;
  grpc::ServerUnaryReactor* Status(grpc::CallbackServerContext* context,
                                   const v1::StatusRequest* request,
                                   v1::StatusResponse* response) override;

 private:
  Coordinator* core_;
};

}  // namespace ferry

#endif  // FERRY_COORDINATOR_COORDINATOR_SERVICE_H_
