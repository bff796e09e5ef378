// ferry._ferry: the compiled half of the `ferry` Python package. It binds
// the hosted worker (worker/hosted_worker.h), which runs ferry's own
// coordinator client, PS and ring exchanges in C++, and the job's epoch
// permutation (data/sampler.h). python/ferry/torch builds the PyTorch API
// on it. A process that hosts a PS shard (FERRY_HOST_SHARD) serves it
// after its training, until request_stop (SIGTERM), then stop_shard.
//
// Every call that waits (joining, the next lease, a step's end, leaving)
// releases the GIL. Errors are raised as Python exceptions carrying the
// status's message: ValueError (INVALID_ARGUMENT, OUT_OF_RANGE),
// TimeoutError (DEADLINE_EXCEEDED), ConnectionError (UNAVAILABLE),
// PermissionError (PERMISSION_DENIED, UNAUTHENTICATED), RuntimeError
// (others).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/cli_flags.h"
#include "common/mutex_checks.h"
#include "common/ops_flags.h"
#include "common/pod_name.h"
#include "coordinator/coordinator_client.h"
#include "data/sampler.h"
#include "google/protobuf/util/json_util.h"
#include "proto/process_ops.h"
#include "worker/grpc_worker_deps.h"
#include "worker/hosted_worker.h"

namespace py = pybind11;

namespace ferry {
namespace {

[[noreturn]] void Raise(const absl::Status& status) {
  const std::string message(status.message());
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      throw py::value_error(message);
    case absl::StatusCode::kDeadlineExceeded:
      PyErr_SetString(PyExc_TimeoutError, message.c_str());
      throw py::error_already_set();
    case absl::StatusCode::kUnavailable:
      PyErr_SetString(PyExc_ConnectionError, message.c_str());
      throw py::error_already_set();
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
      PyErr_SetString(PyExc_PermissionError, message.c_str());
      throw py::error_already_set();
    default:
      throw std::runtime_error(
          absl::StrCat(absl::StatusCodeToString(status.code()), ": ", message));
  }
}

void Check(const absl::Status& status) {
  if (!status.ok()) Raise(status);
}

template <typename T>
T Value(absl::StatusOr<T> result) {
  if (!result.ok()) Raise(result.status());
  return *std::move(result);
}

// One of a hosted worker's flat fp32 buffers as a Python buffer
// (torch.frombuffer shares it); it keeps the buffers alive.
struct FlatBuffer {
  std::shared_ptr<HostedBuffers> owner;
  float* data = nullptr;
  int64_t size = 0;
};

std::string JobJson(const v1::JobSpec& job) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  if (!google::protobuf::util::MessageToJsonString(job, &json, options).ok()) {
    throw std::runtime_error("INTERNAL: the job does not convert to JSON");
  }
  return json;
}

// Sets the flags `app` binds from their FERRY_* variables (ferry-worker's
// flags, common/cli_flags.h BindEnvironment). ValueError for a bad one.
void ParseEnvironment(CLI::App& app) {
  BindEnvironment(app);
  try {
    app.parse(std::vector<std::string>{});
  } catch (const CLI::ParseError& e) {
    throw py::value_error(absl::StrCat("the FERRY_* environment: ", e.what()));
  }
}

// The process's operations, as ferry-worker's: logging, RPC security (TLS,
// bearer token), the grpc.health.v1 port and the Prometheus port, from the
// same FERRY_* variables as ferry-worker's flags (FERRY_HEALTH_PORT,
// FERRY_METRICS_PORT, FERRY_OPS_PORT_FILE, FERRY_LOG_LEVEL,
// FERRY_LOG_FORMAT, FERRY_TLS_CERT, FERRY_TLS_KEY, FERRY_TLS_CA,
// FERRY_TLS_SERVER_NAME, FERRY_REQUIRE_CLIENT_CERT,
// FERRY_AUTH_TOKEN_FILE). Started once per process, by the first call;
// readiness then follows the coordinator's reachability.
class ProcessOpsOnce {
 public:
  static ProcessOpsOnce& Get() {
    static auto* once = new ProcessOpsOnce();
    return *once;
  }

  // Starts them (once) and watches `coordinator`. ValueError for a bad
  // variable, RuntimeError for a port that cannot be bound.
  ProcessOps& Start(const std::string& coordinator) {
    absl::MutexLock lock(&mu_);
    if (ops_ == nullptr) {
      OpsFlags flags;
      CLI::App app;
      AddOpsFlags(app, flags);
      ParseEnvironment(app);
      ops_ = Value(ProcessOps::Start(flags, "worker", MetricRole::kWorker));
      ops_->health().SetStarted();
    }
    if (!coordinator.empty() && watched_.empty()) {
      watched_ = coordinator;
      ops_->WatchPeer("coordinator", coordinator);
    }
    return *ops_;
  }

