#include "client/cost_model.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "client/cost_command.h"
#include "common/file_system.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/model_export.h"
#include "model/safetensors.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

int64_t Sum(const std::vector<int64_t>& v) {
  int64_t s = 0;
  for (int64_t x : v) s += x;
  return s;
}

CostInput Input(CostMode mode, int workers, int shards,
                std::vector<int64_t> sizes) {
  CostInput in;
  in.mode = mode;
  in.workers = workers;
  in.shards = shards;
  in.tensor_sizes = std::move(sizes);
  in.update_seconds_per_element = 0;  // link arithmetic only
  return in;
}

// Overheads are protobuf framing: a few bytes per message of >= 1 MiB.
void ExpectNear(int64_t actual, double expected, double rel) {
  EXPECT_NEAR(static_cast<double>(actual), expected, expected * rel)
      << "actual " << actual << " expected " << expected;
}

TEST(CostModelTest, PsWorkerMovesTheModelEachWayAndShardsSplitIt) {
  const std::vector<int64_t> sizes = {1000003, 17, 4096 * 513, 1};
  const int64_t n = Sum(sizes);
  for (int w : {1, 2, 5}) {
    for (int s : {1, 2, 3, 7}) {
      auto p = PredictStep(Input(CostMode::kPs, w, s, sizes));
      ASSERT_TRUE(p.ok()) << p.status();
      ExpectNear(p->worker.sent, 4.0 * n, 1e-3);
      ExpectNear(p->worker.received, 4.0 * n, 1e-3);
      ASSERT_EQ(p->shards.size(), static_cast<size_t>(s));
      int64_t shard_received = 0, shard_sent = 0;
      for (const RoleBytes& b : p->shards) {
        shard_received += b.received;
        shard_sent += b.sent;
        // Balanced by bytes: every shard holds about n/s elements.
        ExpectNear(b.received, 4.0 * n * w / s, 2e-3);
      }
      // Every byte a worker sends, some shard receives.
      EXPECT_EQ(shard_received, w * p->worker.sent);
      EXPECT_EQ(shard_sent, w * p->worker.received);
    }
  }
}

TEST(CostModelTest, RingMovesTwoTimesWMinusOneOverWOfTheModel) {
  const std::vector<int64_t> sizes = {7000001, 3, 99991};
  const int64_t n = Sum(sizes);
  for (int w : {2, 3, 4, 8, 13}) {
    CostInput in = Input(CostMode::kRing, w, 1, sizes);
    in.bucket_elements = 1 << 20;  // several buckets
    auto p = PredictStep(in);
    ASSERT_TRUE(p.ok()) << p.status();
    ExpectNear(p->worker.sent, 2.0 * (w - 1) / w * 4 * n, 2e-3);
    EXPECT_EQ(p->worker.sent, p->worker.received);
    EXPECT_TRUE(p->shards.empty());
  }
  auto alone = PredictStep(Input(CostMode::kRing, 1, 1, sizes));
  ASSERT_TRUE(alone.ok());
  EXPECT_EQ(alone->worker.sent, 0);
  EXPECT_EQ(alone->comm_seconds, 0);
}

TEST(CostModelTest, CompressionShrinksPushesButNotPulls) {
  const std::vector<int64_t> sizes = {1 << 22};
  CostInput in = Input(CostMode::kPs, 2, 2, sizes);
  auto fp32 = PredictStep(in);
  in.compression.encoding = GradientEncoding::kFp16;
  auto fp16 = PredictStep(in);
  in.compression = {GradientEncoding::kTopK, 0.01};
  auto topk = PredictStep(in);
  ASSERT_TRUE(fp32.ok() && fp16.ok() && topk.ok());
  ExpectNear(fp16->worker.sent, fp32->worker.sent / 2.0, 1e-3);
  EXPECT_EQ(fp16->worker.received, fp32->worker.received);  // weights stay fp32
  // Top-k keeps 1% of the elements at 8 bytes each (index + value).
  ExpectNear(topk->worker.sent, 0.01 * (1 << 22) * 8, 1e-2);

  in = Input(CostMode::kRing, 4, 1, sizes);
  auto ring32 = PredictStep(in);
  in.compression.encoding = GradientEncoding::kBf16;
  auto ring16 = PredictStep(in);
  ASSERT_TRUE(ring32.ok() && ring16.ok());
  ExpectNear(ring16->worker.sent, ring32->worker.sent / 2.0, 1e-3);
  // Ring top-k: a sparse all-gather, W-1 sets of 8k bytes per rank.
  in.compression = {GradientEncoding::kTopK, 0.01};
  auto ring_topk = PredictStep(in);
  ASSERT_TRUE(ring_topk.ok());
  ExpectNear(ring_topk->worker.sent, 3 * 0.01 * (1 << 22) * 8, 1e-2);
}

