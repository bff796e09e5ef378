// RingExchange's absent gradients (AbsentGradientExchange): what every
// member of a step left out is skipped by every member's optimizer (plain
// and with the optimizer state sharded), so the members stay equal to a
// single process that skips it.
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/ring_exchange_fixture.h"
#include "tests/worker/worker_test_fixture.h"
#include "worker/ring_exchange.h"

namespace ferry {
namespace {

using ::testing::FloatEq;
using testing::kRingN;
using testing::kSamplesPerMember;
using ::testing::Pointwise;
using testing::RingMember;

// Tensors {7, 5, 3}: [0, 7), [7, 12), [12, 15).
const FlatRange kMiddle = {7, 12}, kLast = {12, 15};

// The step's absent tensors of each member: in step 1, member 0 leaves out
// the middle and last tensors, the others the middle one; step 0 uses all.
std::vector<FlatRange> AbsentTensorsOf(int seed, int64_t step) {
  if (step == 0) return {};
  if (seed == 0) return {kMiddle, kLast};
  return {kMiddle};
}

bool InRanges(const std::vector<FlatRange>& ranges, int64_t i) {
  for (const FlatRange& r : ranges) {
    if (i >= r.begin && i < r.end) return true;
  }
  return false;
}

// Member `m`'s step: its gradient (zeros where absent), the tensors
// declared last to first.
absl::Status AbsentStep(RingMember& m, v1::NextTaskResponse lease) {
  ExchangeStep step;
  step.lease = &lease;
  step.num_samples = kSamplesPerMember;
  RETURN_IF_ERROR(m.exchange->BeginStep(step));
  const std::vector<FlatRange> absent = AbsentTensorsOf(m.seed, lease.step());
  for (int64_t i = 0; i < kRingN; ++i) {
    m.grads.data()[i] =
        InRanges(absent, i) ? 0.0f : testing::RingGrad(m.seed, lease.step(), i);
  }
  auto* declare = m.exchange->capability<AbsentGradientExchange>();
  if (declare == nullptr) return absl::InternalError("no absent gradients");
  int64_t end = kRingN;
  for (auto it = testing::kRingTensors.rbegin();
       it != testing::kRingTensors.rend(); ++it) {
    end -= *it;
    RETURN_IF_ERROR(InRanges(absent, end) ? declare->ReadyAbsent(end, *it)
                                          : m.exchange->Ready(end, *it));
  }
  return m.exchange->FinishStep();
}

// `size` members over `hubs` (seeds 0..size-1), each one's transport
// passed through `wrap(seed, transport)`.
using WrapTransport = std::function<std::unique_ptr<RingTransport>(
    int seed, std::unique_ptr<RingTransport>)>;
std::vector<std::unique_ptr<RingMember>> AbsentMembers(
    testing::RingHubs& hubs, int size, bool agree, bool sharded,
    WrapTransport wrap = nullptr) {
  std::vector<std::unique_ptr<RingMember>> members;
  for (int seed = 0; seed < size; ++seed) {
    members.push_back(testing::MakeRingMember(
        "w" + std::to_string(seed), seed,
        [&hubs, seed, wrap](const v1::NextTaskResponse& lease)
            -> absl::StatusOr<std::unique_ptr<RingTransport>> {
          ASSIGN_OR_RETURN(std::unique_ptr<RingTransport> t,
                           hubs.Connect(lease.ring_generation(),
                                        lease.ring_size(), lease.rank()));
          return wrap ? wrap(seed, std::move(t)) : std::move(t);
        },
        testing::RingInitial(), 0, nullptr, "", false, sharded, agree));
  }
  return members;
}

// Step `step` on every member of `ring` at once; the statuses by rank.
std::vector<absl::Status> RunAbsentStep(const std::vector<RingMember*>& ring,
                                        int64_t step) {
  std::vector<absl::Status> statuses(ring.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ring.size(); ++r) {
    threads.emplace_back([&, r] {
      statuses[r] =
          AbsentStep(*ring[r], testing::RingLease(step, 1, 0, ring, r));
    });
  }
  for (std::thread& t : threads) t.join();
  return statuses;
}

std::vector<RingMember*> Pointers(
    const std::vector<std::unique_ptr<RingMember>>& members) {
  std::vector<RingMember*> ring;
  for (const auto& m : members) ring.push_back(m.get());
  return ring;
}

// Runs steps 0 and 1 on three members; their weights.
std::vector<std::vector<float>> RunAbsentMembers(bool agree, bool sharded) {
  testing::RingHubs hubs;
  const auto members = AbsentMembers(hubs, 3, agree, sharded);
  const std::vector<RingMember*> ring = Pointers(members);
  for (int64_t step = 0; step < 2; ++step) {
    for (const absl::Status& s : RunAbsentStep(ring, step)) {
      EXPECT_TRUE(s.ok()) << s;
    }
  }
  std::vector<std::vector<float>> weights;
  for (RingMember* m : ring) weights.push_back(m->Params());
  return weights;
}

// One process: the mean gradient, the optimizer skipping `skip` in step 1.
std::vector<float> AbsentReference(const std::vector<FlatRange>& skip) {
  auto backend = *MakeBackend(DeviceChoice::kCpu, 1);
  Optimizer optimizer =
      *Optimizer::Create(testing::RingMomentum(), backend.get(), kRingN);
  std::vector<float> params = testing::RingInitial();
  for (int64_t step = 0; step < 2; ++step) {
    std::vector<float> grad(kRingN, 0.0f);
    for (int seed = 0; seed < 3; ++seed) {
      const std::vector<FlatRange> absent = AbsentTensorsOf(seed, step);
      for (int64_t i = 0; i < kRingN; ++i) {
        if (!InRanges(absent, i)) grad[i] += testing::RingGrad(seed, step, i);
      }
    }
    for (float& g : grad) g /= 3.0f * kSamplesPerMember;
    EXPECT_TRUE(optimizer
                    .Apply(grad.data(), params.data(), 1.0,
                           step == 1 ? skip : std::vector<FlatRange>())
                    .ok());
  }
  return params;
}

class RingAbsentTest : public ::testing::TestWithParam<bool> {};

TEST_P(RingAbsentTest, WhatEveryMemberLeftOutIsSkippedOnEveryMember) {
  const std::vector<float> skipped = AbsentReference({kMiddle});
  const std::vector<float> zeros = AbsentReference({});
  // The middle tensor moves by its momentum alone when it is not skipped.
  EXPECT_NE(skipped[kMiddle.begin], zeros[kMiddle.begin]);
  for (const std::vector<float>& weights :
       RunAbsentMembers(/*agree=*/true, /*sharded=*/GetParam())) {
    EXPECT_THAT(weights, Pointwise(FloatEq(), skipped));
  }
  // Without agreeing (a job whose model is ferry's), absent is zeros.
  for (const std::vector<float>& weights :
       RunAbsentMembers(/*agree=*/false, /*sharded=*/GetParam())) {
    EXPECT_THAT(weights, Pointwise(FloatEq(), zeros));
  }
}

INSTANTIATE_TEST_SUITE_P(ShardedState, RingAbsentTest, ::testing::Bool());

// Forwards everything to `inner`, except that a bytes payload equal to
// `from` goes out as `to` (a peer sending malformed absent ranges).
class RewritingTransport final : public RingTransport {
 public:
  RewritingTransport(std::unique_ptr<RingTransport> inner, std::string from,
                     std::string to)
      : inner_(std::move(inner)), from_(std::move(from)), to_(std::move(to)) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  absl::Status Send(const RingTag& tag, const float* data,
                    int64_t count) override {
    return inner_->Send(tag, data, count);
  }
  absl::Status Recv(const RingTag& tag, float* dst, int64_t count, RecvOp op,
                    absl::Time deadline) override {
    return inner_->Recv(tag, dst, count, op, deadline);
  }
  absl::Status SendBytes(const RingTag& tag, std::string payload) override {
    return inner_->SendBytes(tag, payload == from_ ? to_ : std::move(payload));
  }
  absl::StatusOr<std::string> RecvBytes(const RingTag& tag,
                                        absl::Time deadline) override {
    return inner_->RecvBytes(tag, deadline);
  }
  void Abort() override { inner_->Abort(); }

