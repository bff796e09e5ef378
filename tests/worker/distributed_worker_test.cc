// The distributed worker's training loop with several workers in one
// process: the real coordinator core behind an in-process CoordinatorApi,
// ring links over in-memory hubs, a FakeClock for the loop's waits
// (tests/worker/worker_test_fixture.h). The final weights of every member
// must equal each other bit for bit and a single-process run computed here
// within 1e-4, also when a collective fails (the step is rolled back and
// redone), a member leaves and another joins (new ring generations).
#include "worker/distributed_worker.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "compute/optimizer.h"
#include "data/batch_stager.h"
#include "data/data_source.h"
#include "data/sampler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/model_params.h"
#include "model/model_presets.h"
#include "model/model_spec.h"
#include "model/sequential_model.h"
#include "proto/job_convert.h"
#include "ring/bucket_plan.h"
#include "tests/worker/ps_test_fixture.h"
#include "tests/worker/worker_test_fixture.h"

namespace ferry {
namespace {

using testing::InMemoryPeerEndpoint;
using testing::InProcessCoordinator;
using testing::NoShards;
using testing::RingHubs;

constexpr int64_t kTrainSamples = 96;
constexpr int kBatch = 12;

v1::JobSpec Job(v1::Mode mode, int epochs) {
  v1::JobSpec job;
  job.set_job_id("job");
  job.set_model("10-16-4");
  job.set_dataset("synthetic:" + std::to_string(kTrainSamples));
  job.set_global_batch(kBatch);
  job.set_epochs(epochs);
  job.set_seed(5);
  job.set_mode(mode);
  if (mode == v1::MODE_PS) job.add_shard_addresses("in-memory");
  job.set_consistency(v1::CONSISTENCY_SYNC);
  job.set_bucket_elements(64);  // several buckets
  job.set_digest_every(1);
  OptimizerConfig optimizer;
  optimizer.kind = OptimizerKind::kMomentum;
  optimizer.lr = 0.1;
  *job.mutable_optimizer() = ToProto(optimizer);
  const ParameterLayout layout =
      *ModelParameterLayout(*ResolveModelSpec(job.model()));
  for (const TensorSlot& t : layout.tensors()) {
    v1::TensorSpec* spec = job.add_tensors();
    spec->set_name(t.name);
    for (int64_t d : t.shape) spec->add_shape(d);
  }
  return job;
}

// The job trained by one process: step s of epoch e takes permutation
// positions [s*B, (s+1)*B), the mean gradient, the same optimizer.
std::vector<float> SingleProcessWeights(const v1::JobSpec& job) {
  std::unique_ptr<ComputeBackend> backend = *MakeBackend(DeviceChoice::kCpu, 1);
  const ModelDef def = *ResolveModelSpec(job.model());
  SequentialModel mlp = *SequentialModel::Create(def, backend.get());
  TrainTestData data = *LoadTrainTest(job.dataset(), "", def, job.seed());
  const int64_t n = mlp.layout().total_elements();
  DeviceBuffer params = *backend->Allocate(n);
  DeviceBuffer grads = *backend->Allocate(n);
  const std::vector<float> init = mlp.InitialParameters(job.seed());
  std::copy(init.begin(), init.end(), params.data());
  Optimizer optimizer =
      *Optimizer::Create(FromProto(job.optimizer()), backend.get(), n);
  BatchStager stager =
      *BatchStager::Create(backend.get(), mlp.input_dim(), job.global_batch());
  const int64_t size = data.train.num_samples;
  for (int64_t epoch = 0; epoch < job.epochs(); ++epoch) {
    const std::vector<int64_t> order =
        EpochPermutation(size, job.seed(), epoch, /*shuffle=*/true);
    for (int64_t begin = 0; begin < size; begin += job.global_batch()) {
      const int64_t end = std::min<int64_t>(begin + job.global_batch(), size);
      const std::vector<int64_t> indices(order.begin() + begin,
                                         order.begin() + end);
      const int batch = static_cast<int>(indices.size());
      EXPECT_TRUE(stager.Stage(data.train, indices).ok());
      EXPECT_TRUE(mlp.ForwardBackward(params.data(), stager.inputs(),
                                      stager.labels(), batch, 1.0f,
                                      grads.data())
                      .ok());
      EXPECT_TRUE(backend->Scale(n, 1.0f / batch, grads.data()).ok());
      EXPECT_TRUE(optimizer.Apply(grads.data(), params.data()).ok());
    }
  }
  return std::vector<float>(params.data(), params.data() + n);
}

std::vector<float> ReadWeights(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<float> values;
  float v;
  while (in.read(reinterpret_cast<char*>(&v), sizeof(v))) values.push_back(v);
  return values;
}

// One coordinator, its in-memory rings, the workers' clock; `shards` (not
// owned; NoShards for ring jobs) and `parameter_client` serve PS jobs.
class Cluster {
 public:
  // `long_poll`: how long the coordinator parks a call (a report awaiting
  // its step's commit too).
  Cluster(v1::JobSpec job, int start_workers, ShardControl* shards,
          ParameterClientFactory parameter_client = {},
          absl::Duration long_poll = absl::Milliseconds(200))
      : shards_(shards), parameter_client_(std::move(parameter_client)) {
    CoordinatorOptions options;
    options.job = std::move(job);
    options.epoch_size = kTrainSamples;
    options.heartbeat_interval = absl::Milliseconds(50);
    options.heartbeat_timeout = absl::Minutes(5);  // nobody is evicted
    options.long_poll = long_poll;
    options.start_workers = start_workers;
    coordinator_ = *Coordinator::Create(std::move(options), shards_);
  }
  ~Cluster() { coordinator_->Shutdown(); }

