// Embedding rows end to end over real gRPC on loopback: two real PsShards
// with a SparseStore each behind PsService, driven by the real
// GrpcParameterClient (PushSession::AddRows, PullRows).
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/sharding.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps/ps_client.h"
#include "ps/ps_server.h"
#include "ps/ps_shard.h"
#include "ps/sparse_store.h"
#include "tests/testing/wait_until.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

constexpr int kShards = 2;
const std::vector<int64_t> kTensors = {3, 2};  // 5 dense elements

SparseStoreConfig Sparse() {
  SparseStoreConfig sparse;
  sparse.dims = {2, 3};
  sparse.optimizer.kind = RowOptimizerKind::kAdagrad;
  sparse.optimizer.lr = 0.5f;
  sparse.seed = 9;
  return sparse;
}

class PsRowsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto chunks = PlaceChunks(kTensors, kShards, 2);
    ASSERT_TRUE(chunks.ok());
    chunks_ = *chunks;
    std::vector<std::string> addresses;
    for (int s = 0; s < kShards; ++s) {
      PsShardConfig config;
      config.job_id = "job";
      config.shard_id = s;
      config.num_shards = kShards;
      config.tensor_sizes = kTensors;
      config.max_chunk_elements = 2;
      config.optimizer.lr = 0.1;
      config.initial_slice.assign(ShardRange(5, kShards, s).size(), 1.0f);
      config.sparse = Sparse();
      auto shard = PsShard::Create(config);
      ASSERT_TRUE(shard.ok()) << shard.status();
      shards_.push_back(*std::move(shard));
      auto server = StartPsServer(shards_.back().get());
      ASSERT_TRUE(server.ok()) << server.status();
      addresses.push_back(absl::StrCat("127.0.0.1:", server->port));
      servers_.push_back(*std::move(server));
    }
    a_ = Client("a", addresses);
    b_ = Client("b", addresses);
    auto whole = SparseStore::Create(Sparse());
    ASSERT_TRUE(whole.ok());
    reference_ = *std::move(whole);
  }

  std::unique_ptr<GrpcParameterClient> Client(
      const std::string& worker, const std::vector<std::string>& addresses) {
    GrpcParameterClientOptions options;
    options.job_id = "job";
    options.worker_id = worker;
    options.shard_addresses = addresses;
    options.chunks = chunks_;
    options.rpc_timeout = absl::Seconds(10);
    auto client = GrpcParameterClient::Create(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return *std::move(client);
  }

  // A sync push of step `step` with a zero dense gradient and `rows`.
  absl::Status Push(GrpcParameterClient& client, int64_t step, int64_t samples,
                    const std::vector<SparseRows>& rows,
                    const std::vector<PsContributor>& set) {
    PushInfo info;
    info.step = step;
    info.num_samples = samples;
    info.step_contributors = set;
    info.with_rows = true;
    auto session = client.BeginPush(info);
    if (!session.ok()) return session.status();
    const std::vector<float> dense(5, 0.0f);
    if (absl::Status s = (*session)->Ready(0, 5, dense.data()); !s.ok()) {
      return s;
    }
    if (absl::Status s = (*session)->AddRows(rows); !s.ok()) return s;
    return (*session)->Finish();
  }

  std::vector<float> Pull(GrpcParameterClient& client, int64_t version,
                          int32_t table, const std::vector<uint64_t>& ids) {
    std::vector<std::vector<float>> out;
    const RowRequest request{table, ids};
    auto got = client.PullRows(version, absl::MakeConstSpan(&request, 1), out);
    EXPECT_TRUE(got.ok()) << got.status();
    return out.empty() ? std::vector<float>{} : out[0];
  }

  // Bytes shard `s` received from workers, and bytes client `c` sent to it
  // (both count whole serialized messages).
  int64_t ReceivedBy(int s) {
    const PsShardInfo info = shards_[s]->Info();
    auto it = info.bytes_received.find("worker");
    return it == info.bytes_received.end() ? 0 : it->second;
  }
  int64_t SentTo(GrpcParameterClient& c, int s) {
    return c.peer_bytes()[absl::StrCat("ps", s)].sent;
  }

  // Waits until every shard received something since `received_before`
  // and everything `c` sent to it: the messages of an open push session
  // are on the shards (staged, not committed).
  absl::Status WaitForArrival(GrpcParameterClient& c,
                              const std::vector<int64_t>& received_before,
                              const std::vector<int64_t>& sent_before) {
    return testutil::WaitUntil("the push's messages on every shard", [&] {
      for (int s = 0; s < kShards; ++s) {
        const int64_t received = ReceivedBy(s) - received_before[s];
        if (received == 0 || received != SentTo(c, s) - sent_before[s]) {
          return false;
        }
      }
      return true;
    });
  }
  std::vector<int64_t> AllReceived() {
    std::vector<int64_t> out;
    for (int s = 0; s < kShards; ++s) out.push_back(ReceivedBy(s));
    return out;
  }
  std::vector<int64_t> AllSent(GrpcParameterClient& c) {
    std::vector<int64_t> out;
    for (int s = 0; s < kShards; ++s) out.push_back(SentTo(c, s));
    return out;
  }

  std::vector<float> Reference(int32_t table,
                               const std::vector<uint64_t>& ids) {
    std::vector<float> out(ids.size() * reference_->table(table).dim());
    EXPECT_TRUE(reference_->Read(table, ids, absl::MakeSpan(out)).ok());
    return out;
  }

  std::vector<Chunk> chunks_;
  std::vector<std::unique_ptr<PsShard>> shards_;
  std::vector<PsServer> servers_;
  std::unique_ptr<GrpcParameterClient> a_, b_;
  std::unique_ptr<SparseStore> reference_;
};

