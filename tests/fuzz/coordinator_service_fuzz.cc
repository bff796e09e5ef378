// Fuzz target: ferry.v1.Coordinator (coordinator/coordinator_service.h over a
// real Coordinator with fake shards), called over a loopback channel.
//
// Input: byte 0 picks the mode.
//  - byte 0 < 0x80, raw mode: method = byte 0 % 8 (Register, Heartbeat,
//    Leave, GetJob, NextTask, Status, DefineModel, ModelValues: every method
//    of the service); the rest is the raw request message.
//  - byte 0 >= 0x80, structured mode: bytes 1-2 pick the job (PS sync /
//    async / ssp or ring, batch, epochs, epoch size, worker limits, quorum,
//    max steps, checkpoints, shards that fail, a heartbeat timeout short
//    enough to evict); the rest is a program of up to kMaxOps calls:
//    registrations, heartbeats, leaves, job and status queries, and
//    NextTask calls whose reports follow the worker's last lease with
//    fuzzed deviations (step, fence, samples, failure, digest), so the
//    fuzzer drives steps, epochs, aborts and recovery.
//
// One server (loopback TCP) serves the whole run (grpc_fuzz_util.h); every
// input gets a fresh coordinator, fake shards and service behind it, shuts
// the coordinator down (answering parked long polls) and waits for the
// server side of all its calls to end before they go. Logging is at
// "error" (joins and leaves are logged at "info").
//
// The long poll is 2 ms, but the coordinator answers a parked NextTask (no
// work for the worker yet) WAIT only on its reaper's next tick (every
// 100 ms), so the harness gives NextTask a 20 ms deadline: a parked call
// usually ends DEADLINE_EXCEEDED for the harness, like a worker whose lease
// request timed out, and stays parked in the coordinator until work is
// assigned to it (a lease the worker never sees), the reaper expires it or
// the input ends. Whether the tick falls inside those 20 ms depends on
// timing, so such inputs do not always take the same path on replay.
//
// Oracles: Status and GetJob always succeed and parse; a TRAIN lease's
// tasks are non-empty ranges inside the epoch.
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/log.h"
#include "coordinator/coordinator.h"
#include "coordinator/coordinator_service.h"
#include "ferry/v1/coordinator.grpc.pb.h"
#include "ferry/v1/coordinator.pb.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/grpc_fuzz_util.h"
#include "tests/testing/fake_shard_control.h"

namespace ferry::fuzz {
namespace {

constexpr char kJob[] = "job";
constexpr int kMaxOps = 32;
// A NextTask without work is parked until the coordinator's reaper answers
// it WAIT on its next tick (every 100 ms); the harness does not wait that
// long (see the file comment).
constexpr absl::Duration kNextTaskDeadline = absl::Milliseconds(20);
const char* const kMethods[] = {"Register",    "Heartbeat",  "Leave",
                                "GetJob",      "NextTask",   "Status",
                                "DefineModel", "ModelValues"};
constexpr int kNumMethods = static_cast<int>(std::size(kMethods));

std::string Method(int index) {
  return std::string("/ferry.v1.Coordinator/") + kMethods[index % kNumMethods];
}

// ferry.v1.Coordinator for the whole process: forwards every call to the
// running input's CoordinatorService, or refuses a call of an earlier input.
class CoordinatorForwarder final : public v1::Coordinator::CallbackService {
 public:
  explicit CoordinatorForwarder(CallSessions* sessions) : sessions_(sessions) {}

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* context,
                                     const v1::RegisterRequest* request,
                                     v1::RegisterResponse* response) override {
    return ForwardUnary(sessions_, &CoordinatorService::Register, context,
                        request, response);
  }
  grpc::ServerUnaryReactor* Heartbeat(
      grpc::CallbackServerContext* context, const v1::HeartbeatRequest* request,
      v1::HeartbeatResponse* response) override {
    return ForwardUnary(sessions_, &CoordinatorService::Heartbeat, context,
                        request, response);
  }
  grpc::ServerUnaryReactor* Leave(grpc::CallbackServerContext* context,
                                  const v1::LeaveRequest* request,
                                  v1::LeaveResponse* response) override {
    return ForwardUnary(sessions_, &CoordinatorService::Leave, context, request,
                        response);
  }
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                   const v1::GetJobRequest* request,
                                   v1::JobSpec* response) override {
    return ForwardUnary(sessions_, &CoordinatorService::GetJob, context,
                        request, response);
  }
  grpc::ServerUnaryReactor* NextTask(grpc::CallbackServerContext* context,
                                     const v1::NextTaskRequest* request,
                                     v1::NextTaskResponse* response) override {
    return ForwardUnary(sessions_, &CoordinatorService::NextTask, context,
                        request, response);
  }
  grpc::ServerUnaryReactor* Status(grpc::CallbackServerContext* context,
                                   const v1::StatusRequest* request,
                                   v1::StatusResponse* response) override {
    return ForwardUnary(sessions_, &CoordinatorService::Status, context,
                        request, response);
  }
  grpc::ServerUnaryReactor* DefineModel(
      grpc::CallbackServerContext* context,
      const v1::DefineModelRequest* request,
      v1::DefineModelResponse* response) override {
    return ForwardUnary(sessions_, &CoordinatorService::DefineModel, context,
                        request, response);
  }
  grpc::ServerUnaryReactor* ModelValues(
      grpc::CallbackServerContext* context,
      const v1::ModelValuesRequest* request,
      v1::ModelValuesResponse* response) override {
    return ForwardUnary(sessions_, &CoordinatorService::ModelValues, context,
                        request, response);
  }