  struct Worker {
    WorkerOptions options;
    std::atomic<bool> stop{false};
    InProcessCoordinator* coordinator = nullptr;  // owned by the worker
    std::thread thread;
    absl::StatusOr<WorkerSummary> result = absl::UnknownError("not run");
    std::vector<float> Weights() const {
      return ReadWeights(options.final_weights_path);
    }
  };

  // Starts a worker on its own thread; `on_lease` sees its TRAIN leases.
  Worker& Start(InProcessCoordinator::LeaseHook on_lease = {}) {
    auto owned = std::make_unique<Worker>();
    Worker& w = *owned;
    const int index = static_cast<int>(workers_.size());
    workers_.push_back(std::move(owned));
    w.options.coordinator_address = "in-process";
    w.options.device = DeviceChoice::kCpu;
    w.options.collective_timeout = absl::Minutes(5);  // failures cancel
    w.options.final_weights_path = ::testing::TempDir() + "/worker_test_" +
                                   std::to_string(getpid()) + "_" +
                                   std::to_string(index) + ".bin";
    w.options.stop_requested = &w.stop;
    if (configure_workers) configure_workers(w.options);
    WorkerDeps deps;
    deps.peer = std::make_unique<InMemoryPeerEndpoint>(
        &hubs_, "peer" + std::to_string(index));
    auto coordinator = std::make_unique<InProcessCoordinator>(
        coordinator_.get(), std::move(on_lease));
    w.coordinator = coordinator.get();
    deps.coordinator = std::move(coordinator);
    deps.parameter_client = parameter_client_;
    deps.clock = &clock_;
    w.thread = std::thread([&w, deps = std::move(deps)]() mutable {
      w.result = RunDistributedWorker(w.options, std::move(deps));
    });
    return w;
  }

  void JoinAll() {
    for (auto& w : workers_) {
      if (w->thread.joinable()) w->thread.join();
    }
  }

  Coordinator& coordinator() { return *coordinator_; }
  RingHubs& hubs() { return hubs_; }
  // Applied to every worker's options before it starts.
  std::function<void(WorkerOptions&)> configure_workers;

