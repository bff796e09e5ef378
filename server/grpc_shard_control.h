// ShardControl over gRPC: FinalizeStep to every shard in parallel (each
// call with a deadline), and evaluation of the shards' weights on the test
// set by pulling them like a worker does.
//
// Thread safety: FinalizeStep and Evaluate may run concurrently.
#ifndef FERRY_SERVER_GRPC_SHARD_CONTROL_H_
#define FERRY_SERVER_GRPC_SHARD_CONTROL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "ferry/v1/ps.grpc.pb.h"
#include "server/coordinator.h"
#include "server/test_set_evaluator.h"
#include "worker/dataset.h"
#include "worker/ps_client.h"

namespace ferry {

class GrpcShardControl final : public ShardControl {
 public:
  // `test_set` is used for evaluation. INVALID_ARGUMENT for a bad job.
  static absl::StatusOr<std::unique_ptr<GrpcShardControl>> Create(
      const v1::JobSpec& job, Dataset test_set);

  absl::Status FinalizeStep(int64_t step, int64_t generation,
                            const std::vector<v1::Contributor>& contributors) override;
  absl::StatusOr<std::pair<double, double>> Evaluate(int64_t min_version) override;
  // TODO(helper B): Checkpoint / Restore RPCs to every shard in parallel.
  absl::Status Checkpoint(int64_t) override { return absl::UnimplementedError("checkpoint"); }
  absl::StatusOr<std::vector<int64_t>> Versions() override {
    return absl::UnimplementedError("versions");
  }
  absl::Status RestoreTo(int64_t, int64_t) override { return absl::UnimplementedError("restore"); }
  // Bytes sent to / received from the shards by FinalizeStep and Evaluate.
  TransferBytes bytes() const;

 private:
  GrpcShardControl() = default;

  v1::JobSpec job_;
  std::vector<std::unique_ptr<v1::ParameterServer::Stub>> stubs_;
  ByteCounter finalize_bytes_;
  absl::Mutex eval_mu_;
  std::unique_ptr<TestSetEvaluator> evaluator_;
  std::unique_ptr<GrpcParameterClient> puller_;
  std::vector<float> params_ ABSL_GUARDED_BY(eval_mu_);
};

}  // namespace ferry

#endif  // FERRY_SERVER_GRPC_SHARD_CONTROL_H_