TEST(CostModelTest, PsTimeIsTheBusierEndOfEachPhase) {
  const std::vector<int64_t> sizes = {1 << 24};  // 64 MiB
  const double n_bytes = 4.0 * (1 << 24);
  CostInput in = Input(CostMode::kPs, 4, 4, sizes);
  in.bandwidth_bytes_per_second = 1e9;
  auto balanced = PredictStep(in);
  ASSERT_TRUE(balanced.ok());
  // W == S: worker and shard links carry the same bytes. The worker sends
  // the slices one after another (one tensor, in flat order), and a shard's
  // link takes each of its chunks from all 4 workers: the shards have the
  // step at 1, 1.25, 1.5 and 1.75 N/B, and each then sends its quarter to
  // 4 workers (N/B on its link): the last slice is in at 2.75 N/B.
  EXPECT_NEAR(balanced->comm_seconds, 2.75 * n_bytes / 1e9,
              n_bytes / 1e9 * 1e-2);
  in.shards = 1;  // one shard receives every worker's whole gradient
  auto hot = PredictStep(in);
  ASSERT_TRUE(hot.ok());
  EXPECT_NEAR(hot->comm_seconds, 2 * 4 * n_bytes / 1e9,
              2 * 4 * n_bytes / 1e9 * 1e-3);
  EXPECT_EQ(hot->bottleneck, "shard link");
  // Double the bandwidth, half the time.
  in.bandwidth_bytes_per_second = 2e9;
  auto fast = PredictStep(in);
  ASSERT_TRUE(fast.ok());
  EXPECT_NEAR(fast->comm_seconds, hot->comm_seconds / 2,
              hot->comm_seconds * 1e-3);
  // Latency adds one message each way: the push's last chunk, and the
  // pulled weights (the pull was asked for ahead, its request is off the
  // path).
  in.latency_seconds = 0.01;
  auto slow = PredictStep(in);
  ASSERT_TRUE(slow.ok());
  EXPECT_NEAR(slow->comm_seconds - fast->comm_seconds, 0.02, 1e-9);
}

// Pulls overlap the pushes to later shards, but with a shard's step applied
// as a whole a shard's link must first take its slice from every worker
// (W x N/S) and then send it back to every worker: with the worker sending
// the shards' chunks one shard after another, shard k of S has the step at
// (k + W) / S x N/B and the last slice is in at 1 + (2W - 1) / S x N/B.
// The ring's 2(W - 1)/W x N/B is beaten only with many more shards than
// workers (BytePS's N/B needs each chunk applied and pulled on its own).
TEST(CostModelTest, PullsOverlapPushesAsShardsGrow) {
  const std::vector<int64_t> sizes(64, 1 << 16);  // 16 MiB in 64 tensors
  const double n_bytes = 4.0 * 64 * (1 << 16);
  CostInput in = Input(CostMode::kPs, 2, 1, sizes);
  in.bandwidth_bytes_per_second = 1e9;
  in.update_seconds_per_element = 0;
  std::vector<double> comm;
  for (int shards : {1, 2, 4, 8}) {
    in.shards = shards;
    auto p = PredictStep(in);
    ASSERT_TRUE(p.ok());
    comm.push_back(p->comm_seconds);
    const double expected = 1.0 + 3.0 / shards;  // W = 2
    EXPECT_NEAR(p->comm_seconds, expected * n_bytes / 1e9, n_bytes / 1e9 * 1e-2)
        << shards << " shards";
  }
  EXPECT_GT(comm[0], comm[1]);
  EXPECT_GT(comm[1], comm[3]);
  in.workers = 4;
  auto ps_vs_ring = [&](int shards) {
    CostInput ps_in = in;
    ps_in.shards = shards;
    auto ps = PredictStep(ps_in);
    ps_in.mode = CostMode::kRing;
    auto ring = PredictStep(ps_in);
    EXPECT_TRUE(ps.ok() && ring.ok());
    return ps->comm_seconds / ring->comm_seconds;
  };
  EXPECT_GT(ps_vs_ring(4), 1.0);   // 2.75 against 1.5
  EXPECT_LT(ps_vs_ring(32), 1.0);  // 1.22 against 1.5
  // A shard's update time delays its slice's pull.
  in.shards = 4;
  auto ps = PredictStep(in);
  in.update_seconds_per_element = 1e-8;
  auto slow_update = PredictStep(in);
  ASSERT_TRUE(ps.ok() && slow_update.ok());
  EXPECT_GT(slow_update->comm_seconds, ps->comm_seconds);
}