  // Readiness and liveness end (the script leaves the job).
  void Drain() {
    absl::MutexLock lock(&mu_);
    if (ops_ != nullptr) ops_->health().SetDraining();
  }

 private:
  absl::Mutex mu_;
  std::unique_ptr<ProcessOps> ops_ ABSL_GUARDED_BY(mu_);
  std::string watched_ ABSL_GUARDED_BY(mu_);
};

// The PS shard this process hosts, from the environment as ferry-worker's
// flags (FERRY_HOST_SHARD or FERRY_HOST_SHARD_FROM_HOSTNAME,
// FERRY_SHARD_LISTEN, FERRY_SHARD_PARTITIONS, FERRY_SHARD_CHECKPOINT_DIR;
// worker/hosted_shard.h). ValueError for a bad variable.
HostedShardFlags HostedShardFromEnvironment() {
  HostedShardFlags flags;
  CLI::App app;
  AddHostedShardFlags(app, flags);
  ParseEnvironment(app);
  Check(ResolveHostedShardFlags(flags, PodName()));
  return flags;
}

// The worker as Python sees it; Stop() on deletion.
class PyWorker {
 public:
  PyWorker(const std::string& coordinator, double rpc_timeout_s,
           const std::string& peer_listen, const std::string& peer_advertise) {
    HostedWorkerOptions options;
    options.shard = HostedShardFromEnvironment();
    {
      CLI::App app;  // FERRY_RING_SHARED_MEMORY
      AddRingSharedMemoryFlag(app, options.worker);
      ParseEnvironment(app);
    }
    options.worker.coordinator_address = coordinator;
    options.worker.rpc_timeout = absl::Seconds(rpc_timeout_s);
    if (!peer_listen.empty()) options.worker.peer_listen_address = peer_listen;
    options.worker.peer_advertise_address = peer_advertise;
    options.worker.health = &ProcessOpsOnce::Get().Start(coordinator).health();
    absl::StatusOr<std::unique_ptr<HostedWorker>> started;
    {
      py::gil_scoped_release release;  // a hosted shard loads its state
      started = HostedWorker::Start(std::move(options));
    }
    worker_ = Value(std::move(started));
  }

  // The job as JSON (JobSpec's field names) once joined.
  std::string Join(double timeout_s) {
    absl::StatusOr<HostedJob> joined;
    {
      py::gil_scoped_release release;
      joined = worker_->Joined(absl::Seconds(timeout_s));
    }
    job_ = Value(std::move(joined));
    return JobJson(job_->job);
  }

  // (name, shape, offset, numel) of every tensor of the job's flat buffer.
  std::vector<py::tuple> Tensors() const {
    std::vector<py::tuple> out;
    for (const TensorSlot& t : Job().buffers->layout.tensors()) {
      out.push_back(py::make_tuple(t.name, t.shape, t.offset, t.numel));
    }
    return out;
  }

  FlatBuffer Params() const {
    const HostedJob& job = Job();
    return {job.buffers, job.buffers->params.data(),
            static_cast<int64_t>(job.buffers->params.size())};
  }
  FlatBuffer Grads() const {
    const HostedJob& job = Job();
    return {job.buffers, job.buffers->grads.data(),
            static_cast<int64_t>(job.buffers->grads.size())};
  }

  // None when the job is over, False when no lease came within `wait_s`
  // (ask again), else (step, epoch, sample indices as bytes of
  // little-endian int64, evaluation): `evaluation` is None for a training
  // lease; for an evaluation (no samples, no step opens) it is (version,
  // epoch, final): evaluate the weights held now, then report_evaluation.
  py::object NextLease(int64_t train_samples, double wait_s) {
    absl::StatusOr<std::optional<HostLease>> lease;
    {
      py::gil_scoped_release release;
      lease =
          worker_->channel().NextLease(train_samples, absl::Seconds(wait_s));
    }
    if (absl::IsDeadlineExceeded(lease.status())) return py::bool_(false);
    std::optional<HostLease> next = Value(std::move(lease));
    if (!next.has_value()) return py::none();
    const std::string bytes(reinterpret_cast<const char*>(next->samples.data()),
                            next->samples.size() * sizeof(int64_t));
    py::object evaluation = py::none();
    if (next->evaluate.has_value()) {
      evaluation = py::make_tuple(next->evaluate->version,
                                  next->evaluate->epoch, next->evaluate->final);
    }
    return py::make_tuple(next->step, next->epoch, py::bytes(bytes),
                          evaluation);
  }