TEST_F(PsRowsTest, RowsSpreadOverTheShardsTrainLikeOneStore) {
  const std::vector<uint64_t> ids = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  // Both shards hold some of them.
  int on_zero = 0;
  for (uint64_t id : ids) on_zero += ShardOfRow(1, id, kShards) == 0;
  ASSERT_GT(on_zero, 0);
  ASSERT_LT(on_zero, static_cast<int>(ids.size()));
  EXPECT_EQ(Pull(*a_, 0, 1, ids), Reference(1, ids));

  const std::vector<PsContributor> set = {{"a", 2}, {"b", 1}};
  for (int64_t step = 0; step < 3; ++step) {
    SparseRows ra{1, {1, 3, 5, 7, 9}, {}}, rb{1, {2, 3, 10}, {}};
    for (size_t i = 0; i < 3 * ra.ids.size(); ++i) {
      ra.grads.push_back(0.1f * static_cast<float>(i + step));
    }
    for (size_t i = 0; i < 3 * rb.ids.size(); ++i) {
      rb.grads.push_back(-0.2f * static_cast<float>(i));
    }
    ASSERT_TRUE(Push(*a_, step, 2, {ra}, set).ok());
    ASSERT_TRUE(Push(*b_, step, 1, {rb}, set).ok());  // finalizes on push
    const std::vector<SparseRows> ca = {ra}, cb = {rb};
    const std::vector<const std::vector<SparseRows>*> both = {&ca, &cb};
    ASSERT_TRUE(reference_->ApplyStep(both, 3, step).ok());
  }
  const std::vector<float> pulled = Pull(*b_, 3, 1, ids);
  const std::vector<float> expected = Reference(1, ids);
  ASSERT_EQ(pulled.size(), expected.size());
  for (size_t i = 0; i < pulled.size(); ++i) {
    EXPECT_NEAR(pulled[i], expected[i], 1e-6) << i;
  }
  int64_t rows = 0;
  for (auto& shard : shards_) rows += shard->Info().sparse->total.rows;
  EXPECT_EQ(rows, 7);  // ids 1, 2, 3, 5, 7, 9, 10
  EXPECT_GT(a_->bytes().sent, 0);
}

// A push session whose commit waits for Finish (commit_at_finish), of one
// contributor whose commit applies the step.
PushInfo CommitAtFinishPush() {
  PushInfo info;
  info.num_samples = 1;
  info.with_rows = true;
  info.commit_at_finish = true;
  info.step_contributors = {{"a", 1}};
  return info;
}

// Sent, not committed: destroying the session cancels it everywhere. (Its
// own test: bytes of the cancelled streams may still be counted after it
// ends, so a later push in the same fixture could not be told apart by the
// byte counters.)
TEST_F(PsRowsTest, ADroppedCommitAtFinishSessionAppliesNothing) {
  const std::vector<float> dense(5, 0.0f);
  const std::vector<SparseRows> rows = {{0, {1, 2, 3}, std::vector<float>(6)}};
  {
    const std::vector<int64_t> received = AllReceived(), sent = AllSent(*a_);
    auto dropped = a_->BeginPush(CommitAtFinishPush());
    ASSERT_TRUE(dropped.ok());
    ASSERT_TRUE((*dropped)->Ready(0, 5, dense.data()).ok());
    ASSERT_TRUE((*dropped)->AddRows(rows).ok());
    const absl::Status arrived = WaitForArrival(*a_, received, sent);
    ASSERT_TRUE(arrived.ok()) << arrived;
    for (auto& shard : shards_) EXPECT_EQ(shard->version(), 0);
  }
  for (auto& shard : shards_) {
    EXPECT_EQ(shard->version(), 0);
    EXPECT_EQ(shard->Info().accepted_pushes, 0);
  }
}

