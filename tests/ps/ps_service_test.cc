// PsService over real gRPC on a loopback port chosen by the OS: pushes,
// finalize, fences, checkpoints and restores (pulls: ps_service_pull_test.cc).
#include "ps/ps_service.h"

#include <atomic>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/file_system.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/rpc_util.h"
#include "ps/ps_checkpointer.h"
#include "ps/ps_server.h"
#include "tests/ps/ps_service_fixture.h"
#include "tests/testing/raw_stream_call.h"

namespace ferry {
namespace {

using testing::ChunkData;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::Header;
using testing::PsServiceTest;
using testing::PullResult;
using testing::Slice;

TEST_F(PsServiceTest, PushFinalizePullRoundTripAndByteCounts) {
  int64_t pushed = 0;
  const v1::PushHeader a = Header("a", 0, 2);
  const v1::PushHeader b = Header("b", 0, 3);
  ASSERT_TRUE(Push(&a, Slice({2, 4, 6, 8}), false, &pushed).ok());
  ASSERT_TRUE(Push(&b, Slice({3, 1, 4, 2}), false, &pushed).ok());
  int64_t version = 0;
  ASSERT_TRUE(Finalize(0, {{"a", 2}, {"b", 3}}, 0, &version).ok());
  EXPECT_EQ(version, 1);

  PullResult pull = Pull(1, absl::Seconds(5));
  ASSERT_TRUE(pull.status.ok()) << pull.status.error_message();
  EXPECT_EQ(pull.version, 1);
  EXPECT_THAT(pull.chunk_ids, ElementsAre(2, 3, 4));
  EXPECT_THAT(pull.values, ElementsAre(0.5f, 1.5f, 2.0f, 3.0f));

  v1::ShardInfoResponse info = Info();
  EXPECT_EQ(info.job_id(), "job");
  EXPECT_EQ(info.shard_id(), 1);
  EXPECT_EQ(info.num_shards(), 2);
  EXPECT_EQ(info.version(), 1);
  EXPECT_EQ(info.num_elements(), 4);
  EXPECT_THAT(info.chunk_ids(), ElementsAre(2, 3, 4));
  EXPECT_EQ(info.rejected_pushes(), 0);
  EXPECT_EQ(info.pending_pulls(), 0);
  v1::PullRequest pull_request;
  pull_request.set_job_id("job");
  pull_request.set_worker_id("puller");
  pull_request.set_min_version(1);
  EXPECT_EQ(info.bytes().received().at("worker"),
            pushed + static_cast<int64_t>(pull_request.ByteSizeLong()));
  // Push responses carry version 0, which serializes to nothing.
  EXPECT_EQ(info.bytes().sent().at("worker"), pull.bytes);
  EXPECT_GT(info.bytes().received().at("coordinator"), 0);
  EXPECT_GT(info.bytes().sent().at("coordinator"), 0);
}

// A chunk's absent ranges travel with it to the shard, which checks them:
// an absent element must be 0.
TEST_F(PsServiceTest, AbsentRangesTravelWithTheirChunk) {
  const v1::PushHeader a = Header("a", 0, 2);
  const std::vector<ChunkData> holds = {
      {2, {1}}, {3, {0, 5}, {0, 2}}, {4, {1}}};
  const grpc::Status refused = Push(&a, holds);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("chunk 3: element 1 is in an absent range"));
  const std::vector<ChunkData> zeros = {
      {2, {1}}, {3, {0, 0}, {0, 2}}, {4, {1}}};
  ASSERT_TRUE(Push(&a, zeros).ok());
  ASSERT_TRUE(Finalize(0, {{"a", 2}}).ok());
  EXPECT_EQ(Info().rejected_pushes(), 1);
}

TEST_F(PsServiceTest, HeaderMayCarryTheFirstChunk) {
  v1::PushHeader a = Header("a", 0, 1);
  grpc::ClientContext context;
  v1::PushResponse response;
  auto writer = stub_->Push(&context, &response);
  std::vector<ChunkData> chunks = Slice({1, 1, 1, 1});
  for (size_t i = 0; i < chunks.size(); ++i) {
    v1::PushRequest request;
    if (i == 0) *request.mutable_header() = a;
    request.set_chunk_id(chunks[i].id);
    request.set_data(chunks[i].values.data(),
                     chunks[i].values.size() * sizeof(float));
    ASSERT_TRUE(writer->Write(request));
  }
  writer->WritesDone();
  ASSERT_TRUE(writer->Finish().ok());
  EXPECT_TRUE(Finalize(0, {{"a", 1}}).ok());
}

TEST_F(PsServiceTest, BadPushesGetTheirCodeAndChangeNothing) {
  const v1::PushHeader a0 = Header("a", 0, 2);
  ASSERT_TRUE(Push(&a0, Slice({2, 4, 6, 8})).ok());
  ASSERT_TRUE(Finalize(0, {{"a", 2}}, /*generation=*/1).ok());
  const v1::PushHeader a1 = Header("a", 1, 2, 1);
  ASSERT_TRUE(Push(&a1, Slice({2, 4, 6, 8})).ok());
  const PullResult before = Pull(0, absl::Seconds(5));
  ASSERT_TRUE(before.status.ok());
  ASSERT_EQ(before.version, 1);

  const v1::PushHeader good = Header("b", 1, 1, 1);
  v1::PushHeader wrong_job = good;
  wrong_job.set_job_id("other");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<ChunkData> full = Slice({1, 1, 1, 1});
  struct Case {
    const char* name;
    grpc::Status status;
    grpc::StatusCode code;
  };
  const v1::PushHeader stale = Header("b", 0, 1, 1);
  const v1::PushHeader old_generation = Header("b", 1, 1, 0);
  const Case cases[] = {
      {"missing header", Push(nullptr, full), grpc::INVALID_ARGUMENT},
      {"empty stream", Push(nullptr, {}), grpc::INVALID_ARGUMENT},
      {"repeated header", Push(&good, full, true), grpc::INVALID_ARGUMENT},
      {"wrong job", Push(&wrong_job, full), grpc::FAILED_PRECONDITION},
      {"stale step", Push(&stale, full), grpc::FAILED_PRECONDITION},
      {"older generation", Push(&old_generation, full), grpc::ABORTED},
      {"duplicate push", Push(&a1, full), grpc::ALREADY_EXISTS},
      {"unknown chunk", Push(&good, {{99, {1}}}), grpc::INVALID_ARGUMENT},
      {"duplicate chunk", Push(&good, {{2, {1}}, {2, {1}}}),
       grpc::INVALID_ARGUMENT},
      {"missing chunk", Push(&good, {{2, {1}}, {4, {1}}}),
       grpc::INVALID_ARGUMENT},
      {"wrong length", Push(&good, {{2, {1, 1}}}), grpc::INVALID_ARGUMENT},
      {"nan", Push(&good, {{2, {1}}, {3, {1, nan}}, {4, {1}}}),
       grpc::INVALID_ARGUMENT},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.status.error_code(), c.code)
        << c.name << ": " << c.status.error_message();
  }
  EXPECT_THAT(cases[7].status.error_message(), HasSubstr("99"));
  const PullResult after = Pull(0, absl::Seconds(5));
  ASSERT_TRUE(after.status.ok());
  EXPECT_EQ(after.version, 1);
  EXPECT_EQ(after.values, before.values);
  EXPECT_EQ(Info().rejected_pushes(), static_cast<int64_t>(std::size(cases)));
  // b's rejected pushes left no buffer behind.
  EXPECT_EQ(Finalize(1, {{"a", 2}, {"b", 1}}, 1).error_code(),
            grpc::FAILED_PRECONDITION);
  EXPECT_EQ(shard_->version(), 1);
}