// Partitions (K logical shards per shard process, interleaved) let each
// partition's pull run while later partitions' pushes stream: each direction
// of every link is busy at once, and a step tends to max(N/B, W N/(S B)),
// the busier of the worker's and the shard process's link, plus one
// partition's round. With S = W that is about N/B: below the ring's
// 2(W - 1)/W x N/B, which per-shard finalize (K = 1) never reaches at S <= W.
TEST(CostModelTest, PartitionsOverlapPullsWithPushesOnEveryLink) {
  const std::vector<int64_t> sizes(64, 1 << 16);  // 16 MiB in 64 tensors
  const double n_seconds = 4.0 * 64 * (1 << 16) / 1e9;
  CostInput in = Input(CostMode::kPs, 4, 1, sizes);
  in.bandwidth_bytes_per_second = 1e9;
  CostInput ring_in = in;
  ring_in.mode = CostMode::kRing;
  auto ring = PredictStep(ring_in);
  ASSERT_TRUE(ring.ok());
  for (int shards : {1, 2, 4}) {
    in.shards = shards;
    in.partitions = 1;
    auto whole = PredictStep(in);
    in.partitions = 16;
    auto partitioned = PredictStep(in);
    ASSERT_TRUE(whole.ok() && partitioned.ok());
    const double bound = std::max(1.0, 4.0 / shards) * n_seconds;
    EXPECT_GE(partitioned->comm_seconds, bound) << shards << " shards";
    EXPECT_LT(partitioned->comm_seconds, 1.15 * bound) << shards << " shards";
    EXPECT_LT(partitioned->comm_seconds, 0.75 * whole->comm_seconds);
    // The same bytes, but for a header and a pull request per partition;
    // the processes' links carry all their partitions.
    ExpectNear(partitioned->worker.sent,
               static_cast<double>(whole->worker.sent), 1e-3);
    ASSERT_EQ(partitioned->shards.size(), static_cast<size_t>(shards));
  }
  // The crossover: with S = W the partitioned PS beats the ring, the
  // whole-slice PS does not.
  in.shards = 4;
  in.partitions = 1;
  EXPECT_GT(PredictStep(in)->comm_seconds, ring->comm_seconds);
  in.partitions = 16;
  EXPECT_LT(PredictStep(in)->comm_seconds, 0.8 * ring->comm_seconds);
  in.partitions = 0;
  EXPECT_THAT(std::string(PredictStep(in).status().message()),
              HasSubstr("partitions >= 1"));
}

TEST(CostModelTest, RingTimeIsBandwidthPlusTwoWMinusOneLatencies) {
  const std::vector<int64_t> sizes = {1 << 22};
  CostInput in = Input(CostMode::kRing, 4, 1, sizes);
  in.bandwidth_bytes_per_second = 1e9;
  in.latency_seconds = 0.001;
  auto p = PredictStep(in);
  ASSERT_TRUE(p.ok());
  const double expected = 2.0 * 3 / 4 * 4 * (1 << 22) / 1e9 + 6 * 0.001;
  EXPECT_NEAR(p->comm_seconds, expected, expected * 1e-3);
  EXPECT_NEAR(p->step_seconds, p->comm_seconds, 1e-12);  // no compute
}

