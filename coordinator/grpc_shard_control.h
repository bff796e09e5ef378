// ShardControl over gRPC: FinalizeStep, Fence, Checkpoint, Restore and
// ShardInfo (Versions) to every shard in parallel, each call with a deadline
// (finalize and fence 10 s, checkpoint and restore 30 s, versions 5 s), OK only
// when every shard answered OK; the first error names the shard and its
// address. Evaluation pulls the shards' weights like a worker does and runs the
// test set: TestSetEvaluator for a dense model; for a DLRM (IsDlrmJob)
// CtrTestEvaluator, with the embedding rows pulled from the shards batch by
// batch at a version >= the dense weights'. Hybrid mode (the shards hold
// only the tables): the dense weights come from a ring member
// (RingWeightsSource), the rows from the shards at that step's version.
//
// Thread safety: every method may run concurrently with the others.
#ifndef FERRY_COORDINATOR_GRPC_SHARD_CONTROL_H_
#define FERRY_COORDINATOR_GRPC_SHARD_CONTROL_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/file_system.h"
#include "coordinator/coordinator.h"
#include "coordinator/ctr_test_evaluator.h"
#include "coordinator/ring_weights_source.h"
#include "coordinator/test_set_evaluator.h"
#include "data/ctr_dataset.h"
#include "data/dataset.h"
#include "ferry/v1/ps.grpc.pb.h"
#include "ps/ps_client.h"

namespace ferry {

class GrpcShardControl final : public ShardControl {
 public:
  // `test_set` is used for evaluation: a Dataset for a dense model, a
  // CtrDataset for a DLRM. `export_dir` (non-empty) receives every
  // evaluated model: a dense one's (TestSetEvaluator), or a DLRM's dense
  // weights and every shard's tables (ReadTables, merged: ps/
  // dlrm_export.h) read before training resumes. INVALID_ARGUMENT for a bad
  // job or a test set of the other kind.
  static absl::StatusOr<std::unique_ptr<GrpcShardControl>> Create(
      const v1::JobSpec& job, JobTestSet test_set,
      const std::string& export_dir = "");

  absl::Status FinalizeStep(
      int64_t step, int64_t generation,
      const std::vector<v1::Contributor>& contributors) override;
  absl::StatusOr<TestScores> Evaluate(int64_t min_version) override;
  // A DLRM's rows are part of its weights: they are in hand, and `fetched`
  // is called, only once the whole test split has been scored, so that
  // training (held at an epoch end) does not move them during the pass.
  absl::StatusOr<TestScores> EvaluateAndNotify(
      int64_t min_version, absl::FunctionRef<void()> fetched) override;
  absl::Status Checkpoint(int64_t version,
                          const std::vector<int64_t>& keep) override;
  // FAILED_PRECONDITION when a shard serves another job.
  absl::StatusOr<std::vector<int64_t>> Versions() override;
  absl::Status RestoreTo(int64_t version, int64_t generation) override;
  absl::Status Fence(int64_t generation) override;
  // Hybrid jobs: where the ring's members are (set right after the
  // coordinator is created). A no-op for other modes.
  void set_member_source(RingWeightsSource::MemberSource source);
  // Bytes sent to / received from the shards by every call above.
  TransferBytes bytes() const;

 private:
  GrpcShardControl() = default;
  // Runs call(s) for every shard s in parallel; the first error, prefixed
  // with "shard s (address): ".
  absl::Status OnEveryShard(const std::function<absl::Status(size_t)>& call);
  // The first error of statuses[s] (by shard), prefixed with "shard s
  // (address): "; an ALREADY_EXISTS wins over other codes.
  absl::Status FirstShardError(const std::vector<absl::Status>& statuses) const;
  template <typename Request, typename Response>
  using ShardMethod = void (v1::ParameterServer::Stub::async::*)(
      grpc::ClientContext*, const Request*, Response*,
      std::function<void(grpc::Status)>);
  // One unary call to every shard at once, as OnEveryShard:
  // `request` to every shard with `timeout`, bytes counted; a failed call is
  // "<what>: <message>" with the call's code; `check` (optional) judges each
  // shard's response, on the calling thread.
  template <typename Request, typename Response>
  absl::Status CallEveryShard(
      ShardMethod<Request, Response> method, const Request& request,
      absl::Duration timeout, absl::string_view what,
      const std::function<absl::Status(size_t, const Response&)>& check =
          nullptr);

  v1::JobSpec job_;
  std::vector<std::unique_ptr<v1::ParameterServer::Stub>> stubs_;
  ByteCounter finalize_bytes_;
  absl::Mutex eval_mu_;
  // Exactly one is set: evaluator_ for a dense model, ctr_evaluator_ for a
  // DLRM.
  std::unique_ptr<TestSetEvaluator> evaluator_;
  std::unique_ptr<CtrTestEvaluator> ctr_evaluator_;
  std::unique_ptr<GrpcParameterClient> puller_;
  std::unique_ptr<RingWeightsSource> ring_weights_;  // hybrid jobs only
  std::string export_dir_;  // a DLRM's or a worker's model's; empty: none
  // A job whose model is its workers': its tensors, exported by name at
  // every evaluation point (nothing is scored).
  std::optional<ParameterLayout> worker_model_;
  // Writes the DLRM export of params_ and the shards' tables at a version
  // >= `version`: each shard's table section is spooled to a file in the
  // export directory (".shard-<s>.tables", deleted afterwards, also on
  // error), and the files are read in place, merged as the export's tables
  // file is written. Errors name the export directory.
  absl::Status ExportDlrmJob(int64_t version)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(eval_mu_);
  // ExportDlrmJob's work, through `spools` (one path per shard).
  absl::Status WriteDlrmExport(int64_t version,
                               const std::vector<std::string>& spools,
                               FileSystem* fs)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(eval_mu_);
  std::vector<float> params_ ABSL_GUARDED_BY(eval_mu_);
};

}  // namespace ferry

#endif  // FERRY_COORDINATOR_GRPC_SHARD_CONTROL_H_
