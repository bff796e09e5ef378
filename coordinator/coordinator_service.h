// gRPC adapter of the Coordinator core: translates protos and statuses, and
// counts the bytes of every message it receives and sends. No logic.
// Every method first checks the process's bearer token (proto/rpc_auth.h):
// UNAUTHENTICATED "missing bearer token" / "wrong bearer token" when one is
// configured and the call lacks it.
#ifndef FERRY_COORDINATOR_COORDINATOR_SERVICE_H_
#define FERRY_COORDINATOR_COORDINATOR_SERVICE_H_

#include <atomic>

#include "coordinator/coordinator.h"
#include "coordinator/model_intake.h"
#include "ferry/v1/coordinator.grpc.pb.h"
#include "proto/unary_handler.h"

namespace ferry {

class CoordinatorService final : public v1::Coordinator::CallbackService {
 public:
  // `core` must outlive the service. DefineModel and ModelValues answer
  // FAILED_PRECONDITION: the job trains ferry's own model.
  explicit CoordinatorService(Coordinator* core) : core_(core) {}
  // A job whose model comes from its first worker (JobSpec.model_from_worker):
  // until Attach, GetJob and Status serve `pending_job` (no tensors), the
  // worker calls (Register, Heartbeat, Leave, NextTask) answer UNAVAILABLE
  // (workers retry), and DefineModel / ModelValues go to `intake`, which
  // must outlive the service.
  CoordinatorService(v1::JobSpec pending_job, ModelIntake* intake)
      : core_(nullptr), pending_job_(std::move(pending_job)), intake_(intake) {}
  // The core of the job, once its model is defined; it must outlive the
  // service. Once only.
  void Attach(Coordinator* core) {
    core_.store(core, std::memory_order_release);
  }

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
  grpc::ServerUnaryReactor* DefineModel(
      grpc::CallbackServerContext* context,
      const v1::DefineModelRequest* request,
      v1::DefineModelResponse* response) override;
  grpc::ServerUnaryReactor* ModelValues(
      grpc::CallbackServerContext* context,
      const v1::ModelValuesRequest* request,
      v1::ModelValuesResponse* response) override;

 private:
  // Counts a call's bytes as the coordinator's traffic with the workers
  // (Coordinator::CountBytes); not counted before the core is attached.
  CountCallBytes WorkerBytes() const;
  // The core; UNAVAILABLE while the job's model is not defined.
  absl::StatusOr<Coordinator*> Core() const;
  // The intake; FAILED_PRECONDITION for a job of ferry's own model, or a
  // request for another job.
  absl::StatusOr<ModelIntake*> Intake(const std::string& job_id) const;

  std::atomic<Coordinator*> core_;
  const v1::JobSpec pending_job_;
  ModelIntake* const intake_ = nullptr;
};

}  // namespace ferry

#endif  // FERRY_COORDINATOR_COORDINATOR_SERVICE_H_