 private:
  CallSessions* const sessions_;
};

// The server of the whole process; never destroyed.
struct SharedServer {
  SharedServer() {
    ConfigureLogging("coordinator", "error", "text").IgnoreError();
  }
  CallSessions sessions;
  CoordinatorForwarder forwarder{&sessions};
  LoopbackServer server{&forwarder, &sessions};
};

SharedServer& Shared() {
  static SharedServer* const shared = new SharedServer;
  return *shared;
}

// One input's coordinator behind the shared server.
struct CoordinatorUnderTest {
  std::unique_ptr<FakeShardControl> shards;
  std::unique_ptr<Coordinator> coordinator;
  std::unique_ptr<CoordinatorService> service;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<CallSessions::Scope> session;
  int64_t epoch_size = 0;

  // Answers long polls still parked, so that the session's calls end; then
  // the members go in reverse order: the session first (waiting for those
  // calls), then the core.
  ~CoordinatorUnderTest() { coordinator->Shutdown(); }
};

CoordinatorOptions Options(uint8_t a, uint8_t b) {
  CoordinatorOptions options;
  v1::JobSpec& job = options.job;
  job.set_job_id(kJob);
  job.set_model("4-3");
  job.set_dataset("synthetic:16");
  job.set_mode(a & 0x80 ? v1::MODE_RING : v1::MODE_PS);
  job.set_consistency(static_cast<v1::Consistency>((a >> 5) % 3));
  job.set_staleness(a & 0x10 ? 1 : 3);
  job.set_global_batch(1 + (a & 0x07));
  job.set_epochs(1 + ((a >> 3) & 0x01));
  job.set_sync_quorum(b & 0x01 ? 1 : 0);
  job.set_max_steps((b >> 1) % 4);
  job.set_digest_every(b & 0x08 ? 1 : 0);
  job.set_max_chunk_elements(2);
  *job.add_tensors() = v1::TensorSpec();
  job.mutable_tensors(0)->add_shape(3);
  options.epoch_size = 1 + (b >> 4) % 12;
  options.heartbeat_interval = absl::Milliseconds(100);
  options.heartbeat_timeout =
      (a & 0x08) && (b & 0x04) ? absl::Milliseconds(1) : absl::Seconds(30);
  options.long_poll = absl::Milliseconds(2);
  options.min_workers = 1 + ((b >> 2) & 0x01);
  options.max_workers = (b & 0x02) ? 3 : 0;
  options.checkpoint_every = (b >> 6) & 0x01;
  return options;
}

std::unique_ptr<CoordinatorUnderTest> Start(uint8_t a, uint8_t b) {
  SharedServer& shared = Shared();  // first: it quiets the logs
  auto c = std::make_unique<CoordinatorUnderTest>();
  // Shards that apply every finalize, or fail every third one with
  // UNAVAILABLE as a restarting shard would.
  c->shards = std::make_unique<FakeShardControl>(std::vector<int64_t>{0, 0});
  {
    absl::MutexLock lock(&c->shards->mu);
    c->shards->fail_every = b & 0x80 ? 3 : 0;
  }
  CoordinatorOptions options = Options(a, b);
  auto coordinator = Coordinator::Create(options, c->shards.get());
  if (!coordinator.ok()) {  // e.g. ring with a quorum: the default job
    options = Options(0, 0);
    coordinator = Coordinator::Create(options, c->shards.get());
  }
  c->epoch_size = options.epoch_size;
  FuzzCheck(coordinator.ok(), "Coordinator::Create failed on a fixed job");
  c->coordinator = *std::move(coordinator);
  c->service = std::make_unique<CoordinatorService>(c->coordinator.get());
  c->channel = shared.server.channel();
  c->session =
      std::make_unique<CallSessions::Scope>(&shared.sessions, c->service.get());
  return c;
}

