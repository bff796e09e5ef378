#include "coordinator/grpc_shard_control.h"

#include <future>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "common/sharding.h"
#include "common/status_macros.h"
#include "coordinator/job_evaluators.h"
#include "coordinator/shard_tables_reader.h"
#include "model/model_export.h"
#include "model/model_params.h"
#include "proto/job_convert.h"
#include "proto/rpc_util.h"
#include "ps/dlrm_export.h"
#include "ps/job_tables.h"
#include "ps/merged_tables.h"
#include "ps/tables_file.h"

namespace ferry {
namespace {
constexpr absl::Duration kFinalizeTimeout = absl::Seconds(10);
constexpr absl::Duration kCheckpointTimeout = absl::Seconds(30);
constexpr absl::Duration kVersionsTimeout = absl::Seconds(5);
constexpr absl::Duration kRingFetchTimeout = absl::Seconds(30);

absl::Status CallError(const grpc::Status& status, absl::string_view what) {
  return absl::Status(FromGrpcStatus(status).code(),
                      absl::StrCat(what, ": ", status.error_message()));
}
}  // namespace

absl::StatusOr<std::unique_ptr<GrpcShardControl>> GrpcShardControl::Create(
    const v1::JobSpec& job, JobTestSet test_set,
    const std::string& export_dir) {
  std::unique_ptr<GrpcShardControl> control(new GrpcShardControl());
  control->job_ = job;
  for (const std::string& address : job.shard_addresses()) {
    control->stubs_.push_back(
        v1::ParameterServer::NewStub(MakeChannel(address)));
  }
  ASSIGN_OR_RETURN(JobEvaluators evaluators,
                   MakeJobEvaluators(job, std::move(test_set), export_dir));
  const int64_t num_parameters = evaluators.num_parameters();
  control->evaluator_ = std::move(evaluators.dense);
  control->ctr_evaluator_ = std::move(evaluators.ctr);
  if (control->ctr_evaluator_ != nullptr) control->export_dir_ = export_dir;

  GrpcParameterClientOptions options;
  options.job_id = job.job_id();
  options.worker_id = "coordinator";
  options.shard_addresses.assign(job.shard_addresses().begin(),
                                 job.shard_addresses().end());
  ASSIGN_OR_RETURN(ParameterLayout layout, JobDenseLayout(job));
  if (job.mode() == v1::MODE_HYBRID) {
    // The dense layers live on the ring's members, the shards hold rows.
    control->ring_weights_ =
        std::make_unique<RingWeightsSource>(job.job_id(), kRingFetchTimeout);
    layout = ParameterLayout();
  }
  ASSIGN_OR_RETURN(options.chunks, JobChunks(job, layout));
  ASSIGN_OR_RETURN(control->puller_,
                   GrpcParameterClient::Create(std::move(options)));
  absl::MutexLock lock(&control->eval_mu_);
  control->params_.resize(static_cast<size_t>(num_parameters));
  if (job.model_from_worker()) {
    control->worker_model_ = layout;
    control->export_dir_ = export_dir;
    control->params_.resize(static_cast<size_t>(layout.total_elements()));
  }
  return control;
}

absl::Status GrpcShardControl::FirstShardError(
    const std::vector<absl::Status>& statuses) const {
  absl::Status first = absl::OkStatus();
  for (size_t s = 0; s < statuses.size(); ++s) {
    const absl::Status& status = statuses[s];
    // ALREADY_EXISTS (a step applied over another set) decides how the
    // coordinator recovers: it must not hide behind another shard's error.
    const bool decisive =
        absl::IsAlreadyExists(status) && !absl::IsAlreadyExists(first);
    if ((first.ok() || decisive) && !status.ok()) {
      first =
          absl::Status(status.code(),
                       absl::StrCat("shard ", s, " (", job_.shard_addresses(s),
                                    "): ", status.message()));
    }
  }
  return first;
}

absl::Status GrpcShardControl::OnEveryShard(
    const std::function<absl::Status(size_t)>& call) {
  std::vector<std::future<absl::Status>> calls;
  for (size_t s = 0; s < stubs_.size(); ++s) {
    calls.push_back(std::async(std::launch::async, call, s));
  }
  std::vector<absl::Status> statuses;
  for (std::future<absl::Status>& c : calls) statuses.push_back(c.get());
  return FirstShardError(statuses);
}

template <typename Request, typename Response>
absl::Status GrpcShardControl::CallEveryShard(
    ShardMethod<Request, Response> method, const Request& request,
    absl::Duration timeout, absl::string_view what,
    const std::function<absl::Status(size_t, const Response&)>& check) {
  // gRPC's callback API: every call in flight at once without a thread of
  // ours per call (FinalizeStep runs once a step); each call's deadline
  // bounds the wait.
  const size_t n = stubs_.size();
  std::unique_ptr<grpc::ClientContext[]> contexts(new grpc::ClientContext[n]);
  std::vector<Response> responses(n);
  std::vector<absl::Status> statuses(n);
  absl::BlockingCounter done(static_cast<int>(n));
  for (size_t s = 0; s < n; ++s) {
    SetDeadline(contexts[s], timeout);
    finalize_bytes_.AddSent(request.ByteSizeLong());
    (stubs_[s]->async()->*method)(&contexts[s], &request, &responses[s],
                                  [&, s](grpc::Status status) {
                                    if (!status.ok()) {
                                      statuses[s] = CallError(status, what);
                                    }
                                    done.DecrementCount();
                                  });
  }
  done.Wait();
  for (size_t s = 0; s < n; ++s) {
    if (!statuses[s].ok()) continue;
    finalize_bytes_.AddReceived(responses[s].ByteSizeLong());
    if (check) statuses[s] = check(s, responses[s]);
  }
  return FirstShardError(statuses);
}

absl::Status GrpcShardControl::FinalizeStep(
    int64_t step, int64_t generation,
    const std::vector<v1::Contributor>& contributors) {
  v1::FinalizeStepRequest request;
  request.set_job_id(job_.job_id());
  request.set_step(step);
  request.set_generation(generation);
  for (const v1::Contributor& c : contributors) *request.add_contributors() = c;
  return CallEveryShard<v1::FinalizeStepRequest, v1::FinalizeStepResponse>(
      &v1::ParameterServer::Stub::async::FinalizeStep, request,
      kFinalizeTimeout, absl::StrCat("FinalizeStep(", step, ")"));
}

absl::Status GrpcShardControl::Checkpoint(int64_t version,
                                          const std::vector<int64_t>& keep) {
  v1::CheckpointRequest request;
  request.set_job_id(job_.job_id());
  request.set_version(version);
  request.mutable_keep()->Add(keep.begin(), keep.end());
  return CallEveryShard<v1::CheckpointRequest, v1::CheckpointResponse>(
      &v1::ParameterServer::Stub::async::Checkpoint, request,
      kCheckpointTimeout, absl::StrCat("Checkpoint(", version, ")"));
}

absl::StatusOr<std::vector<int64_t>> GrpcShardControl::Versions() {
  std::vector<int64_t> versions(stubs_.size(), -1);
  RETURN_IF_ERROR((CallEveryShard<v1::ShardInfoRequest, v1::ShardInfoResponse>(
      &v1::ParameterServer::Stub::async::ShardInfo, v1::ShardInfoRequest(),
      kVersionsTimeout, "ShardInfo",
      [&](size_t s, const v1::ShardInfoResponse& response) -> absl::Status {
        if (response.job_id() != job_.job_id() ||
            response.shard_id() != static_cast<int32_t>(s)) {
          return absl::FailedPreconditionError(
              absl::StrCat("ShardInfo: it serves shard ", response.shard_id(),
                           " of job '", response.job_id(), "', expected shard ",
                           s, " of job '", job_.job_id(), "'"));
        }
        versions[s] = response.version();
        return absl::OkStatus();
      })));
  return versions;
}

absl::Status GrpcShardControl::RestoreTo(int64_t version, int64_t generation) {
  v1::RestoreRequest request;
  request.set_job_id(job_.job_id());
  request.set_version(version);
  request.set_generation(generation);
  return CallEveryShard<v1::RestoreRequest, v1::RestoreResponse>(
      &v1::ParameterServer::Stub::async::Restore, request, kCheckpointTimeout,
      absl::StrCat("Restore(", version, ", generation ", generation, ")"));
}

absl::Status GrpcShardControl::Fence(int64_t generation) {
  v1::FenceRequest request;
  request.set_job_id(job_.job_id());
  request.set_generation(generation);
  return CallEveryShard<v1::FenceRequest, v1::FenceResponse>(
      &v1::ParameterServer::Stub::async::Fence, request, kFinalizeTimeout,
      absl::StrCat("Fence(", generation, ")"));
}

absl::StatusOr<TestScores> GrpcShardControl::Evaluate(int64_t min_version) {
  return EvaluateAndNotify(min_version, [] {});
}

absl::StatusOr<TestScores> GrpcShardControl::EvaluateAndNotify(
    int64_t min_version, absl::FunctionRef<void()> fetched) {
  absl::MutexLock lock(&eval_mu_);
  if (worker_model_.has_value()) {  // not scored; exported when asked
    if (!export_dir_.empty()) {
      absl::Status pulled = puller_->Pull(min_version, params_.data()).status();
      fetched();
      RETURN_IF_ERROR(pulled);
      RETURN_IF_ERROR(ExportWorkerModel(export_dir_, *worker_model_, params_));
    } else {
      fetched();
    }
    return NoEvaluatorStatus();
  }
  int64_t version = min_version;
  if (ring_weights_ != nullptr) {
    RETURN_IF_ERROR(ring_weights_->Fetch(min_version, params_));
  } else {
    ASSIGN_OR_RETURN(version, puller_->Pull(min_version, params_.data()));
  }
  if (ctr_evaluator_ == nullptr) {
    fetched();
    return evaluator_->Evaluate(params_.data());
  }
  ParameterClientRowSource rows(puller_.get());
  rows.set_min_version(version);
  absl::StatusOr<TestScores> scores =
      ctr_evaluator_->Evaluate(params_.data(), rows);
  if (scores.ok() && !export_dir_.empty()) {
    if (absl::Status exported = ExportDlrmJob(version); !exported.ok()) {
      return exported;
    }
  }
  if (scores.ok()) fetched();
  return scores;
}

absl::Status GrpcShardControl::ExportDlrmJob(int64_t version) {
  FileSystem* fs = PosixFileSystem();
  std::vector<std::string> spools;
  for (size_t s = 0; s < stubs_.size(); ++s) {
    spools.push_back(
        JoinPath(export_dir_, absl::StrCat(".shard-", s, ".tables").c_str()));
  }
  absl::Status written = WriteDlrmExport(version, spools, fs);
  for (const std::string& spool : spools) (void)fs->DeleteFile(spool);
  if (!written.ok()) {
    return absl::Status(written.code(), absl::StrCat("--export ", export_dir_,
                                                     ": ", written.message()));
  }
  return absl::OkStatus();
}

absl::Status GrpcShardControl::WriteDlrmExport(
    int64_t version, const std::vector<std::string>& spools, FileSystem* fs) {
  RETURN_IF_ERROR(fs->CreateDirectories(export_dir_));
  RETURN_IF_ERROR(OnEveryShard([&](size_t s) -> absl::Status {
    return ReadShardTablesToFile(*stubs_[s], job_.job_id(), version, spools[s],
                                 fs, kReadTablesTimeout, &finalize_bytes_)
        .status();
  }));
  // Each file's pages leave memory once the writer has read them.
  std::vector<std::unique_ptr<MappedFile>> files;
  std::vector<BytesDone> release;
  std::vector<std::vector<TableCheckpointView>> parts;
  for (size_t s = 0; s < spools.size(); ++s) {
    ASSIGN_OR_RETURN(files.emplace_back(), fs->MapFile(spools[s]));
    release.push_back([file = files.back().get()](absl::string_view part) {
      file->Release(part);
    });
    absl::StatusOr<std::vector<TableCheckpointView>> views =
        DecodeTableViews(files.back()->bytes(), /*with_counters=*/true);
    if (!views.ok()) {
      return absl::Status(
          views.status().code(),
          absl::StrCat("shard ", s, "'s tables: ", views.status().message()));
    }
    parts.push_back(*std::move(views));
  }
  ASSIGN_OR_RETURN(
      std::unique_ptr<MergedTableSources> tables,
      MergedTableSources::Create(std::move(parts), std::move(release)));
  ASSIGN_OR_RETURN(const DlrmSpec spec, JobDlrmSpec(job_));
  ASSIGN_OR_RETURN(const SparseStoreConfig config, JobTablesConfig(job_));
  return ExportDlrm(export_dir_, spec, params_, tables->pointers(),
                    TablesMetaOf(config, spec.embedding_dim), fs);
}

void GrpcShardControl::set_member_source(
    RingWeightsSource::MemberSource source) {
  if (ring_weights_ != nullptr)
    ring_weights_->set_member_source(std::move(source));
}

TransferBytes GrpcShardControl::bytes() const {
  TransferBytes total = finalize_bytes_.Get();
  const TransferBytes pulls = puller_->bytes();
  total.sent += pulls.sent;
  total.received += pulls.received;
  if (ring_weights_ != nullptr) {
    const TransferBytes fetched = ring_weights_->bytes();
    total.sent += fetched.sent;
    total.received += fetched.received;
  }
  return total;
}

}  // namespace ferry