// Members on one host: the same bytes over shared-memory links of their own
// bandwidth and no message latency; PS keeps the network terms.
TEST(CostModelTest, RingOnOneHostIsPricedAtItsSharedMemoryLinks) {
  const std::vector<int64_t> sizes = {1 << 22};
  CostInput in = Input(CostMode::kRing, 4, 1, sizes);
  in.bandwidth_bytes_per_second = 1e9;
  in.latency_seconds = 0.001;
  in.same_host_link_bytes_per_second = 5e9;
  auto ring = PredictStep(in);
  ASSERT_TRUE(ring.ok());
  const double expected = 2.0 * 3 / 4 * 4 * (1 << 22) / 5e9;
  EXPECT_NEAR(ring->comm_seconds, expected, expected * 1e-3);
  EXPECT_EQ(ring->bottleneck, "shared-memory link");
  in.mode = CostMode::kPs;
  auto ps = PredictStep(in);
  in.same_host_link_bytes_per_second = 0;
  auto ps_network = PredictStep(in);
  ASSERT_TRUE(ps.ok() && ps_network.ok());
  EXPECT_EQ(ps->comm_seconds, ps_network->comm_seconds);
  in.same_host_link_bytes_per_second = -1;
  EXPECT_TRUE(absl::IsInvalidArgument(PredictStep(in).status()));
}

// Sharded optimizer state: the same bytes and link time as the
// all-reduce, but the params' all-gather (half of it) follows backward.
TEST(CostModelTest, ShardedRingExposesTheParamsGatherAfterBackward) {
  const std::vector<int64_t> sizes = {1 << 20, 1 << 20, 1 << 20, 1 << 20};
  CostInput in = Input(CostMode::kRing, 4, 1, sizes);
  in.bandwidth_bytes_per_second = 1e9;
  in.latency_seconds = 0.001;
  in.bucket_elements = 1 << 20;
  in.compute_seconds = 100;  // backward hides every bucket but the last
  auto plain = PredictStep(in);
  in.shard_optimizer_state = true;
  auto sharded = PredictStep(in);
  ASSERT_TRUE(plain.ok() && sharded.ok());
  ExpectNear(sharded->worker.sent, static_cast<double>(plain->worker.sent),
             1e-3);
  // Link time: 4 reduce-scatters of 1 Mi floats and one all-gather of 4
  // Mi, (W-1)/W of each over every link, 3 latencies each.
  const double gather = 3.0 / 4 * 4 * (4 << 20) / 1e9 + 3 * 0.001;
  const double scatter = 3.0 / 4 * 4 * (1 << 20) / 1e9 + 3 * 0.001;
  EXPECT_NEAR(sharded->comm_seconds, 4 * scatter + gather, 1e-6);
  // Exposed: the last bucket's reduce-scatter, then the whole gather.
  EXPECT_NEAR(sharded->exposed_comm_seconds, scatter + gather, 1e-6);
  EXPECT_GT(sharded->exposed_comm_seconds, plain->exposed_comm_seconds);
}

TEST(CostModelTest, BackwardHidesCommunicationButNeverMoreThanItLasts) {
  const std::vector<int64_t> sizes = {1 << 20, 1 << 20, 1 << 20, 1 << 20};
  for (CostMode mode : {CostMode::kPs, CostMode::kRing}) {
    CostInput in = Input(mode, 4, 2, sizes);
    in.bandwidth_bytes_per_second = 1e9;
    in.bucket_elements = 1 << 20;
    in.compute_seconds = 0;
    auto none = PredictStep(in);
    in.compute_seconds = 0.3;
    auto some = PredictStep(in);
    in.compute_seconds = 100;
    auto lots = PredictStep(in);
    ASSERT_TRUE(none.ok() && some.ok() && lots.ok());
    // Without compute nothing hides the communication.
    EXPECT_NEAR(none->exposed_comm_seconds, none->comm_seconds,
                none->comm_seconds * 1e-6);
    EXPECT_LT(some->exposed_comm_seconds, some->comm_seconds);
    EXPECT_GT(some->step_seconds, 0.3);
    // With a very long backward only what follows the last gradient shows:
    // ring the last bucket, PS the last tensor's push and the whole pull.
    EXPECT_LT(lots->exposed_comm_seconds, none->comm_seconds);
    EXPECT_GT(lots->exposed_comm_seconds, 0);
  }
}