// What the harness knows of one worker it registered.
struct Worker {
  std::string id;
  int64_t generation = 0;
  int64_t fence = 0;
  bool has_lease = false;
  v1::NextTaskResponse lease;
};

RawCallResult Call(CoordinatorUnderTest& c, int method,
                   const google::protobuf::Message& request,
                   absl::Duration deadline = kCallDeadline) {
  return RawCall(c.channel, Method(method), {request.SerializeAsString()},
                 deadline);
}

void RegisterOp(CoordinatorUnderTest& c, FuzzInput& in,
                std::vector<Worker>& workers) {
  v1::RegisterRequest request;
  const uint8_t how = in.Byte();
  if (how % 4 == 0) request.set_job_id(in.Frame());
  if (how % 4 == 1) request.set_job_id(kJob);
  request.set_peer_address(how & 0x10 ? in.Frame() : "127.0.0.1:1");
  request.set_hostname("host");
  request.set_pid(in.Int<int16_t>());
  const RawCallResult result = Call(c, 0, request);
  v1::RegisterResponse response;
  if (result.status.ok() && result.responses.size() == 1 &&
      response.ParseFromString(result.responses[0]) && workers.size() < 16) {
    Worker w;
    w.id = response.worker_id();
    w.generation = response.generation();
    workers.push_back(std::move(w));
  }
}

// A worker the harness registered, or (rarely) a fuzzed id.
std::string PickWorker(FuzzInput& in, std::vector<Worker>& workers,
                       Worker** worker) {
  const uint8_t pick = in.Byte();
  if (workers.empty() || pick == 0xff) {
    *worker = nullptr;
    return pick == 0xff ? in.Frame() : std::string("w-unknown");
  }
  *worker = &workers[pick % workers.size()];
  return (*worker)->id;
}

void HeartbeatOp(CoordinatorUnderTest& c, FuzzInput& in,
                 std::vector<Worker>& workers) {
  Worker* w = nullptr;
  v1::HeartbeatRequest request;
  request.set_worker_id(PickWorker(in, workers, &w));
  request.set_generation(w != nullptr && in.Byte() != 0xff ? w->generation
                                                           : in.Range(-1, 8));
  const RawCallResult result = Call(c, 1, request);
  v1::HeartbeatResponse response;
  if (w != nullptr && result.status.ok() && result.responses.size() == 1 &&
      response.ParseFromString(result.responses[0])) {
    w->generation = response.generation();
    w->fence = response.fence();
  }
}

void LeaveOp(CoordinatorUnderTest& c, FuzzInput& in,
             std::vector<Worker>& workers) {
  Worker* w = nullptr;
  v1::LeaveRequest request;
  request.set_worker_id(PickWorker(in, workers, &w));
  Call(c, 2, request);
}

// The report of `w`'s lease, as a worker would send it, with deviations.
v1::StepReport Report(FuzzInput& in, const Worker& w) {
  v1::StepReport report;
  const v1::NextTaskResponse& lease = w.lease;
  int64_t samples = 0;
  for (const v1::DataTask& t : lease.tasks()) samples += t.end() - t.begin();
  report.set_step(lease.step());
  report.set_fence(lease.fence());
  if (lease.tasks_size() > 0) report.set_task_id(lease.tasks(0).task_id());
  report.set_num_samples(samples);
  report.set_loss_sum(0.5 * static_cast<double>(samples));
  report.set_correct(samples / 2);
  const uint8_t deviate = in.Byte();
  if (deviate == 0xf0) report.set_step(in.Int<int64_t>());
  if (deviate == 0xf1) report.set_fence(in.Range(-1, 8));
  if (deviate == 0xf2) report.set_num_samples(in.Int<int64_t>());
  if (deviate == 0xf3) report.set_failed(true);
  if (deviate == 0xf4) report.set_loss_sum(in.Int<int64_t>() * 1e300);
  if (deviate == 0xf5) report.set_task_id(in.Int<int64_t>());
  if (deviate == 0xf6) report.set_correct(in.Int<int64_t>());
  if (deviate == 0xf7) report.set_compute_seconds(-1.0);
  if (lease.ring_size() > 0 || deviate == 0xf8) {
    report.set_weights_digest(deviate == 0xf8 ? in.Int<uint64_t>() : 42);
  }
  (*report.mutable_bytes()->mutable_sent())["ps"] = in.Range(0, 100);
  return report;
}