// A message that does not parse ends the push INVALID_ARGUMENT even after
// every chunk arrived (gRPC would otherwise report it as the stream's end
// and the push would be committed), and nothing of it is applied.
TEST_F(PsServiceTest, UnparsablePushMessageIsInvalidArgumentAndChangesNothing) {
  const v1::PushHeader a = Header("a", 0, 1);
  std::vector<std::string> messages;
  v1::PushRequest request;
  *request.mutable_header() = a;
  messages.push_back(request.SerializeAsString());
  for (const ChunkData& chunk : Slice({1, 1, 1, 1})) {
    request.Clear();
    request.set_chunk_id(chunk.id);
    request.set_data(chunk.values.data(), chunk.values.size() * sizeof(float));
    messages.push_back(request.SerializeAsString());
  }
  // Field 3 (data) claims 16 bytes and carries 3: no PushRequest.
  messages.push_back(
      std::string("\x1a\x10"
                  "abc",
                  5));
  const testutil::RawCallResult bad = testutil::RawStreamCall(
      server_.port, "/ferry.v1.ParameterServer/Push", messages);
  EXPECT_EQ(bad.status.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_EQ(bad.status.error_message(),
            absl::StrCat("push message ", messages.size(), " does not parse"));
  EXPECT_TRUE(bad.responses.empty());
  EXPECT_EQ(Info().rejected_pushes(), 1);
  // Nothing was staged: the step has no contributor yet, and the same push
  // whole is accepted, raw, with the canonical PushResponse.
  EXPECT_EQ(Finalize(0, {{"a", 1}}).error_code(), grpc::FAILED_PRECONDITION);
  messages.pop_back();
  const testutil::RawCallResult good = testutil::RawStreamCall(
      server_.port, "/ferry.v1.ParameterServer/Push", messages);
  ASSERT_TRUE(good.status.ok()) << good.status.error_message();
  ASSERT_EQ(good.responses.size(), 1u);
  v1::PushResponse response;
  EXPECT_TRUE(response.ParseFromString(good.responses[0]));
  EXPECT_TRUE(Finalize(0, {{"a", 1}}).ok());
  EXPECT_EQ(shard_->version(), 1);
}

TEST_F(PsServiceTest, FinalizeErrorsAndIdempotence) {
  EXPECT_EQ(Finalize(0, {{"ghost", 1}}).error_code(),
            grpc::FAILED_PRECONDITION);
  EXPECT_EQ(Finalize(3, {{"a", 1}}).error_code(), grpc::FAILED_PRECONDITION);
  const v1::PushHeader a = Header("a", 0, 2);
  ASSERT_TRUE(Push(&a, Slice({2, 4, 6, 8})).ok());
  int64_t version = 0;
  ASSERT_TRUE(Finalize(0, {{"a", 2}}, 0, &version).ok());
  EXPECT_EQ(version, 1);
  ASSERT_TRUE(Finalize(0, {{"a", 2}}, 0, &version).ok());  // retry
  EXPECT_EQ(version, 1);
  EXPECT_EQ(shard_->version(), 1);
}

TEST_F(PsServiceTest, FenceRefusesOlderGenerationsOverTheWire) {
  auto fence = [&](const std::string& job, int64_t generation,
                   int64_t* after = nullptr) {
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(5));
    v1::FenceRequest request;
    request.set_job_id(job);
    request.set_generation(generation);
    v1::FenceResponse response;
    grpc::Status status = stub_->Fence(&context, request, &response);
    if (after != nullptr) *after = response.generation();
    return status;
  };
  int64_t after = 0;
  ASSERT_TRUE(fence("job", 3, &after).ok());
  EXPECT_EQ(after, 3);
  EXPECT_EQ(fence("other", 9).error_code(), grpc::FAILED_PRECONDITION);
  EXPECT_EQ(fence("job", -2).error_code(), grpc::INVALID_ARGUMENT);
  const v1::PushHeader stale = Header("a", 0, 2, 2);
  EXPECT_EQ(Push(&stale, Slice({2, 4, 6, 8})).error_code(), grpc::ABORTED);
  Step(0, {2, 4, 6, 8}, 3);
  EXPECT_EQ(shard_->version(), 1);
}