 private:
  ShardControl* const shards_;
  const ParameterClientFactory parameter_client_;
  RingHubs hubs_;
  FakeClock clock_;
  std::unique_ptr<Coordinator> coordinator_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

void ExpectEveryEpochAppliedOnce(const v1::StatusResponse& status, int epochs) {
  ASSERT_EQ(status.accounting_size(), epochs);
  for (const v1::EpochAccounting& a : status.accounting()) {
    EXPECT_EQ(a.samples_applied(), kTrainSamples) << "epoch " << a.epoch();
  }
}

void ExpectMatchesReference(const std::vector<float>& weights,
                            const std::vector<float>& reference) {
  ASSERT_EQ(weights.size(), reference.size());
  for (size_t i = 0; i < weights.size(); ++i) {
    ASSERT_NEAR(weights[i], reference[i], 1e-4) << "element " << i;
  }
}

// Every one of `workers` finished with the same weights bit for bit,
// within 1e-4 of one process's; the coordinator applied every step of the
// job's two epochs once.
void ExpectFinishedAsOneProcess(const std::vector<Cluster::Worker*>& workers,
                                const v1::JobSpec& job, Cluster& cluster) {
  const std::vector<float> reference = SingleProcessWeights(job);
  for (Cluster::Worker* w : workers) {
    ASSERT_TRUE(w->result.ok()) << w->result.status();
    EXPECT_EQ(w->result->end_reason, "finished");
    EXPECT_EQ(w->Weights(), workers[0]->Weights());  // bit for bit
    ExpectMatchesReference(w->Weights(), reference);
  }
  const v1::StatusResponse status = cluster.coordinator().Status();
  EXPECT_EQ(status.step(), 16);
  ExpectEveryEpochAppliedOnce(status, 2);
  EXPECT_EQ(status.digest_mismatches(), 0);
}

TEST(DistributedWorkerTest, RingOfThreeMatchesASingleProcess) {
  const v1::JobSpec job = Job(v1::MODE_RING, /*epochs=*/2);
  NoShards shards;
  Cluster cluster(job, /*start_workers=*/3, &shards);
  std::vector<Cluster::Worker*> workers;
  for (int i = 0; i < 3; ++i) workers.push_back(&cluster.Start());
  cluster.JoinAll();

  ExpectFinishedAsOneProcess(workers, job, cluster);
  for (Cluster::Worker* w : workers) {
    EXPECT_EQ(w->result->steps, 16);
    EXPECT_EQ(w->result->abandoned_steps, 0);
  }
  EXPECT_GT(cluster.coordinator().Status().digest_checks(), 0);
  EXPECT_EQ(cluster.hubs().generations().size(), 1u);  // one ring
}

// A worker that registers once training is over (a late join, or one
// coming back after an eviction while the others finished the job) has
// nothing to do: it ends as finished, not with the coordinator's refusal.
TEST(DistributedWorkerTest, AWorkerArrivingAfterTrainingEndsAsFinished) {
  const v1::JobSpec job = Job(v1::MODE_RING, /*epochs=*/1);
  NoShards shards;
  Cluster cluster(job, /*start_workers=*/1, &shards);
  Cluster::Worker& first = cluster.Start();
  cluster.JoinAll();
  ASSERT_TRUE(first.result.ok()) << first.result.status();
  ASSERT_TRUE(cluster.coordinator().Status().training_done());
  Cluster::Worker& late = cluster.Start();
  cluster.JoinAll();
  ASSERT_TRUE(late.result.ok()) << late.result.status();
  EXPECT_EQ(late.result->end_reason, "finished");
  EXPECT_EQ(late.result->steps, 0);
}

TEST(DistributedWorkerTest, RingSurvivesAFailedCollectiveALeaveAndAJoin) {
  const v1::JobSpec job = Job(v1::MODE_RING, /*epochs=*/3);  // 24 steps
  NoShards shards;
  Cluster cluster(job, /*start_workers=*/3, &shards);
  RingHubs& hubs = cluster.hubs();
  std::atomic<bool> failed{false};
  std::atomic<bool> join_asked{false};
  absl::Notification start_joiner, joiner_registered;

  // Worker 0 holds its lease of step 14 until a fourth worker registered.
  Cluster::Worker& w0 = cluster.Start([&](const v1::NextTaskResponse& lease) {
    if (lease.step() >= 14 && !join_asked.exchange(true)) {
      start_joiner.Notify();
      joiner_registered.WaitForNotification();
    }
  });
  // Worker 1's link breaks once, in step 3 or the step it is still in.
  Cluster::Worker& w1 = cluster.Start([&](const v1::NextTaskResponse& lease) {
    if (lease.step() >= 3 && !failed.exchange(true)) {
      hubs.FailNextSend(lease.ring_generation(), lease.rank());
    }
  });
  // Worker 2 leaves after its step 8.
  // Set after Start returns, read by w2's thread: atomic.
  std::atomic<Cluster::Worker*> w2_ptr = nullptr;
  Cluster::Worker& w2 = cluster.Start([&](const v1::NextTaskResponse& lease) {
    Cluster::Worker* self = w2_ptr.load();
    if (lease.step() >= 8 && self != nullptr) self->stop.store(true);
  });
  w2_ptr.store(&w2);

  start_joiner.WaitForNotification();
  Cluster::Worker& w3 = cluster.Start();
  w3.coordinator->registered().WaitForNotification();
  joiner_registered.Notify();
  cluster.JoinAll();

  const std::vector<float> reference = SingleProcessWeights(job);
  for (Cluster::Worker* w : {&w0, &w1, &w3}) {
    ASSERT_TRUE(w->result.ok()) << w->result.status();
    EXPECT_EQ(w->result->end_reason, "finished");
    EXPECT_EQ(w->Weights(), w0.Weights());  // bit for bit
    ExpectMatchesReference(w->Weights(), reference);
  }
  ASSERT_TRUE(w2.result.ok()) << w2.result.status();
  EXPECT_EQ(w2.result->end_reason, "stopped");
  EXPECT_GT(w3.result->steps, 0);  // the joiner trained
  EXPECT_GT(w0.result->abandoned_steps + w1.result->abandoned_steps, 0);

  const v1::StatusResponse status = cluster.coordinator().Status();
  EXPECT_EQ(status.step(), 24);  // every step committed once
  ExpectEveryEpochAppliedOnce(status, 3);
  EXPECT_GE(status.aborted_steps(), 1);
  EXPECT_EQ(status.digest_mismatches(), 0);
  bool left = false, joined_late = false;
  for (const v1::JobEvent& e : status.events()) {
    if (e.kind() == "left" && e.worker_id() == w2.result->worker_id) {
      left = true;
    }
    if (e.kind() == "joined" && e.worker_id() == w3.result->worker_id) {
      joined_late = true;
    }
  }
  EXPECT_TRUE(left);
  EXPECT_TRUE(joined_late);
  // Rings: the first, after the failure, without worker 2, with worker 3.
  EXPECT_GE(hubs.generations().size(), 4u);
}

// Sharded optimizer state with every member's rollback copy in its gradient
// buffer (no minimum size): each step begins once the one before is
// committed, so no copy ever needs memory of its own, and the weights equal
// a single process's. (Reports park until their step is applied: no long
// poll ends first.)
TEST(DistributedWorkerTest, ShardedRingWaitsForEachCommitBeforeItsNextStep) {
  v1::JobSpec job = Job(v1::MODE_RING, /*epochs=*/2);
  job.set_ring_shard_optimizer_state(true);
  NoShards shards;
  Cluster cluster(job, /*start_workers=*/3, &shards, {}, absl::Minutes(1));
  cluster.configure_workers = [](WorkerOptions& o) {
    o.ring_prompt_commit_min_bytes = 0;
  };
  std::vector<Cluster::Worker*> workers;
  for (int i = 0; i < 3; ++i) workers.push_back(&cluster.Start());
  cluster.JoinAll();

  ExpectFinishedAsOneProcess(workers, job, cluster);
  for (Cluster::Worker* w : workers) {
    EXPECT_EQ(w->result->steps, 16);
    EXPECT_EQ(w->result->rollback_copies_moved, 0);
  }
}

// The same with a link that breaks in a step's params all-gather, after
// every member applied the update to its slice: the members go back to the
// copies in their gradient buffers, and the weights equal a single
// process's.
TEST(DistributedWorkerTest, ShardedRingGoesBackToTheCopiesInItsGradients) {
  v1::JobSpec job = Job(v1::MODE_RING, /*epochs=*/2);
  job.set_ring_shard_optimizer_state(true);
  NoShards shards;
  Cluster cluster(job, /*start_workers=*/3, &shards);
  cluster.configure_workers = [](WorkerOptions& o) {
    o.ring_prompt_commit_min_bytes = 0;
  };
  RingHubs& hubs = cluster.hubs();
  // A member's sends in a step's reduce-scatter: W-1 per bucket.
  std::vector<int64_t> sizes;
  for (const v1::TensorSpec& t : job.tensors()) {
    int64_t n = 1;
    for (int64_t d : t.shape()) n *= d;
    sizes.push_back(n);
  }
  const int reduce_sends =
      2 * static_cast<int>(PlanBuckets(sizes, job.bucket_elements())->size());
  std::atomic<bool> failed{false};
  std::vector<Cluster::Worker*> workers;
  for (int i = 0; i < 3; ++i) {
    workers.push_back(&cluster.Start([&, i](const v1::NextTaskResponse& l) {
      if (i == 1 && l.step() >= 5 && !failed.exchange(true)) {
        // Its second send of the all-gather.
        hubs.FailSendAfter(l.ring_generation(), l.rank(), reduce_sends + 1);
      }
    }));
  }
  cluster.JoinAll();

  ExpectFinishedAsOneProcess(workers, job, cluster);
  EXPECT_GE(cluster.coordinator().Status().aborted_steps(), 1);
}

TEST(DistributedWorkerTest, PsWorkersMatchASingleProcess) {
  const v1::JobSpec job = Job(v1::MODE_PS, /*epochs=*/2);
  const ModelDef def = *ResolveModelSpec(job.model());
  testing::InMemoryPs ps(
      FromProto(job.optimizer()),
      ModelInitialParameters(def, *ModelParameterLayout(def), job.seed()));
  Cluster cluster(job, /*start_workers=*/3, &ps, ps.ClientFactory());
  std::vector<Cluster::Worker*> workers;
  for (int i = 0; i < 3; ++i) workers.push_back(&cluster.Start());
  cluster.JoinAll();

  const std::vector<float> reference = SingleProcessWeights(job);
  for (Cluster::Worker* w : workers) {
    ASSERT_TRUE(w->result.ok()) << w->result.status();
    EXPECT_EQ(w->result->end_reason, "finished");
    EXPECT_EQ(w->result->steps, 16);  // every worker in every step
    ExpectMatchesReference(w->Weights(), reference);
  }
  EXPECT_EQ(ps.version(), 16);  // one version per step
  EXPECT_EQ(ps.late_pushes(), 0);
  const v1::StatusResponse status = cluster.coordinator().Status();
  EXPECT_EQ(status.step(), 16);
  ExpectEveryEpochAppliedOnce(status, 2);
  EXPECT_TRUE(cluster.hubs().generations().empty());  // no ring in PS mode
}

}  // namespace
}  // namespace ferry