TEST(CostModelTest, OverheadAddsToTheExchangeInBothModes) {
  const std::vector<int64_t> sizes = {1 << 20};
  for (CostMode mode : {CostMode::kPs, CostMode::kRing}) {
    CostInput in = Input(mode, 2, 2, sizes);
    in.bandwidth_bytes_per_second = 1e9;
    auto bare = PredictStep(in);
    in.overhead_seconds = 0.001;  // below the transfer time
    auto small = PredictStep(in);
    in.overhead_seconds = 1.0;  // far above any transfer
    auto large = PredictStep(in);
    ASSERT_TRUE(bare.ok() && small.ok() && large.ok());
    EXPECT_NEAR(small->step_seconds, bare->step_seconds + 0.001, 1e-9);
    EXPECT_NEAR(small->comm_seconds, bare->comm_seconds + 0.001, 1e-9);
    EXPECT_NEAR(large->step_seconds, bare->step_seconds + 1.0, 1e-9);
    EXPECT_NE(large->bottleneck, bare->bottleneck);
  }
}

TEST(CostModelTest, ColocatedPsWithWShardsMatchesRingBytes) {
  const std::vector<int64_t> sizes = {1 << 22};
  CostInput in = Input(CostMode::kPs, 4, 4, sizes);
  in.colocated = true;
  in.bandwidth_bytes_per_second = 1e9;
  auto colocated = PredictStep(in);
  in.mode = CostMode::kRing;
  auto ring = PredictStep(in);
  ASSERT_TRUE(colocated.ok() && ring.ok());
  // (W-1)/W of the model leaves each host per phase, as in a ring.
  ExpectNear(colocated->worker.sent, ring->worker.sent / 2.0, 1e-2);
  // In units of one chunk (N/16) at B: a worker's pushes leave its uplink
  // at 0.75 a chunk (its own shard's quarter stays home) and end at 12; a
  // shard takes each chunk from the 3 other workers (3 each), so the
  // shards have the step at 12, 15, 18, 21. Each host's uplink then sends
  // its shard's slice (4) to 3 workers: from 12 (after its worker's
  // pushes) the slices are out at 24, 27, 30, 33; each worker's downlink,
  // free from 21 (its shard's pushes in), takes 3 of each: 24, 27, 30, 33.
  // The last slice is in at 33, against the ring's 24.
  EXPECT_NEAR(colocated->comm_seconds, 33.0 / 24.0 * ring->comm_seconds,
              ring->comm_seconds * 2e-2);
  in.mode = CostMode::kPs;
  in.shards = 2;
  EXPECT_FALSE(PredictStep(in).ok());
}

// An overhead both modes pay moves no crossover: the size and shard
// crossovers are the link's and the latency's alone.
TEST(CostModelTest, SharedOverheadMovesNoCrossover) {
  CostInput in = Input(CostMode::kPs, 4, 4, {1 << 20});
  in.bandwidth_bytes_per_second = 1e9;
  in.latency_seconds = 50e-6;
  auto bare = FindCrossover(in);
  in.overhead_seconds = 0.1;
  auto loaded = FindCrossover(in);
  ASSERT_TRUE(bare.ok() && loaded.ok());
  EXPECT_EQ(loaded->min_shards_ps_beats_ring, bare->min_shards_ps_beats_ring);
  EXPECT_EQ(loaded->params_ps_beats_ring_below,
            bare->params_ps_beats_ring_below);
  EXPECT_EQ(loaded->params_ps_beats_ring_from, bare->params_ps_beats_ring_from);
  EXPECT_EQ(loaded->sizes_ps_wins, bare->sizes_ps_wins);
  EXPECT_GT(bare->min_shards_ps_beats_ring, 0);
}