TEST_F(PsServiceTest, RestoreBringsTheVersionAndTheWeightsBack) {
  Step(0, {2, 4, 6, 8});
  v1::CheckpointResponse written;
  grpc::Status status = Checkpoint(1, &written);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(written.version(), 1);
  EXPECT_EQ(written.path(), "/ckpt/shard-1-v000000000001.ckpt");
  EXPECT_TRUE(fs_.ReadFile(written.path()).ok());
  const PullResult at1 = Pull(1, absl::Seconds(5));
  ASSERT_TRUE(at1.status.ok());

  Step(1, {1, 1, 1, 1});
  Step(2, {3, 1, 4, 1});
  ASSERT_EQ(Info().version(), 3);
  int64_t restored = -1;
  status = Restore(1, /*generation=*/2, &restored);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(restored, 1);
  EXPECT_EQ(Info().version(), 1);
  const PullResult back = Pull(0, absl::Seconds(5));
  ASSERT_TRUE(back.status.ok());
  EXPECT_EQ(back.version, 1);
  EXPECT_EQ(back.values, at1.values);  // bit for bit
  // Training goes on from there under the new generation only.
  const v1::PushHeader stale = Header("a", 1, 2, /*generation=*/1);
  EXPECT_EQ(Push(&stale, Slice({1, 1, 1, 1})).error_code(), grpc::ABORTED);
  Step(1, {1, 1, 1, 1}, 2);
  EXPECT_EQ(Info().version(), 2);
}

