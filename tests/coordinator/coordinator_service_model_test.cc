// The coordinator's service for a job whose model comes from its first
// worker, over a real gRPC server on loopback: what it answers before the
// model is defined, and a definition larger than one call.
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "coordinator/coordinator_client.h"
#include "coordinator/coordinator_service.h"
#include "coordinator/model_intake.h"
#include "gtest/gtest.h"
#include "proto/rpc_util.h"

namespace ferry {
namespace {

class ModelIntakeServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pending_.set_job_id("job-1");
    pending_.set_model("external");
    pending_.set_model_from_worker(true);
    pending_.set_dataset("external:100");
    intake_ = std::make_unique<ModelIntake>(ModelIntakeOptions{}, RealClock());
    service_ = std::make_unique<CoordinatorService>(pending_, intake_.get());
    grpc::ServerBuilder builder;
    ConfigureServerBuilder(builder);
    int port = 0;
    AddServingPort(builder, "127.0.0.1:0", &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    address_ = "127.0.0.1:" + std::to_string(port);
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  // A client that does not retry UNAVAILABLE (the test wants to see it).
  std::unique_ptr<CoordinatorClient> Client() {
    CoordinatorClientOptions options;
    options.rpc_timeout = absl::Seconds(10);
    options.retry.budget = absl::ZeroDuration();
    return CoordinatorClient::Connect(address_, options);
  }

  static std::vector<v1::TensorSpec> Tensors(int64_t rows, int64_t cols) {
    std::vector<v1::TensorSpec> tensors(2);
    tensors[0].set_name("embed.weight");
    tensors[0].add_shape(rows);
    tensors[0].add_shape(cols);
    tensors[1].set_name("head.bias");
    tensors[1].add_shape(cols);
    return tensors;
  }

  v1::JobSpec pending_;
  std::unique_ptr<ModelIntake> intake_;
  std::unique_ptr<CoordinatorService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

TEST_F(ModelIntakeServiceTest, BeforeTheModelOnlyTheSpecAndTheIntakeAnswer) {
  std::unique_ptr<CoordinatorClient> client = Client();
  absl::StatusOr<v1::JobSpec> job = client->GetJob();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->job_id(), "job-1");
  EXPECT_TRUE(job->model_from_worker());
  EXPECT_EQ(job->tensors_size(), 0);
  // Workers are told to come back (they retry UNAVAILABLE).
  v1::RegisterRequest request;
  request.set_job_id("job-1");
  absl::Status registered = client->Register(request).status();
  EXPECT_TRUE(absl::IsUnavailable(registered)) << registered;
  EXPECT_NE(registered.message().find("first worker"), absl::string_view::npos);
  EXPECT_TRUE(
      absl::IsFailedPrecondition(client->ModelValues("job-1", 0, 1).status()));
  // Another job's worker is refused.
  EXPECT_TRUE(absl::IsFailedPrecondition(
      client->DefineModel("job-2", Tensors(2, 2), std::vector<float>(6, 1.0f))
          .status()));
}

TEST_F(ModelIntakeServiceTest, AModelOfSeveralCallsIsServedBackExactly) {
  // 300,100 elements: two calls of at most kMaxModelValuesPerCall.
  const int64_t rows = 3001, cols = 100;
  std::vector<float> values(rows * cols + cols);
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = std::sin(static_cast<float>(i));
  }
  ASSERT_GT(static_cast<int64_t>(values.size()), kMaxModelValuesPerCall);
  absl::StatusOr<bool> defined =
      Client()->DefineModel("job-1", Tensors(rows, cols), values);
  ASSERT_TRUE(defined.ok()) << defined.status();
  EXPECT_TRUE(*defined);
  EXPECT_TRUE(intake_->defined());

  // A second worker's definition is not taken.
  absl::StatusOr<bool> second = Client()->DefineModel(
      "job-1", Tensors(2, 2), std::vector<float>(6, 1.0f));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(*second);

  absl::StatusOr<std::vector<float>> served =
      Client()->ModelValues("job-1", 0, static_cast<int64_t>(values.size()));
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(*served, values);
  absl::StatusOr<std::vector<float>> tail =
      Client()->ModelValues("job-1", rows * cols, rows * cols + cols);
  ASSERT_TRUE(tail.ok()) << tail.status();
  EXPECT_EQ(*tail, std::vector<float>(values.end() - cols, values.end()));
}

TEST_F(ModelIntakeServiceTest, ANonFiniteValueIsRefusedByName) {
  std::vector<float> values(6, 0.5f);
  values[4] = std::numeric_limits<float>::infinity();
  // embed.weight holds elements 0-3, head.bias 4-5.
  const absl::Status status =
      Client()->DefineModel("job-1", Tensors(2, 2), values).status();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_NE(status.message().find("tensor head.bias element 0 is inf"),
            absl::string_view::npos)
      << status;
  EXPECT_FALSE(intake_->defined());
}

}  // namespace
}  // namespace ferry