TEST(CostModelTest, CrossoversFollowLatencyAndModelSize) {
  // Latency-bound: a small model over a slow-to-answer network; ring's
  // 2(W-1) latencies lose to PS's 3 once there are enough shards.
  CostInput in = Input(CostMode::kPs, 8, 1, {1000});
  in.bandwidth_bytes_per_second = 1.25e9;
  in.latency_seconds = 0.001;
  auto cross = FindCrossover(in);
  ASSERT_TRUE(cross.ok());
  EXPECT_EQ(cross->min_shards_ps_beats_ring, 1);
  // Big model, fast network: one shard carries every worker's gradient and
  // loses to the ring; PS wins once each shard's link carries little
  // enough: about W (2W - 1) / (W - 2) = 20 shards for 8 workers...
  in.tensor_sizes = {100'000'000};
  in.latency_seconds = 50e-6;
  cross = FindCrossover(in);
  ASSERT_TRUE(cross.ok());
  EXPECT_GT(cross->min_shards_ps_beats_ring, 8);
  EXPECT_LE(cross->min_shards_ps_beats_ring, 24);
  // ...and PS wins again once the model is small enough.
  ASSERT_GT(cross->params_ps_beats_ring_below, 0);
  CostInput small = in;
  small.tensor_sizes = {cross->params_ps_beats_ring_below / 4};
  small.mode = CostMode::kPs;
  auto ps = PredictStep(small);
  small.mode = CostMode::kRing;
  auto ring = PredictStep(small);
  ASSERT_TRUE(ps.ok() && ring.ok());
  EXPECT_LT(ps->step_seconds, ring->step_seconds);
}

// The workers crossover is a range: partitioned shards win from a few
// workers, but W workers load each shard's link W-fold, so the ring, whose
// cost per worker stays below 2N/B, wins again further on.
TEST(CostModelTest, WorkersCrossoverIsTheRangeWherePsWins) {
  CostInput in = Input(CostMode::kPs, 4, 4, std::vector<int64_t>(8, 1 << 18));
  in.partitions = 8;
  in.bandwidth_bytes_per_second = 25e6;
  in.latency_seconds = 50e-6;
  auto cross = FindCrossover(in);
  ASSERT_TRUE(cross.ok());
  const int from = cross->min_workers_ps_beats_ring;
  const int to = cross->max_workers_ps_beats_ring;
  ASSERT_GE(from, 2);
  ASSERT_GE(to, from);
  ASSERT_LT(to, 256) << "the ring must win again with many workers";
  auto ps_wins = [&](int workers) {
    CostInput at = in;
    at.workers = workers;
    at.mode = CostMode::kPs;
    auto ps = PredictStep(at);
    at.mode = CostMode::kRing;
    auto ring = PredictStep(at);
    EXPECT_TRUE(ps.ok() && ring.ok());
    return ps->step_seconds < ring->step_seconds;
  };
  if (from > 2) {
    EXPECT_FALSE(ps_wins(from - 1));
  }
  for (int w = from; w <= to; ++w) EXPECT_TRUE(ps_wins(w)) << w;
  EXPECT_FALSE(ps_wins(to + 1));
}

TEST(CostModelTest, BadInputIsRejectedWithAReason) {
  CostInput in = Input(CostMode::kPs, 0, 1, {10});
  EXPECT_THAT(std::string(PredictStep(in).status().message()),
              HasSubstr("workers"));
  in = Input(CostMode::kPs, 2, 0, {10});
  EXPECT_FALSE(PredictStep(in).ok());
  in = Input(CostMode::kRing, 2, 1, {});
  EXPECT_FALSE(PredictStep(in).ok());
  in = Input(CostMode::kRing, 2, 1, {-1});
  EXPECT_FALSE(PredictStep(in).ok());
  in = Input(CostMode::kRing, 2, 1, {10});
  in.latency_seconds = -1;
  EXPECT_FALSE(PredictStep(in).ok());
  in = Input(CostMode::kRing, 2, 1, {10});
  in.compression = {GradientEncoding::kTopK, 0};
  EXPECT_FALSE(PredictStep(in).ok());
}

TEST(CostModelTest, ResolvesPresetsAndSpecs) {
  EXPECT_EQ(*ResolveModel("fashion-mlp"), "784-256-128-10");
  EXPECT_EQ(*ResolveModel("10-5-2"), "10-5-2");
  EXPECT_THAT(std::string(ResolveModel("resnet-51").status().message()),
              HasSubstr("resnet50"));
}