TEST_F(PsRowsTest, CommitAtFinishHoldsEveryShardsCommitUntilFinish) {
  const PushInfo info = CommitAtFinishPush();
  const std::vector<float> dense(5, 0.0f);
  const std::vector<SparseRows> rows = {{0, {1, 2, 3}, std::vector<float>(6)}};
  const std::vector<int64_t> received = AllReceived(), sent = AllSent(*a_);
  auto held = a_->BeginPush(info);
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE((*held)->Ready(0, 5, dense.data()).ok());
  ASSERT_TRUE((*held)->AddRows(rows).ok());
  const absl::Status arrived = WaitForArrival(*a_, received, sent);
  ASSERT_TRUE(arrived.ok()) << arrived;
  for (auto& shard : shards_) EXPECT_EQ(shard->version(), 0);
  ASSERT_TRUE((*held)->Finish().ok());
  for (auto& shard : shards_) EXPECT_EQ(shard->version(), 1);
}

TEST_F(PsRowsTest, SessionMisuseIsRefused) {
  PushInfo info;
  info.num_samples = 1;
  auto no_rows = a_->BeginPush(info);
  ASSERT_TRUE(no_rows.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition((*no_rows)->AddRows({})));
  info.with_rows = true;
  auto twice = a_->BeginPush(info);
  ASSERT_TRUE(twice.ok());
  EXPECT_TRUE((*twice)->AddRows({}).ok());
  EXPECT_TRUE(absl::IsFailedPrecondition((*twice)->AddRows({})));
  auto uneven = a_->BeginPush(info);
  ASSERT_TRUE(uneven.ok());
  EXPECT_TRUE(
      absl::IsInvalidArgument((*uneven)->AddRows({{0, {1, 2}, {1, 2, 3}}})));
  auto missing = a_->BeginPush(info);
  ASSERT_TRUE(missing.ok());
  const std::vector<float> dense(5, 0.0f);
  ASSERT_TRUE((*missing)->Ready(0, 5, dense.data()).ok());
  const absl::Status finished = (*missing)->Finish();
  EXPECT_TRUE(absl::IsFailedPrecondition(finished));
  EXPECT_THAT(finished.message(), HasSubstr("without its rows"));
  for (auto& shard : shards_) EXPECT_EQ(shard->version(), 0);
}

TEST_F(PsRowsTest, ShardErrorsComeBackNamingTheShard) {
  const std::vector<PsContributor> set = {{"a", 1}};
  const absl::Status pushed = Push(*a_, 0, 1, {{7, {1}, {1, 1}}}, set);
  EXPECT_TRUE(absl::IsInvalidArgument(pushed)) << pushed;
  EXPECT_THAT(pushed.message(), HasSubstr("embedding table 7 does not exist"));
  EXPECT_THAT(pushed.message(), HasSubstr("ps shard"));
  std::vector<std::vector<float>> out;
  const std::vector<uint64_t> ids = {1, 2, 3};
  const RowRequest unknown{4, ids};
  auto got = a_->PullRows(0, absl::MakeConstSpan(&unknown, 1), out);
  EXPECT_TRUE(absl::IsInvalidArgument(got.status())) << got.status();
  EXPECT_THAT(got.status().message(), HasSubstr("table 4 does not exist"));
  // A version nobody makes: the deadline, not a hang.
  GrpcParameterClientOptions options;
  options.job_id = "job";
  options.worker_id = "c";
  for (auto& server : servers_) {
    options.shard_addresses.push_back(absl::StrCat("127.0.0.1:", server.port));
  }
  options.chunks = chunks_;
  options.rpc_timeout = absl::Milliseconds(300);
  auto impatient = GrpcParameterClient::Create(options);
  ASSERT_TRUE(impatient.ok());
  const RowRequest known{0, ids};
  got = (*impatient)->PullRows(5, absl::MakeConstSpan(&known, 1), out);
  EXPECT_TRUE(absl::IsDeadlineExceeded(got.status())) << got.status();
  EXPECT_THAT(got.status().message(), HasSubstr("row pull of version >= 5"));
}

}  // namespace
}  // namespace ferry