 private:
  std::unique_ptr<RingTransport> inner_;
  const std::string from_, to_;
};

std::string Pairs(std::vector<int64_t> bounds) {
  return std::string(reinterpret_cast<const char*>(bounds.data()),
                     bounds.size() * sizeof(int64_t));
}

// A member whose absent ranges arrive malformed fails the step with
// DATA_LOSS naming the sender, and nobody hangs.
TEST(RingAbsentRangesTest, MalformedRangesOfAMemberFailTheStep) {
  testing::RingHubs hubs;
  // Member 1 leaves out [7, 12) in step 1: its transport says (12, 7).
  const auto members = AbsentMembers(
      hubs, 2, /*agree=*/true, /*sharded=*/false,
      [](int seed,
         std::unique_ptr<RingTransport> t) -> std::unique_ptr<RingTransport> {
        if (seed == 0) return t;
        return std::make_unique<RewritingTransport>(
            std::move(t), Pairs({7, 12}), Pairs({12, 7}));
      });
  const std::vector<RingMember*> ring = Pointers(members);
  for (const absl::Status& s : RunAbsentStep(ring, 0)) {
    ASSERT_TRUE(s.ok()) << s;
  }
  const std::vector<absl::Status> statuses = RunAbsentStep(ring, 1);
  EXPECT_EQ(statuses[0].code(), absl::StatusCode::kDataLoss) << statuses[0];
  EXPECT_THAT(std::string(statuses[0].message()),
              ::testing::HasSubstr("absent ranges of ring rank 1"));
}

TEST(RingAbsentRangesTest, AbsentRangesMustBeInsideTheParameters) {
  testing::RingHubs hubs;
  auto member = testing::MakeRingMember(
      "w0", 0,
      [&hubs](const v1::NextTaskResponse& lease) {
        return hubs.Connect(lease.ring_generation(), lease.ring_size(),
                            lease.rank());
      },
      testing::RingInitial(), 0, nullptr, "", false, false, true);
  v1::NextTaskResponse lease = testing::RingLease(0, 1, 0, {member.get()}, 0);
  ExchangeStep step;
  step.lease = &lease;
  step.num_samples = kSamplesPerMember;
  ASSERT_TRUE(member->exchange->BeginStep(step).ok());
  EXPECT_EQ(member->exchange->ReadyAbsent(10, 6).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(member->exchange->ReadyAbsent(-1, 2).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ferry
