// Starts a real ferry cluster (coordinator, PS shards, workers) as separate
// processes on loopback ports, for integration and fault tests; stops every
// process when destroyed.
#ifndef FERRY_TESTS_INTEGRATION_CLUSTER_FIXTURE_H_
#define FERRY_TESTS_INTEGRATION_CLUSTER_FIXTURE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/child_process.h"
#include "ferry/v1/coordinator.grpc.pb.h"
#include "worker/standalone_trainer.h"

namespace ferry::testing {

struct ClusterSpec {
  std::string mode = "ps";  // "ring": no shards are started
  int workers = 2;
  int shards = 2;      // shard processes
  int partitions = 1;  // logical shards per process (--partitions)
  std::vector<std::string> job_args;  // extra coordinator flags
  // Extra flags of worker i; "{i}" in an argument becomes i.
  std::vector<std::string> worker_args;
};

// The small job of the equivalence tests (sync PS, ring vs one process):
// model 64-32-10 on synthetic:600, batch 40, Adam with a cosine schedule,
// `steps` steps. As options of the single-process reference run, and as the
// coordinator's flags for the same job.
// `model`: an MLP string or a preset ("convnet": dropout masks must match
// across the split of the global batch too). MLPs train with Adam; other
// models with momentum SGD, because Adam turns the rounding noise of a
// near-zero gradient (a dead ReLU unit, an input dropped for almost every
// sample) into a whole lr-sized step, which no split of a batch can keep
// within 1e-4.
// The steps an equivalence test runs `model` for: 6, and 3 for the
// ConvNet. Splitting the batch changes the last bits of its GEMMs (how
// much depends on the BLAS kernels the CPU gets: on AVX-512 more than on
// AVX2); around step 4 one such difference flips a max-pool or ReLU
// decision and the weights part by ~2e-4 by step 6, in one process with
// micro-batches as well (docs/pipeline.md).
inline int EquivalenceSteps(const std::string& model) {
  return model == "convnet" ? 3 : 6;
}

// A test's own folder for its cluster's logs and port files:
// TempDir()/ferry-NAME-PID. Tests that run at once (ctest -j, parameters of
// one test, two build folders) must not share one: a process would read
// another cluster's port file and join that cluster.
std::string ClusterLogDir(const std::string& name);

TrainOptions EquivalenceReference(int steps,
                                  const std::string& model = "64-32-10");
std::vector<std::string> EquivalenceJobArgs(
    int steps, const std::string& model = "64-32-10");

class TestCluster {
 public:
  ~TestCluster();
  static absl::StatusOr<std::unique_ptr<TestCluster>> Start(
      const ClusterSpec& spec, const std::string& log_dir);
  // Polls the coordinator until the job finished; the final status.
  absl::StatusOr<v1::StatusResponse> WaitFinished(absl::Duration timeout);
  // The job's shard addresses, in logical order.
  const std::vector<std::string>& shard_addresses() const {
    return shard_addresses_;
  }
  const std::string& coordinator() const { return coordinator_; }
  // Exit codes of the workers (nullopt while running).
  std::vector<std::optional<int>> WorkerExitCodes();

 private:
  std::string coordinator_;
  std::vector<std::string> shard_addresses_;
  std::vector<ChildProcess> servers_;
  std::vector<ChildProcess> workers_;
};

}  // namespace ferry::testing

#endif  // FERRY_TESTS_INTEGRATION_CLUSTER_FIXTURE_H_
