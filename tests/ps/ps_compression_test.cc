// Compressed pushes end to end: GrpcParameterClient -> real PsService and
// PsShard on loopback, with fp16, bf16 and top-k chunks; checks the applied
// update and the bytes on the wire.
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/gradient_codec.h"
#include "common/sharding.h"
#include "gtest/gtest.h"
#include "ps/ps_client.h"
#include "ps/ps_server.h"
#include "ps/ps_shard.h"

namespace ferry {
namespace {

constexpr int kShards = 2;
const std::vector<int64_t> kTensors = {1000, 37, 501};  // 1538 elements

struct Cluster {
  std::vector<std::unique_ptr<PsShard>> shards;
  std::vector<PsServer> servers;
  std::vector<std::string> addresses;
  std::vector<Chunk> chunks;
  int64_t total = 0;
};

// Two sync shards, plain SGD with lr 1: an update is params -= grad / samples.
void StartCluster(Cluster* c) {
  c->total = 0;
  for (int64_t n : kTensors) c->total += n;
  auto chunks = PlaceChunks(kTensors, kShards, /*max_chunk_elements=*/300);
  ASSERT_TRUE(chunks.ok()) << chunks.status();
  c->chunks = *chunks;
  for (int s = 0; s < kShards; ++s) {
    PsShardConfig config;
    config.job_id = "job";
    config.shard_id = s;
    config.num_shards = kShards;
    config.tensor_sizes = kTensors;
    config.max_chunk_elements = 300;
    config.optimizer.lr = 1.0;
    const FlatRange range = ShardRange(c->total, kShards, s);
    config.initial_slice.assign(range.end - range.begin, 0.0f);
    auto shard = PsShard::Create(config);
    ASSERT_TRUE(shard.ok()) << shard.status();
    c->shards.push_back(*std::move(shard));
    auto server = StartPsServer(c->shards.back().get(), "127.0.0.1:0");
    ASSERT_TRUE(server.ok()) << server.status();
    c->addresses.push_back(absl::StrCat("127.0.0.1:", server->port));
    c->servers.push_back(*std::move(server));
  }
}

std::unique_ptr<GrpcParameterClient> Client(const Cluster& c,
                                            GradientCompression comp) {
  GrpcParameterClientOptions options;
  options.job_id = "job";
  options.worker_id = "w0";
  options.shard_addresses = c.addresses;
  options.chunks = c.chunks;
  options.rpc_timeout = absl::Seconds(10);
  options.compression = comp;
  auto client = GrpcParameterClient::Create(options);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

std::vector<float> Gradient(int64_t n) {
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> g(n);
  for (float& v : g) v = dist(rng);
  return g;
}

// Pushes `grad` for `step` in two ranges (reverse order), finalizes the step
// on every shard and pulls the weights.
std::vector<float> PushStep(Cluster& c, GrpcParameterClient& client,
                            int64_t step, const std::vector<float>& grad) {
  PushInfo info;
  info.step = step;
  info.num_samples = 1;
  info.base_version = step;
  auto session = client.BeginPush(info);
  EXPECT_TRUE(session.ok());
  const int64_t half = c.total / 2 + 3;
  EXPECT_TRUE((*session)->Ready(half, c.total - half, grad.data() + half).ok());
  EXPECT_TRUE((*session)->Ready(0, half, grad.data()).ok());
  const absl::Status pushed = (*session)->Finish();
  EXPECT_TRUE(pushed.ok()) << pushed;
  for (auto& shard : c.shards) {
    const PsContributor who{"w0", 1};
    auto v = shard->FinalizeStep("job", step, {&who, 1}, 0);
    EXPECT_TRUE(v.ok()) << v.status();
  }
  std::vector<float> params(c.total);
  auto version = client.Pull(step + 1, params.data());
  EXPECT_TRUE(version.ok()) << version.status();
  return params;
}

TEST(PsCompressionTest, ShardsApplyTheDecodedGradient) {
  const GradientCompression fp32{GradientEncoding::kFp32, 0, false};
  int64_t fp32_bytes = 0;
  {
    Cluster c;
    StartCluster(&c);
    auto client = Client(c, fp32);
    ASSERT_NE(client, nullptr);
    const std::vector<float> g = Gradient(c.total);
    const std::vector<float> params = PushStep(c, *client, 0, g);
    for (int64_t i = 0; i < c.total; ++i) ASSERT_EQ(params[i], -g[i]);
    fp32_bytes = client->bytes().sent;
  }
  for (GradientCompression comp :
       {GradientCompression{GradientEncoding::kFp16, 0, true},
        GradientCompression{GradientEncoding::kBf16, 0, true},
        GradientCompression{GradientEncoding::kTopK, 0.05, true}}) {
    SCOPED_TRACE(CompressionName(comp));
    Cluster c;
    StartCluster(&c);
    auto client = Client(c, comp);
    ASSERT_NE(client, nullptr);
    const std::vector<float> g = Gradient(c.total);
    const std::vector<float> params = PushStep(c, *client, 0, g);
    int64_t payload = 0;
    for (const Chunk& chunk : c.chunks) {
      payload += EncodedBytes(comp.encoding, chunk.length, comp.topk_ratio);
      // Exactly what the chunk's encoding delivers, nothing else.
      std::string bytes;
      Encode(comp.encoding, g.data() + chunk.flat_offset, chunk.length,
             comp.topk_ratio, &bytes);
      std::vector<float> sent(chunk.length);
      ASSERT_TRUE(Decode(comp.encoding, bytes, chunk.length, sent.data()).ok());
      for (int64_t i = 0; i < chunk.length; ++i) {
        ASSERT_EQ(params[chunk.flat_offset + i], -sent[i])
            << "element " << chunk.flat_offset + i;
      }
    }
    // The wire bytes shrink by the payload saved, up to the few bytes per
    // chunk message of length varints and the encoding field.
    const int64_t sent = client->bytes().sent;
    const int64_t saved = fp32_bytes - sent;
    EXPECT_NEAR(static_cast<double>(saved),
                static_cast<double>(4 * c.total - payload),
                8.0 * static_cast<double>(c.chunks.size()));
    if (comp.encoding == GradientEncoding::kTopK) continue;

    // A second push carries what the first rounded away: after two steps of
    // the same gradient the applied total is within about one step's error
    // of 2g (without feedback the errors would add up).
    const std::vector<float> two = PushStep(c, *client, 1, g);
    double err_one = 0, err_two = 0;
    for (int64_t i = 0; i < c.total; ++i) {
      err_one += std::fabs(params[i] + g[i]);
      err_two += std::fabs(two[i] + 2 * g[i]);
    }
    EXPECT_LE(err_two, err_one * 1.5 + 1e-6);
  }
}

// ReadyZeros (a pipeline stage's gradient outside its layers) with a lossy
// encoding and error feedback sends what Ready with zeros would: the
// chunks are encoded with their residual, not sent as flags, and the
// weights after two steps are the same bit for bit.
TEST(PsCompressionTest, ReadyZerosCarriesTheResidualAsZerosWould) {
  const GradientCompression fp16{GradientEncoding::kFp16, 0, true};
  std::vector<std::vector<float>> results;
  for (const bool declared_zeros : {true, false}) {
    Cluster c;
    StartCluster(&c);
    auto client = Client(c, fp16);
    ASSERT_NE(client, nullptr);
    const std::vector<float> g = Gradient(c.total);
    PushStep(c, *client, 0, g);  // leaves a residual everywhere
    PushInfo info;
    info.step = 1;
    info.num_samples = 1;
    info.base_version = 1;
    auto session = client->BeginPush(info);
    ASSERT_TRUE(session.ok());
    const int64_t cut = 1037;  // the first two tensors and part of the third
    const std::vector<float> zeros(cut, 0.0f);
    ASSERT_TRUE((declared_zeros ? (*session)->ReadyZeros(0, cut)
                                : (*session)->Ready(0, cut, zeros.data()))
                    .ok());
    ASSERT_TRUE((*session)->Ready(cut, c.total - cut, g.data() + cut).ok());
    ASSERT_TRUE((*session)->Finish().ok());
    for (auto& shard : c.shards) {
      const PsContributor who{"w0", 1};
      ASSERT_TRUE(shard->FinalizeStep("job", 1, {&who, 1}, 0).ok());
    }
    std::vector<float> params(c.total);
    ASSERT_TRUE(client->Pull(2, params.data()).ok());
    results.push_back(params);
  }
  EXPECT_EQ(results[0], results[1]);
}

TEST(PsCompressionTest, ShardRejectsMalformedEncodedChunks) {
  PsShardConfig config;
  config.job_id = "job";
  config.tensor_sizes = {4};
  config.optimizer.lr = 1.0;
  config.initial_slice.assign(4, 0.0f);
  auto shard = PsShard::Create(config);
  ASSERT_TRUE(shard.ok());
  PsPushHeader header{"job", "w0", 0, 0, 1, 0, {}};
  auto staging = (*shard)->BeginPush(header);
  ASSERT_TRUE(staging.ok());
  const std::string odd(7, '\0');
  absl::Status s = (*shard)->AddChunk(**staging, 0, GradientEncoding::kFp16,
                                      odd.data(), odd.size());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("chunk 0"), std::string::npos) << s;
  staging = (*shard)->BeginPush(header);
  ASSERT_TRUE(staging.ok());
  uint32_t bad_topk[2] = {9, 0};  // index 9 of a 4-element chunk
  s = (*shard)->AddChunk(**staging, 0, GradientEncoding::kTopK, bad_topk, 8);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  staging = (*shard)->BeginPush(header);
  ASSERT_TRUE(staging.ok());
  s = (*shard)->AddChunk(**staging, 0, static_cast<GradientEncoding>(42),
                         bad_topk, 8);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  // A valid fp16 chunk is accepted and committed.
  staging = (*shard)->BeginPush(header);
  ASSERT_TRUE(staging.ok());
  const float g[4] = {1.0f, -2.0f, 0.5f, 3.0f};
  std::string bytes;
  Encode(GradientEncoding::kFp16, g, 4, 0, &bytes);
  ASSERT_TRUE((*shard)
                  ->AddChunk(**staging, 0, GradientEncoding::kFp16,
                             bytes.data(), bytes.size())
                  .ok());
  EXPECT_TRUE((*shard)->CommitPush(*std::move(staging)).ok());
}

}  // namespace
}  // namespace ferry
