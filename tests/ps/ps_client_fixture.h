// The fixture of the GrpcParameterClient tests (ps_client_test.cc: pushes,
// ps_pull_test.cc: pulls): real gRPC servers on loopback ports running a
// minimal ParameterServer service that records what it receives and serves
// pulls with injectable faults.
#ifndef FERRY_TESTS_PS_PS_CLIENT_FIXTURE_H_
#define FERRY_TESTS_PS_PS_CLIENT_FIXTURE_H_

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/sharding.h"
#include "ferry/v1/ps.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/rpc_util.h"
#include "ps/ps_client.h"
#include "tests/testing/wait_until.h"

namespace ferry {

enum class PullFault {
  kNone,
  kMixedVersions,
  kMissingChunk,
  kDuplicateChunk,
  kForeignChunk,
  kWrongSize,
  kOldVersion,
  kHang,
};

struct ReceivedPush {
  v1::PushHeader header;
  std::map<int32_t, std::vector<float>> chunks;
  int64_t bytes = 0;  // ByteSizeLong() of every message
  bool cancelled = false;
  int zero_chunks = 0;  // sent as ENCODING_ZEROS (recorded as zeros)
  std::map<int32_t, std::vector<int64_t>> absent;  // chunks' absent pairs
};

// One PS shard as the test sees it: owns the chunks placed on `shard_id`.
class FakeShard final : public v1::ParameterServer::Service {
 public:
  FakeShard(int shard_id, std::vector<Chunk> chunks, std::vector<float> params,
            int64_t version)
      : shard_id_(shard_id),
        chunks_(std::move(chunks)),
        params_(std::move(params)),
        version_(version) {}

  grpc::Status ShardInfo(grpc::ServerContext*, const v1::ShardInfoRequest*,
                         v1::ShardInfoResponse* response) override {
    response->set_shard_id(shard_id_);
    return grpc::Status::OK;
  }

  grpc::Status Push(grpc::ServerContext* context,
                    grpc::ServerReader<v1::PushRequest>* reader,
                    v1::PushResponse* response) override {
    ReceivedPush push;
    v1::PushRequest request;
    bool first = true;
    while (reader->Read(&request)) {
      push.bytes += request.ByteSizeLong();
      if (first) {
        if (!request.has_header()) return {grpc::INVALID_ARGUMENT, "no header"};
        push.header = request.header();
        first = false;
        continue;
      }
      std::vector<float> values(request.data().size() / sizeof(float));
      if (!values.empty()) {
        std::memcpy(values.data(), request.data().data(),
                    request.data().size());
      }
      if (request.encoding() == v1::ENCODING_ZEROS) {
        if (!request.data().empty()) {
          return {grpc::INVALID_ARGUMENT, "zeros chunk with data"};
        }
        ++push.zero_chunks;
        for (const Chunk& c : chunks_) {
          if (c.id == request.chunk_id()) values.assign(c.length, 0.0f);
        }
      }
      if (request.absent_size() > 0) {
        push.absent[request.chunk_id()].assign(request.absent().begin(),
                                               request.absent().end());
      }
      if (!push.chunks.emplace(request.chunk_id(), std::move(values)).second) {
        return {grpc::INVALID_ARGUMENT, "duplicate chunk"};
      }
    }
    push.cancelled = context->IsCancelled();
    absl::MutexLock lock(&mu_);
    pushes_.push_back(std::move(push));
    if (!push_errors_.empty()) {
      grpc::Status error = push_errors_.front();
      push_errors_.pop_front();
      return error;
    }
    response->set_version(version_);
    return grpc::Status::OK;
  }