TEST(CostModelTest, PresetsHaveTheAdvertisedSizes) {
  const auto params = [](const std::string& name) {
    return Sum(*ModelTensorSizes(*ResolveModel(name)));
  };
  // The layer-library presets resolve as themselves.
  EXPECT_EQ(*ResolveModel("convnet"), "convnet");
  EXPECT_EQ(params("convnet"), 1199882);
  EXPECT_EQ(params("mlp"), params("fashion-mlp"));
  EXPECT_EQ(params("fashion-mlp"),
            784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
  EXPECT_NEAR(params("resnet50"), 25.5e6, 0.5e6);
  EXPECT_NEAR(params("bert-base"), 110e6, 2e6);
}

// A PyTorch model's weights (a --model external job's export): its
// tensors in file order are the sizes, BatchNorm's integer counter included.
TEST(CostModelTest, TakesAPyTorchModelsWeightsFile) {
  const std::string dir =
      testing::TempDir() + "/cost_weights_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  SafetensorsFile file;
  const auto add = [&](std::string name, std::vector<int64_t> shape,
                       SafetensorsDtype dtype) {
    SafetensorsTensor& t = file.tensors.emplace_back();
    t.name = std::move(name);
    t.dtype = dtype;
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    t.shape = std::move(shape);
    t.values.assign(n, 0.0f);
  };
  add("conv.weight", {4, 1, 3, 3}, SafetensorsDtype::kF32);
  add("bn.num_batches_tracked", {}, SafetensorsDtype::kI64);
  add("fc.bias", {10}, SafetensorsDtype::kF32);
  const absl::StatusOr<std::string> bytes = EncodeSafetensors(file);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  const std::string weights = JoinPath(dir, "model.safetensors");
  ASSERT_TRUE(PosixFileSystem()->WriteFileAtomically(weights, *bytes).ok());
  for (const std::string& spec : {weights, dir}) {
    EXPECT_EQ(*ResolveModel(spec), spec);
    const absl::StatusOr<std::vector<int64_t>> sizes = ModelTensorSizes(spec);
    ASSERT_TRUE(sizes.ok()) << sizes.status();
    EXPECT_EQ(*sizes, (std::vector<int64_t>{36, 1, 10})) << spec;
    EXPECT_TRUE(IsPyTorchModelWeights(spec)) << spec;
  }
  EXPECT_FALSE(IsPyTorchModelWeights("784-256-128-10"));
  EXPECT_FALSE(ModelTensorSizes(dir + "/missing.safetensors").ok());
  ASSERT_TRUE(
      PosixFileSystem()->WriteFileAtomically(weights, "not safetensors").ok());
  const absl::Status bad = ModelTensorSizes(weights).status();
  EXPECT_TRUE(absl::IsInvalidArgument(bad)) << bad;
  EXPECT_THAT(std::string(bad.message()), HasSubstr(weights));
  std::filesystem::remove_all(dir);
}

// --compute-from: a job's measured compute per worker step (ferry local's
// summary) is the step's compute; a file without it, or both flags, are
// refused.
TEST(CostModelTest, ComputeComesFromAJobsSummary) {
  const std::string path = testing::TempDir() + "/cost_summary_" +
                           std::to_string(::getpid()) + ".json";
  const auto with = [&](const std::string& json, const std::string& compute) {
    EXPECT_TRUE(PosixFileSystem()->WriteFileAtomically(path, json).ok());
    CostFlags flags;
    flags.compute = compute;
    flags.compute_from = path;
    CostInput in;
    const absl::Status status = ParseCostTimes(flags, in);
    return std::make_pair(status, in.compute_seconds);
  };
  const auto [ok, seconds] =
      with(R"({"window_compute_seconds_per_worker_step": 0.31})", "0");
  ASSERT_TRUE(ok.ok()) << ok;
  EXPECT_DOUBLE_EQ(seconds, 0.31);
  EXPECT_TRUE(absl::IsInvalidArgument(
      with(R"({"window_compute_seconds_per_worker_step": 0.31})", "20ms")
          .first));
  EXPECT_TRUE(absl::IsInvalidArgument(with(R"({"steps": 3})", "0").first));
  EXPECT_TRUE(absl::IsInvalidArgument(
      with(R"({"window_compute_seconds_per_worker_step": 0})", "0").first));
  EXPECT_TRUE(absl::IsInvalidArgument(with("not json", "0").first));
  std::filesystem::remove(path);
  CostFlags missing;
  missing.compute_from = path;
  CostInput in;
  EXPECT_TRUE(absl::IsNotFound(ParseCostTimes(missing, in)));
}

}  // namespace
}  // namespace ferry