  void SetEvaluates(bool evaluates) {
    worker_->channel().SetEvaluates(evaluates);
  }

  void ReportEvaluation(int64_t version, int64_t epoch, bool final,
                        double accuracy, double loss, double duration_s) {
    Check(worker_->channel().ReportEvaluation(HostEvaluation{
        .task = {.version = version, .epoch = epoch, .final = final},
        .accuracy = accuracy,
        .loss = loss,
        .duration_seconds = duration_s}));
  }

  void Ready(int64_t offset, int64_t length, bool absent) {
    Check(worker_->channel().Ready(offset, length, absent));
  }

  bool Finish(double loss_sum, int64_t correct) {
    absl::StatusOr<bool> applied;
    {
      py::gil_scoped_release release;
      applied = worker_->channel().Finish(loss_sum, correct);
    }
    return Value(std::move(applied));
  }

  void RequestStop() { worker_->RequestStop(); }

  bool HostsShard() const { return worker_->hosts_shard(); }

  // Whether request_stop came within `wait_s`; short waits let the
  // interpreter run its signal handlers (SIGTERM's calls request_stop)
  // between them.
  bool AwaitStopRequest(double wait_s) {
    py::gil_scoped_release release;
    return worker_->AwaitStopRequest(absl::Seconds(wait_s));
  }

  void StopShard() {
    absl::Status stopped;
    {
      py::gil_scoped_release release;
      stopped = worker_->StopShard();
    }
    Check(stopped);
  }

  // Leaves the job; the worker's summary as JSON.
  std::string Stop() {
    absl::StatusOr<WorkerSummary> summary;
    {
      py::gil_scoped_release release;
      summary = worker_->Stop();
    }
    return Value(std::move(summary)).ToJson().dump();
  }

  ~PyWorker() {
    py::gil_scoped_release release;
    (void)worker_->Stop();
    (void)worker_->StopShard();
  }

 private:
  const HostedJob& Job() const {
    if (!job_.has_value()) {
      throw std::runtime_error(
          "FAILED_PRECONDITION: the worker has not joined");
    }
    return *job_;
  }

  std::unique_ptr<HostedWorker> worker_;
  std::optional<HostedJob> job_;
};

}  // namespace
}  // namespace ferry