TEST_F(PsServiceTest, CheckpointAndRestoreErrors) {
  v1::CheckpointResponse written;
  grpc::Status status = Checkpoint(5, &written);
  EXPECT_EQ(status.error_code(), grpc::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("at version 0"));
  status = Restore(7, 0);
  EXPECT_EQ(status.error_code(), grpc::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("no checkpoint"));
  EXPECT_EQ(Restore(-1, 0).error_code(), grpc::INVALID_ARGUMENT);
  // A corrupt checkpoint is DATA_LOSS and changes nothing.
  ASSERT_TRUE(Checkpoint(0, &written).ok());
  Step(0, {2, 4, 6, 8});
  fs_.SetFileContents(written.path(), "FERRYCKP garbage");
  EXPECT_EQ(Restore(0, 0).error_code(), grpc::DATA_LOSS);
  EXPECT_EQ(Info().version(), 1);

  // A server without a checkpointer.
  PsShardConfig config = shard_->config();
  config.initial_slice = {1, 2, 3, 4};
  auto other = PsShard::Create(config);
  ASSERT_TRUE(other.ok());
  auto server = StartPsServer(other->get(), "127.0.0.1:0");
  ASSERT_TRUE(server.ok());
  auto stub = v1::ParameterServer::NewStub(
      MakeChannel(absl::StrCat("127.0.0.1:", server->port)));
  grpc::ClientContext context;
  v1::RestoreRequest request;
  request.set_job_id("job");
  v1::RestoreResponse response;
  status = stub->Restore(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("no checkpoint directory"));
}

TEST_F(PsServiceTest, RestoreAbortsPendingPulls) {
  PullResult result;
  std::thread puller([&] { result = Pull(5, absl::Seconds(10)); });
  ASSERT_TRUE(WaitForPendingPulls(1));
  const absl::Time start = absl::Now();
  ASSERT_TRUE(Restore(0, 1).ok());  // the current version: no file needed
  puller.join();
  EXPECT_EQ(result.status.error_code(), grpc::ABORTED);
  EXPECT_THAT(result.status.error_message(),
              HasSubstr("rolled back to version 0"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_EQ(Info().pending_pulls(), 0);
}

TEST_F(PsServiceTest, ShutdownEndsPendingPulls) {
  PullResult result;
  std::thread puller([&] { result = Pull(10, absl::Seconds(10)); });
  ASSERT_TRUE(WaitForPendingPulls(1));
  const absl::Time start = absl::Now();
  server_.Shutdown();
  puller.join();
  EXPECT_EQ(result.status.error_code(), grpc::UNAVAILABLE);
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
}

// A shard killed during a ReadTables leaves its spool (or the spool's
// temporary file); at start it deletes those and nothing else.
TEST(TablesSpool, StaleSpoolsAreDeletedAndNothingElse) {
  InMemoryFileSystem fs;
  ASSERT_TRUE(fs.CreateDirectories("/ckpt").ok());
  for (const char* name :
       {".read-tables-12-345.section", ".read-tables-7-8.section.tmp",
        "shard-0-v00000010.ckpt", "read-tables-1.section"}) {
    ASSERT_TRUE(fs.WriteFileAtomically(std::string("/ckpt/") + name, "x").ok());
  }
  auto deleted = DeleteStaleTablesSpools(&fs, "/ckpt");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 2);
  auto left = fs.ListDirectory("/ckpt");
  ASSERT_TRUE(left.ok());
  EXPECT_EQ(*left, (std::vector<std::string>{"read-tables-1.section",
                                             "shard-0-v00000010.ckpt"}));
  auto none = DeleteStaleTablesSpools(&fs, "/missing");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, 0);
}

}  // namespace
}  // namespace ferry