  grpc::Status Pull(grpc::ServerContext* context,
                    const v1::PullRequest* request,
                    grpc::ServerWriter<v1::PullResponse>* writer) override {
    PullFault fault;
    int64_t version;
    {
      absl::MutexLock lock(&mu_);
      pull_requests_.push_back(*request);
      if (!pull_errors_.empty()) {
        grpc::Status error = pull_errors_.front();
        pull_errors_.pop_front();
        return error;
      }
      fault = fault_;
      version = version_;
    }
    if (fault == PullFault::kHang) {
      // A server that never answers: held until the client gives up.
      (void)testutil::WaitUntil("the client to cancel the hung pull",
                                [context] { return context->IsCancelled(); });
      return {grpc::DEADLINE_EXCEEDED, "version not reached"};
    }
    if (fault == PullFault::kOldVersion) version = request->min_version() - 1;
    std::vector<const Chunk*> owned;
    const FlatRange range{request->range_begin(), request->range_end()};
    for (const Chunk& c : chunks_) {
      if (c.shard == shard_id_ && ChunkInPullRange(c, range)) {
        owned.push_back(&c);
      }
    }
    if (fault == PullFault::kMissingChunk) owned.pop_back();
    if (fault == PullFault::kDuplicateChunk) owned.push_back(owned.front());
    if (fault == PullFault::kForeignChunk) {
      for (const Chunk& c : chunks_) {
        if (c.shard != shard_id_) {
          owned.push_back(&c);
          break;
        }
      }
    }
    for (size_t i = 0; i < owned.size(); ++i) {
      const Chunk& c = *owned[i];
      v1::PullResponse response;
      response.set_version(
          fault == PullFault::kMixedVersions && i > 0 ? version + 1 : version);
      response.set_chunk_id(c.id);
      int64_t length = c.length + (fault == PullFault::kWrongSize ? 1 : 0);
      response.mutable_data()->resize(length * sizeof(float));
      std::memcpy(response.mutable_data()->data(), &params_[c.flat_offset],
                  c.length * sizeof(float));
      if (!writer->Write(response)) break;
    }
    return grpc::Status::OK;
  }

  void set_fault(PullFault fault) {
    absl::MutexLock lock(&mu_);
    fault_ = fault;
  }
  void set_version(int64_t version) {
    absl::MutexLock lock(&mu_);
    version_ = version;
  }
  void FailNextPush(grpc::Status status) {
    absl::MutexLock lock(&mu_);
    push_errors_.push_back(std::move(status));
  }
  void FailNextPull(grpc::Status status) {
    absl::MutexLock lock(&mu_);
    pull_errors_.push_back(std::move(status));
  }
  std::vector<ReceivedPush> pushes() {
    absl::MutexLock lock(&mu_);
    return pushes_;
  }
  std::vector<v1::PullRequest> pull_requests() {
    absl::MutexLock lock(&mu_);
    return pull_requests_;
  }

 private:
  const int shard_id_;
  const std::vector<Chunk> chunks_;
  const std::vector<float> params_;
  absl::Mutex mu_;
  int64_t version_ ABSL_GUARDED_BY(mu_);
  PullFault fault_ ABSL_GUARDED_BY(mu_) = PullFault::kNone;
  std::deque<grpc::Status> push_errors_ ABSL_GUARDED_BY(mu_);
  std::deque<grpc::Status> pull_errors_ ABSL_GUARDED_BY(mu_);
  std::vector<ReceivedPush> pushes_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::PullRequest> pull_requests_ ABSL_GUARDED_BY(mu_);
};

// Four tensors as two "layers" (weight + bias each), cut into chunks of at
// most 4 elements so that every shard owns several chunks.
inline const std::vector<int64_t> kTensorSizes = {7, 3, 11, 5};
inline constexpr int64_t kTotal = 26;
inline constexpr int64_t kMaxChunk = 4;

inline std::vector<float> Ramp(float start, float step) {
  std::vector<float> v(kTotal);
  for (int64_t i = 0; i < kTotal; ++i) v[i] = start + step * i;
  return v;
}

class Cluster {
 public:
  explicit Cluster(int num_shards, int64_t version = 5)
      : params_(Ramp(100.0f, 0.25f)) {
    chunks_ = *PlaceChunks(kTensorSizes, num_shards, kMaxChunk);
    for (int s = 0; s < num_shards; ++s) {
      shards_.push_back(
          std::make_unique<FakeShard>(s, chunks_, params_, version));
      grpc::ServerBuilder builder;
      ConfigureServerBuilder(builder);
      int port = 0;
      builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                               &port);
      builder.RegisterService(shards_.back().get());
      servers_.push_back(builder.BuildAndStart());
      addresses_.push_back("127.0.0.1:" + std::to_string(port));
    }
  }
  ~Cluster() {
    for (auto& server : servers_)
      server->Shutdown(absl::ToChronoTime(absl::Now()));
  }