PYBIND11_MODULE(_ferry, m) {
  using ferry::FlatBuffer;
  using ferry::PyWorker;
  m.doc() = "ferry's hosted worker (C++), for ferry.torch";
  // As in ferry's binaries: absl's deadlock graph is off unless the
  // environment asks for it (common/mutex_checks.h). Importing happens
  // before any thread of ferry's starts.
  ferry::ConfigureMutexDeadlockChecks();

  m.def(
      "epoch_permutation",
      [](int64_t n, uint64_t seed, int64_t epoch) {
        if (n < 0) throw py::value_error("n must be >= 0");
        if (epoch < 0) throw py::value_error("epoch must be >= 0");
        const std::vector<int64_t> order =
            ferry::EpochPermutation(n, seed, epoch, /*shuffle=*/true);
        return py::bytes(reinterpret_cast<const char*>(order.data()),
                         order.size() * sizeof(int64_t));
      },
      py::arg("n"), py::arg("seed"), py::arg("epoch"),
      "The order (bytes of little-endian int64) in which epoch `epoch` of "
      "a job with seed `seed` visits samples [0, n).");

  m.def(
      "configure_process",
      [](const std::string& coordinator) {
        ferry::ProcessOps& ops =
            ferry::ProcessOpsOnce::Get().Start(coordinator);
        py::dict ports;
        ports["health"] = ops.health_port();
        ports["metrics"] = ops.metrics_port();
        return ports;
      },
      py::arg("coordinator") = "",
      "Starts this process's operations once, from the FERRY_* environment "
      "as ferry-worker's flags: logging, RPC security (FERRY_TLS_*, "
      "FERRY_AUTH_TOKEN_FILE), the grpc.health.v1 port (FERRY_HEALTH_PORT) "
      "and the Prometheus port (FERRY_METRICS_PORT); readiness follows "
      "`coordinator`. Returns the ports bound {'health', 'metrics'} (0: "
      "none).");
  m.def(
      "drain", [] { ferry::ProcessOpsOnce::Get().Drain(); },
      "Ends this process's readiness and liveness (it leaves its job).");

  m.def(
      "get_job",
      [](const std::string& coordinator, double timeout_s) {
        absl::StatusOr<ferry::v1::JobSpec> job;
        {
          py::gil_scoped_release release;
          ferry::CoordinatorClientOptions options;
          options.rpc_timeout = absl::Seconds(timeout_s);
          options.retry.budget = absl::Seconds(timeout_s);
          job =
              ferry::CoordinatorClient::Connect(coordinator, options)->GetJob();
        }
        return ferry::JobJson(ferry::Value(std::move(job)));
      },
      py::arg("coordinator"), py::arg("timeout_s"),
      "The job of the coordinator at `coordinator` (HOST:PORT) as JSON "
      "(JobSpec's field names), without joining it.");

  m.def(
      "define_model",
      [](const std::string& coordinator, const std::string& job_id,
         const std::vector<std::tuple<std::string, std::vector<int64_t>, bool>>&
             tensors,
         py::buffer values, double timeout_s,
         const std::string& optimizer_json) {
        const py::buffer_info info = values.request();
        if (info.itemsize != sizeof(float) || info.format != "f" ||
            info.ndim != 1 || info.strides[0] != sizeof(float)) {
          throw py::value_error(
              "values must be a contiguous 1-D float32 buffer");
        }
        std::vector<ferry::v1::TensorSpec> specs;
        for (const auto& [name, shape, buffer] : tensors) {
          ferry::v1::TensorSpec& t = specs.emplace_back();
          t.set_name(name);
          for (int64_t d : shape) t.add_shape(d);
          t.set_buffer(buffer);
        }
        std::optional<ferry::v1::OptimizerSpec> optimizer;
        if (!optimizer_json.empty() &&
            !google::protobuf::util::JsonStringToMessage(optimizer_json,
                                                         &optimizer.emplace())
                 .ok()) {
          throw py::value_error(
              "optimizer_json is not an OptimizerSpec in JSON");
        }
        absl::StatusOr<bool> defined;
        {
          py::gil_scoped_release release;
          ferry::CoordinatorClientOptions options;
          options.rpc_timeout = absl::Seconds(timeout_s);
          options.retry.budget = absl::Seconds(timeout_s);
          defined = ferry::CoordinatorClient::Connect(coordinator, options)
                        ->DefineModel(job_id, specs,
                                      absl::MakeConstSpan(
                                          static_cast<const float*>(info.ptr),
                                          static_cast<size_t>(info.shape[0])),
                                      optimizer ? &*optimizer : nullptr);
        }
        return ferry::Value(std::move(defined));
      },
      py::arg("coordinator"), py::arg("job_id"), py::arg("tensors"),
      py::arg("values"), py::arg("timeout_s"), py::arg("optimizer_json") = "",
      "Defines the model of a job started with --model external: `tensors` "
      "((name, shape, is_buffer), flat order, buffers last) and `values` "
      "(their float32 "
      "values back to back), with the job's optimizer (`optimizer_json`, an "
      "OptimizerSpec in JSON; empty: the job's own). True when this became "
      "the job's model; False "
      "when another worker's is (or is being) defined: compare with "
      "get_job once it has tensors.");

  py::class_<FlatBuffer>(m, "FlatBuffer", py::buffer_protocol())
      .def_buffer([](FlatBuffer& b) {
        return py::buffer_info(b.data, sizeof(float),
                               py::format_descriptor<float>::format(), 1,
                               {b.size}, {sizeof(float)});
      })
      .def("__len__", [](const FlatBuffer& b) { return b.size; });

  py::class_<PyWorker>(m, "Worker")
      .def(py::init<const std::string&, double, const std::string&,
                    const std::string&>(),
           py::arg("coordinator"), py::arg("rpc_timeout_s") = 30.0,
           py::arg("peer_listen") = "", py::arg("peer_advertise") = "")
      .def("join", &PyWorker::Join, py::arg("timeout_s"))
      .def("tensors", &PyWorker::Tensors)
      .def("params", &PyWorker::Params)
      .def("grads", &PyWorker::Grads)
      .def("next_lease", &PyWorker::NextLease, py::arg("train_samples"),
           py::arg("wait_s"))
      .def("ready", &PyWorker::Ready, py::arg("offset"), py::arg("length"),
           py::arg("absent") = false)
      .def("finish", &PyWorker::Finish, py::arg("loss_sum"),
           py::arg("correct") = 0)
      .def("set_evaluates", &PyWorker::SetEvaluates, py::arg("evaluates"))
      .def("report_evaluation", &PyWorker::ReportEvaluation, py::arg("version"),
           py::arg("epoch"), py::arg("final"), py::arg("accuracy"),
           py::arg("loss"), py::arg("duration_s"))
      .def("request_stop", &PyWorker::RequestStop)
      .def("stop", &PyWorker::Stop)
      .def("hosts_shard", &PyWorker::HostsShard)
      .def("await_stop_request", &PyWorker::AwaitStopRequest, py::arg("wait_s"))
      .def("stop_shard", &PyWorker::StopShard);
}