void CheckLease(const v1::NextTaskResponse& r, int64_t epoch_size) {
  if (r.action() != v1::NextTaskResponse::TRAIN) return;
  for (const v1::DataTask& t : r.tasks()) {
    FuzzCheck(t.begin() >= 0 && t.begin() < t.end() && t.end() <= epoch_size,
              "NextTask: a task outside the epoch");
  }
}

void NextTaskOp(CoordinatorUnderTest& c, FuzzInput& in,
                std::vector<Worker>& workers) {
  Worker* w = nullptr;
  v1::NextTaskRequest request;
  request.set_worker_id(PickWorker(in, workers, &w));
  const uint8_t how = in.Byte();
  request.set_generation(w != nullptr && !(how & 0x80) ? w->generation
                                                       : in.Range(-1, 8));
  request.set_fence(w != nullptr && !(how & 0x40) ? w->fence : in.Range(-1, 8));
  if (w != nullptr && w->has_lease && !(how & 0x20)) {
    *request.mutable_done() = Report(in, *w);
  } else if (how & 0x10) {
    request.mutable_done()->set_step(in.Range(-1, 8));
    request.mutable_done()->set_num_samples(in.Range(-1, 8));
  }
  if (how & 0x08) request.set_after_step(in.Range(-1, 8));
  if (how & 0x04) request.set_report_only(true);
  const RawCallResult result = Call(c, 4, request, kNextTaskDeadline);
  v1::NextTaskResponse response;
  if (!result.status.ok() || result.responses.size() != 1 ||
      !response.ParseFromString(result.responses[0])) {
    return;
  }
  CheckLease(response, c.epoch_size);
  if (w != nullptr) {
    w->generation = response.generation();
    if (response.fence() > w->fence) w->fence = response.fence();
    w->has_lease = response.action() == v1::NextTaskResponse::TRAIN;
    if (w->has_lease) w->lease = response;
  }
}

void QueryOp(CoordinatorUnderTest& c, int method) {
  const RawCallResult result =
      RawCall(c.channel, Method(method), {std::string()});
  if (result.status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return;  // a loaded machine
  }
  FuzzCheck(result.status.ok() && result.responses.size() == 1,
            "GetJob / Status failed");
  if (method == 3) {
    v1::JobSpec job;
    FuzzCheck(job.ParseFromString(result.responses[0]), "GetJob: no parse");
  } else {
    v1::StatusResponse status;
    FuzzCheck(status.ParseFromString(result.responses[0]), "Status: no parse");
  }
}

void RunStructured(CoordinatorUnderTest& c, FuzzInput& in) {
  std::vector<Worker> workers;
  for (int op = 0; op < kMaxOps && !in.empty(); ++op) {
    switch (in.Byte() % 10) {
      case 0:
      case 1:
        RegisterOp(c, in, workers);
        break;
      case 2:
        HeartbeatOp(c, in, workers);
        break;
      case 3:
        LeaveOp(c, in, workers);
        break;
      case 4:
        QueryOp(c, 3);
        break;
      case 5:
        QueryOp(c, 5);
        break;
      case 9: {
        const uint8_t method = in.Byte();
        RawCall(c.channel, Method(method), {in.Frame()});
        break;
      }
      default:
        NextTaskOp(c, in, workers);
    }
  }
}

}  // namespace
}  // namespace ferry::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ferry::fuzz;
  FuzzInput in(data, size);
  const uint8_t selector = in.Byte();
  if (selector < 0x80) {
    auto c = Start(0, 0);
    RawCall(c->channel, Method(selector), {in.Rest()});
  } else {
    const uint8_t a = in.Byte();
    const uint8_t b = in.Byte();
    auto c = Start(a, b);
    RunStructured(*c, in);
  }
  return 0;
}