  std::unique_ptr<GrpcParameterClient> Client(
      absl::Duration timeout = absl::Seconds(10),
      absl::Duration retry_budget = absl::Seconds(5)) {
    GrpcParameterClientOptions options;
    options.job_id = "job";
    options.worker_id = "w7";
    options.shard_addresses = addresses_;
    options.chunks = chunks_;
    options.rpc_timeout = timeout;
    options.retry.initial_backoff = absl::Milliseconds(20);
    options.retry.budget = retry_budget;
    auto client = GrpcParameterClient::Create(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return std::move(client).value();
  }

  FakeShard& shard(int s) { return *shards_[s]; }
  const std::vector<Chunk>& chunks() const { return chunks_; }
  const std::vector<float>& params() const { return params_; }
  std::vector<std::string>& addresses() { return addresses_; }

 private:
  std::vector<float> params_;
  std::vector<Chunk> chunks_;
  std::vector<std::unique_ptr<FakeShard>> shards_;
  std::vector<std::unique_ptr<grpc::Server>> servers_;
  std::vector<std::string> addresses_;
};

inline PushInfo Info() {
  PushInfo info;
  info.generation = 3;
  info.step = 12;
  info.num_samples = 64;
  info.base_version = 5;
  return info;
}

// Checks that every shard got one complete push of `grads`: exactly its own
// chunks, with the right values and header.
inline void ExpectPushed(Cluster& cluster, int num_shards,
                         const std::vector<float>& grads,
                         size_t pushes_per_shard = 1) {
  for (int s = 0; s < num_shards; ++s) {
    const std::vector<ReceivedPush> pushes = cluster.shard(s).pushes();
    ASSERT_EQ(pushes.size(), pushes_per_shard) << "shard " << s;
    const ReceivedPush& push = pushes.back();
    EXPECT_FALSE(push.cancelled);
    EXPECT_EQ(push.header.job_id(), "job");
    EXPECT_EQ(push.header.worker_id(), "w7");
    EXPECT_EQ(push.header.generation(), 3);
    EXPECT_EQ(push.header.step(), 12);
    EXPECT_EQ(push.header.num_samples(), 64);
    EXPECT_EQ(push.header.base_version(), 5);
    std::map<int32_t, std::vector<float>> expected;
    for (const Chunk& c : cluster.chunks()) {
      if (c.shard != s) continue;
      expected[c.id].assign(grads.begin() + c.flat_offset,
                            grads.begin() + c.flat_offset + c.length);
    }
    EXPECT_EQ(push.chunks, expected) << "shard " << s;
  }
}

// Waits (bounded: 5 s) until shard `s` has received `n` push streams.
inline std::vector<ReceivedPush> WaitForPushes(Cluster& cluster, int s,
                                               size_t n) {
  (void)testutil::WaitUntil(
      absl::StrCat(n, " push streams on shard ", s),
      [&] { return cluster.shard(s).pushes().size() >= n; }, absl::Seconds(5));
  return cluster.shard(s).pushes();
}

}  // namespace ferry

#endif  // FERRY_TESTS_PS_PS_CLIENT_FIXTURE_H_
