// The fixture of the PsService tests: shard 1 of 2 served over real gRPC on
// a loopback port chosen by the OS, with helpers that push, finalize, pull,
// checkpoint and restore through its stub.
#ifndef FERRY_TESTS_PS_PS_SERVICE_FIXTURE_H_
#define FERRY_TESTS_PS_PS_SERVICE_FIXTURE_H_

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/file_system.h"
#include "common/sharding.h"
#include "gtest/gtest.h"
#include "proto/rpc_util.h"
#include "ps/ps_checkpointer.h"
#include "ps/ps_server.h"
#include "ps/ps_service.h"
#include "tests/testing/wait_until.h"

namespace ferry::testing {

struct ChunkData {
  int32_t id;
  std::vector<float> values;
  std::vector<int64_t> absent = {};  // PushRequest.absent
};

struct PullResult {
  grpc::Status status;
  int64_t version = -1;
  std::vector<int32_t> chunk_ids;
  std::vector<float> values;  // the slice, chunks concatenated
  int64_t bytes = 0;          // serialized size of the messages received
};

inline v1::PushHeader Header(const std::string& worker, int64_t step,
                             int64_t num_samples, int64_t generation = 0) {
  v1::PushHeader h;
  h.set_job_id("job");
  h.set_worker_id(worker);
  h.set_generation(generation);
  h.set_step(step);
  h.set_num_samples(num_samples);
  return h;
}

// Shard 1 of 2 over tensors {5, 3} in chunks of <= 2: chunks 2 ([4,5)),
// 3 ([5,7)) and 4 ([7,8)); chunks 0 and 1 belong to shard 0.
inline std::vector<ChunkData> Slice(const std::vector<float>& g) {
  return {{2, {g[0]}}, {3, {g[1], g[2]}}, {4, {g[3]}}};
}

class PsServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PsShardConfig config;
    config.job_id = "job";
    config.shard_id = 1;
    config.num_shards = 2;
    config.tensor_sizes = {5, 3};
    config.max_chunk_elements = 2;
    config.optimizer.lr = 0.5;
    config.initial_slice = {1.0f, 2.0f, 3.0f, 4.0f};
    auto shard = PsShard::Create(config);
    ASSERT_TRUE(shard.ok()) << shard.status();
    shard_ = std::move(shard).value();
    checkpointer_ =
        std::make_unique<PsCheckpointer>(shard_.get(), &fs_, "/ckpt");
    auto server =
        StartPsServer(shard_.get(), "127.0.0.1:0", checkpointer_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(server).value();
    ASSERT_GT(server_.port, 0);
    stub_ = v1::ParameterServer::NewStub(
        MakeChannel(absl::StrCat("127.0.0.1:", server_.port)));
  }

  // Sends `header` (unless null) then `chunks`; `sent` accumulates the
  // serialized size of every message written.
  grpc::Status Push(const v1::PushHeader* header,
                    const std::vector<ChunkData>& chunks,
                    bool header_twice = false, int64_t* sent = nullptr) {
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(5));
    v1::PushResponse response;
    auto writer = stub_->Push(&context, &response);
    v1::PushRequest request;
    if (header != nullptr) {
      *request.mutable_header() = *header;
      if (sent) *sent += request.ByteSizeLong();
      writer->Write(request);
    }
    for (size_t i = 0; i < chunks.size(); ++i) {
      request.Clear();
      if (header_twice && i == 1) *request.mutable_header() = *header;
      request.set_chunk_id(chunks[i].id);
      request.set_data(chunks[i].values.data(),
                       chunks[i].values.size() * sizeof(float));
      for (int64_t bound : chunks[i].absent) request.add_absent(bound);
      if (sent) *sent += request.ByteSizeLong();
      if (!writer->Write(request)) break;  // the server finished early
    }
    writer->WritesDone();
    return writer->Finish();
  }

  grpc::Status Finalize(int64_t step,
                        std::vector<std::pair<std::string, int>> contributors,
                        int64_t generation = 0, int64_t* version = nullptr) {
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(5));
    v1::FinalizeStepRequest request;
    request.set_job_id("job");
    request.set_step(step);
    request.set_generation(generation);
    for (const auto& [worker, samples] : contributors) {
      v1::Contributor* c = request.add_contributors();
      c->set_worker_id(worker);
      c->set_num_samples(samples);
    }
    v1::FinalizeStepResponse response;
    grpc::Status status = stub_->FinalizeStep(&context, request, &response);
    if (version != nullptr) *version = response.version();
    return status;
  }

  PullResult Pull(int64_t min_version, absl::Duration timeout,
                  const std::string& job = "job", FlatRange range = {}) {
    grpc::ClientContext context;
    SetDeadline(context, timeout);
    v1::PullRequest request;
    request.set_job_id(job);
    request.set_worker_id("puller");
    request.set_min_version(min_version);
    request.set_range_begin(range.begin);
    request.set_range_end(range.end);
    auto reader = stub_->Pull(&context, request);
    PullResult result;
    v1::PullResponse message;
    while (reader->Read(&message)) {
      result.bytes += message.ByteSizeLong();
      result.version = message.version();
      result.chunk_ids.push_back(message.chunk_id());
      const size_t n = message.data().size() / sizeof(float);
      const size_t old = result.values.size();
      result.values.resize(old + n);
      std::memcpy(result.values.data() + old, message.data().data(),
                  n * sizeof(float));
    }
    result.status = reader->Finish();
    return result;
  }

  v1::ShardInfoResponse Info() {
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(5));
    v1::ShardInfoResponse response;
    EXPECT_TRUE(
        stub_->ShardInfo(&context, v1::ShardInfoRequest(), &response).ok());
    return response;
  }

  // Polls ShardInfo until pending_pulls == n (cancellation reaches the server
  // asynchronously).
  bool WaitForPendingPulls(int64_t n) {
    return testutil::WaitUntil(absl::StrCat(n, " pending pulls"),
                               [&] { return Info().pending_pulls() == n; })
        .ok();
  }

  grpc::Status Checkpoint(int64_t version, v1::CheckpointResponse* response) {
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(5));
    v1::CheckpointRequest request;
    request.set_job_id("job");
    request.set_version(version);
    return stub_->Checkpoint(&context, request, response);
  }

  grpc::Status Restore(int64_t version, int64_t generation,
                       int64_t* restored = nullptr) {
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(5));
    v1::RestoreRequest request;
    request.set_job_id("job");
    request.set_version(version);
    request.set_generation(generation);
    v1::RestoreResponse response;
    grpc::Status status = stub_->Restore(&context, request, &response);
    if (restored != nullptr) *restored = response.version();
    return status;
  }

  // One sync step by worker "a" with gradient `g` (2 samples).
  void Step(int64_t step, const std::vector<float>& g, int64_t generation = 0) {
    const v1::PushHeader a = Header("a", step, 2, generation);
    ASSERT_TRUE(Push(&a, Slice(g)).ok());
    ASSERT_TRUE(Finalize(step, {{"a", 2}}, generation).ok());
  }

  std::unique_ptr<PsShard> shard_;
  InMemoryFileSystem fs_;
  std::unique_ptr<PsCheckpointer> checkpointer_;
  PsServer server_;  // destroyed before shard_ and checkpointer_
  std::unique_ptr<v1::ParameterServer::Stub> stub_;
};

}  // namespace ferry::testing

#endif  // FERRY_TESTS_PS_PS_SERVICE_FIXTURE_H_
