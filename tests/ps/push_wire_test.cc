// TakePushWire (ps/push_intake.h): a push stream's messages read from the
// slices gRPC received them in, the chunk's floats split anywhere across
// slices, staging exactly what protobuf's parse of the same bytes stages,
// and accepting a message exactly when protobuf accepts it.
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "ps/push_intake.h"
#include "tests/ps/ps_shard_testing.h"
#include "tests/testing/wire_mutations.h"

namespace ferry {
namespace {

using testutil::SlicedBuffer;

std::string HeaderMessage(const std::string& worker) {
  v1::PushRequest m;
  v1::PushHeader* h = m.mutable_header();
  h->set_job_id("job");
  h->set_worker_id(worker);
  h->set_num_samples(1);
  return m.SerializeAsString();
}

constexpr int kChunkFloats = 40;

// One shard of one tensor of kChunkFloats elements in one chunk (id 0):
// large enough that gRPC keeps a message's slices apart (it merges tiny
// ones).
PsShardConfig OneChunkConfig(bool sum_on_arrival) {
  PsShardConfig config;
  config.job_id = "job";
  config.shard_id = 0;
  config.num_shards = 1;
  config.tensor_sizes = {kChunkFloats};
  config.max_chunk_elements = kChunkFloats;
  config.optimizer.kind = OptimizerKind::kSgd;
  config.optimizer.lr = 0.5;
  config.sum_on_arrival = sum_on_arrival;
  config.initial_slice.assign(kChunkFloats, 1.0f);
  return config;
}

// The chunk's message: element i is base + i / 8.
std::string ChunkMessage(float base) {
  std::vector<float> values(kChunkFloats);
  for (int i = 0; i < kChunkFloats; ++i) values[i] = base + 0.125f * i;
  v1::PushRequest m;
  m.set_chunk_id(0);
  m.set_data(std::string(reinterpret_cast<const char*>(values.data()),
                         values.size() * sizeof(float)));
  return m.SerializeAsString();
}

// One push of `messages` (the header's first) into a fresh shard, each
// through TakePushWire cut at `cuts`, or through protobuf's parse when
// `cuts` is null; then the push committed and the step finalized. The
// shard's parameters, or the first error.
absl::StatusOr<std::vector<float>> PushedParams(
    bool sum_on_arrival, const std::vector<std::string>& messages,
    const std::vector<size_t>* cuts) {
  std::unique_ptr<PsShard> shard = MakeShard(OneChunkConfig(sum_on_arrival));
  std::unique_ptr<PsPushStaging> staging;
  int64_t index = 0;
  for (const std::string& bytes : messages) {
    ++index;
    absl::Status taken;
    if (cuts == nullptr) {
      v1::PushRequest request;
      if (!request.ParseFromString(bytes)) {
        return absl::InvalidArgumentError("does not parse");
      }
      taken = TakePushMessage(*shard, request, staging);
    } else {
      grpc::ByteBuffer wire = SlicedBuffer(bytes, *cuts);
      taken = TakePushWire(*shard, wire, index, staging);
    }
    if (!taken.ok()) return taken;
  }
  RETURN_IF_ERROR(shard->CommitPush(std::move(staging)).status());
  RETURN_IF_ERROR(shard->FinalizeStep("job", 0, {{"w", 1}}, 0).status());
  return Params(*shard);
}

TEST(PushWireTest, ChunkSplitAnywhereStagesWhatProtobufStages) {
  const std::vector<std::string> messages = {HeaderMessage("w"),
                                             ChunkMessage(-2.5f)};
  for (const bool on_arrival : {false, true}) {
    const absl::StatusOr<std::vector<float>> expected =
        PushedParams(on_arrival, messages, nullptr);
    ASSERT_TRUE(expected.ok()) << expected.status();
    // Cut at every offset of the chunk message: floats split between
    // slices, the data's first byte alone, the key apart from the length.
    for (size_t c = 0; c <= messages[1].size(); ++c) {
      const std::vector<size_t> cuts = {c, c + 37};
      const absl::StatusOr<std::vector<float>> got =
          PushedParams(on_arrival, messages, &cuts);
      ASSERT_TRUE(got.ok()) << got.status() << " cut at " << c;
      EXPECT_EQ(*got, *expected)
          << "cut at " << c << " on arrival " << on_arrival;
    }
  }
}

TEST(PushWireTest, WrongSizesAndNonFiniteValuesAreRefusedFromSlicesToo) {
  std::string short_chunk = ChunkMessage(1.0f);
  short_chunk.resize(short_chunk.size() - 1);  // the data's length says more
  std::string nan_chunk;
  {
    v1::PushRequest m;
    ASSERT_TRUE(m.ParseFromString(ChunkMessage(1.0f)));
    std::string data = m.data();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(data.data() + 30 * sizeof(float), &nan, sizeof(nan));
    m.set_data(data);
    nan_chunk = m.SerializeAsString();
  }
  std::string odd_size;
  {
    v1::PushRequest m;
    m.set_chunk_id(0);
    m.set_data(std::string(kChunkFloats * sizeof(float) + 2, '\0'));
    odd_size = m.SerializeAsString();
  }
  const std::vector<size_t> cuts = {41, 83, 122};
  for (const std::string& bad : {short_chunk, nan_chunk, odd_size}) {
    const absl::StatusOr<std::vector<float>> got =
        PushedParams(false, {HeaderMessage("w"), bad}, &cuts);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument)
        << got.status();
  }
}

TEST(PushWireTest, RandomMutationsAgreeWithProtobuf) {
  const std::string header = HeaderMessage("w");
  const std::string base = ChunkMessage(1.5f);
  std::mt19937 rng(20261205);
  for (int round = 0; round < 2000; ++round) {
    const std::string bytes = testutil::MutatedBytes(base, rng, 3);
    const std::vector<size_t> cuts =
        testutil::RandomCuts(bytes.size(), rng, 40, 24, 40);
    const absl::StatusOr<std::vector<float>> expected =
        PushedParams(false, {header, bytes}, nullptr);
    const absl::StatusOr<std::vector<float>> got =
        PushedParams(false, {header, bytes}, &cuts);
    ASSERT_EQ(got.ok(), expected.ok())
        << "round " << round << ": " << got.status() << " vs "
        << expected.status();
    if (got.ok()) {
      EXPECT_EQ(*got, *expected) << "round " << round;
    }
  }
}

}  // namespace
}  // namespace ferry
