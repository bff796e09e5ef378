// Shared by the RingExchange tests (several ranks in one process over
// in-memory rings): the model's tensors, the members' gradients, a member
// (backend, buffers, publisher, exchange) and the single-process reference
// computed with the same optimizer code.
#ifndef FERRY_TESTS_WORKER_RING_EXCHANGE_FIXTURE_H_
#define FERRY_TESTS_WORKER_RING_EXCHANGE_FIXTURE_H_

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "compute/optimizer.h"
#include "gtest/gtest.h"
#include "ring/weights_publisher.h"
#include "worker/ring_exchange.h"
#include "worker/worker_deps.h"

namespace ferry::testing {

inline const std::vector<int64_t> kRingTensors = {7, 5, 3};
inline constexpr int64_t kRingN = 15;
inline constexpr int64_t kSamplesPerMember = 2;

inline OptimizerConfig RingMomentum() {
  OptimizerConfig config;
  config.kind = OptimizerKind::kMomentum;
  config.lr = 0.5;
  config.momentum = 0.5;
  return config;
}

// Member `seed`'s gradient SUM of `step` (small multiples of 1/4: every sum
// of them is exact in float, whatever the order).
inline float RingGrad(int seed, int64_t step, int64_t i) {
  return 0.25f * static_cast<float>((i * 3 + step + 2 * seed) % 7 - 3);
}

inline std::vector<float> RingInitial() {
  std::vector<float> v(kRingN);
  for (int64_t i = 0; i < kRingN; ++i) {
    v[i] = 0.125f * static_cast<float>(i % 5);
  }
  return v;
}

struct RingMember {
  std::string id;
  int seed = 0;  // which gradients it computes
  std::unique_ptr<ComputeBackend> backend;
  DeviceBuffer params, grads;
  WeightsPublisher publisher;
  std::unique_ptr<RingExchange> exchange;

  // params[begin, end)
  std::vector<float> Params(int64_t begin = 0, int64_t end = kRingN) const {
    return std::vector<float>(params.data() + begin, params.data() + end);
  }
};

// A member starting from `init`, its links from `connect`, a weights digest
// every `digest_every` steps (0: none).
// Ring checkpoints go to `checkpoint_dir` on `fs` (empty: none), written by
// rank 0 alone when `checkpoint_from_rank0`; the optimizer state sharded
// across the ring when `shard_optimizer_state`; absent ranges agreed on
// when `agree_on_absent`; `edit` changes the options last.
inline std::unique_ptr<RingMember> MakeRingMember(
    const std::string& id, int seed, RingTransportFactory connect,
    const std::vector<float>& init, int64_t digest_every = 0,
    FileSystem* fs = nullptr, const std::string& checkpoint_dir = "",
    bool checkpoint_from_rank0 = false, bool shard_optimizer_state = false,
    bool agree_on_absent = false,
    const std::function<void(RingExchangeOptions&)>& edit = nullptr) {
  auto m = std::make_unique<RingMember>();
  m->id = id;
  m->seed = seed;
  m->backend = *MakeBackend(DeviceChoice::kCpu, 1);
  m->params = *m->backend->Allocate(kRingN);
  m->grads = *m->backend->Allocate(kRingN);
  std::copy(init.begin(), init.end(), m->params.data());
  RingExchangeOptions options;
  options.job_id = "job";
  options.worker_id = id;
  options.backend = m->backend.get();
  options.connect = std::move(connect);
  options.publisher = &m->publisher;
  options.digest_every = digest_every;
  options.tensor_sizes = kRingTensors;
  options.bucket_elements = 8;  // two buckets: {3, 5} and {7}
  options.optimizer = RingMomentum();
  options.params = m->params.data();
  options.grads = m->grads.data();
  options.host_grads = m->grads.data();
  options.collective_timeout = absl::Minutes(5);  // ends by cancel, not time
  options.fs = fs;
  options.checkpoint_dir = checkpoint_dir;
  options.checkpoint_from_rank0 = checkpoint_from_rank0;
  options.shard_optimizer_state = shard_optimizer_state;
  options.agree_on_absent = agree_on_absent;
  options.lend_published_params = true;  // the tests write only grads
  if (edit) edit(options);
  m->exchange = *RingExchange::Create(std::move(options));
  return m;
}

// The single-process reference: the same optimizer over the mean gradient.
class RingReference {
 public:
  RingReference()
      : backend_(*MakeBackend(DeviceChoice::kCpu, 1)),
        params_(*backend_->Allocate(kRingN)),
        grads_(*backend_->Allocate(kRingN)),
        optimizer_(*Optimizer::Create(RingMomentum(), backend_.get(), kRingN)) {
    const std::vector<float> init = RingInitial();
    std::copy(init.begin(), init.end(), params_.data());
  }
  // One step whose contributors computed with `seeds`.
  void Step(int64_t step, const std::vector<int>& seeds) {
    for (int64_t i = 0; i < kRingN; ++i) {
      float sum = 0.0f;
      for (int seed : seeds) sum += RingGrad(seed, step, i);
      grads_.data()[i] = sum;
    }
    const float samples = static_cast<float>(kSamplesPerMember * seeds.size());
    ASSERT_TRUE(backend_->Scale(kRingN, 1.0f / samples, grads_.data()).ok());
    ASSERT_TRUE(optimizer_.Apply(grads_.data(), params_.data()).ok());
  }
  std::vector<float> Params(int64_t begin = 0, int64_t end = kRingN) const {
    return std::vector<float>(params_.data() + begin, params_.data() + end);
  }

 private:
  std::unique_ptr<ComputeBackend> backend_;
  DeviceBuffer params_, grads_;
  Optimizer optimizer_;
};

// The lease of rank `rank` of `ring` for `step` (kSamplesPerMember each).
inline v1::NextTaskResponse RingLease(int64_t step, int64_t ring_generation,
                                      int64_t fence,
                                      const std::vector<RingMember*>& ring,
                                      int rank) {
  v1::NextTaskResponse lease;
  lease.set_step(step);
  lease.set_ring_generation(ring_generation);
  lease.set_fence(fence);
  for (const RingMember* m : ring) {
    v1::RingMember* member = lease.add_ring();
    member->set_worker_id(m->id);
    member->set_peer_address("in-memory");
  }
  lease.set_rank(rank);
  lease.set_step_samples(kSamplesPerMember * static_cast<int64_t>(ring.size()));
  return lease;
}

inline std::vector<int> RingSeeds(const std::vector<RingMember*>& ring) {
  std::vector<int> seeds;
  for (const RingMember* m : ring) seeds.push_back(m->seed);
  return seeds;
}

}  // namespace ferry::testing

#endif  // FERRY_TESTS_WORKER_RING_EXCHANGE_FIXTURE_H_
