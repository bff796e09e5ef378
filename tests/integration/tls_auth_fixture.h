// The fixture of the TLS and role tests (tls_auth_test.cc,
// tls_role_tokens_test.cc): a PS shard (StartPsServer), a coordinator
// (CoordinatorService) and a ring peer (StartRingPeerServer) on loopback, all
// serving with the process's security config, and real clients whose config
// is explicit (MakeChannel overload) calling every method. Certificates are
// made by openssl at test time (tls_certs_fixture.h; the suites skip
// without it). Every call has a short deadline.
#ifndef FERRY_TESTS_INTEGRATION_TLS_AUTH_FIXTURE_H_
#define FERRY_TESTS_INTEGRATION_TLS_AUTH_FIXTURE_H_

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "coordinator/coordinator.h"
#include "coordinator/coordinator_service.h"
#include "ferry/v1/coordinator.grpc.pb.h"
#include "ferry/v1/ps.grpc.pb.h"
#include "ferry/v1/ring.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/rpc_roles.h"
#include "proto/rpc_security.h"
#include "proto/rpc_util.h"
#include "ps/ps_server.h"
#include "ps/ps_shard.h"
#include "ring/ring_peer_service.h"
#include "tests/integration/tls_certs_fixture.h"
#include "tests/testing/fake_shard_control.h"

namespace ferry::tls_test {

using ferry::testing::Certs;
using ferry::testing::GetCerts;
using ferry::testing::HaveOpenssl;
using ferry::testing::MakeTempDir;
using ferry::testing::WriteFile;

using ::testing::HasSubstr;

inline constexpr absl::Duration kDeadline = absl::Seconds(5);
inline constexpr char kToken[] = "s3cret-token.ABC_123";
inline constexpr char kRingJob[] = "ring-job";

// One server of each kind, serving with the process's config at start.
struct Servers {
  ~Servers() {
    const auto deadline =
        std::chrono::system_clock::now() + std::chrono::seconds(2);
    if (coordinator != nullptr) coordinator->Shutdown();
    if (coordinator_server != nullptr) {
      coordinator_server->Shutdown(deadline);
      coordinator_server->Wait();
    }
    if (ring != nullptr && ring->server != nullptr) {
      ring->server->Shutdown(deadline);
      ring->server->Wait();
    }
    ps.Shutdown(absl::Seconds(2));
  }

  std::unique_ptr<PsShard> shard;
  PsServer ps;
  FakeShardControl shards;
  std::unique_ptr<Coordinator> coordinator;
  std::unique_ptr<CoordinatorService> coordinator_service;
  std::unique_ptr<grpc::Server> coordinator_server;
  int coordinator_port = 0;
  std::unique_ptr<RingPeerServer> ring;
};

// A call's name and the status it ended with.
using Outcome = std::pair<std::string, grpc::Status>;

template <typename Stub>
std::unique_ptr<typename Stub::Stub> NewStub(int port,
                                             const RpcSecurityConfig& client) {
  // "localhost" so that the server certificate's SAN matches.
  return Stub::NewStub(MakeChannel(absl::StrCat("localhost:", port), client));
}

class TlsAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveOpenssl()) GTEST_SKIP() << "openssl is not on PATH";
    ASSERT_TRUE(GetCerts().ok)
        << "openssl failed: see " << GetCerts().Path("gen.log");
  }

  void TearDown() override {
    servers_.reset();
    SetProcessRpcSecurityForTesting(RpcSecurityConfig());  // back to plaintext
  }

  // A config loaded through LoadRpcSecurity, as the flags would give it.
  // Certificate names are file stems in the generated directory ("" : none).
  RpcSecurityConfig Config(const std::string& cert, const std::string& ca,
                           bool require_client_cert = false,
                           const std::string& token = "") {
    const Certs& certs = GetCerts();
    OpsFlags flags;
    if (!cert.empty()) {
      flags.tls_cert = certs.Path(cert + ".pem");
      flags.tls_key = certs.Path(cert + ".key");
    }
    if (!ca.empty()) flags.tls_ca = certs.Path(ca + ".pem");
    flags.require_client_cert = require_client_cert;
    if (!token.empty()) {
      flags.auth_token_file =
          WriteFile(certs.dir, "token-" + token, token + "\n");
    }
    absl::StatusOr<RpcSecurityConfig> config = LoadRpcSecurity(flags);
    EXPECT_TRUE(config.ok()) << config.status();
    return config.ok() ? *config : RpcSecurityConfig();
  }

  // Installs `server` as the process's config and starts the three servers.
  void StartServers(const RpcSecurityConfig& server) {
    SetProcessRpcSecurityForTesting(server);
    servers_ = std::make_unique<Servers>();
    Servers& s = *servers_;

    PsShardConfig shard_config;
    shard_config.job_id = "job";
    shard_config.tensor_sizes = {4};
    shard_config.max_chunk_elements = 4;
    shard_config.initial_slice = {1.0f, 2.0f, 3.0f, 4.0f};
    auto shard = PsShard::Create(shard_config);
    ASSERT_TRUE(shard.ok()) << shard.status();
    s.shard = *std::move(shard);
    auto ps = StartPsServer(s.shard.get(), "127.0.0.1:0");
    ASSERT_TRUE(ps.ok()) << ps.status();
    s.ps = *std::move(ps);

    CoordinatorOptions options;
    options.job.set_job_id("job");
    options.job.set_global_batch(4);
    options.job.set_epochs(1);
    options.epoch_size = 16;
    options.long_poll = absl::Milliseconds(100);
    auto coordinator = Coordinator::Create(options, &s.shards);
    ASSERT_TRUE(coordinator.ok()) << coordinator.status();
    s.coordinator = *std::move(coordinator);
    s.coordinator_service =
        std::make_unique<CoordinatorService>(s.coordinator.get());
    grpc::ServerBuilder builder;
    ConfigureServerBuilder(builder);
    AddServingPort(builder, "127.0.0.1:0", &s.coordinator_port);
    builder.RegisterService(s.coordinator_service.get());
    s.coordinator_server = builder.BuildAndStart();
    ASSERT_NE(s.coordinator_server, nullptr);
    ASSERT_GT(s.coordinator_port, 0);

    auto ring = StartRingPeerServer("127.0.0.1:0");
    ASSERT_TRUE(ring.ok()) << ring.status();
    s.ring = *std::move(ring);
    s.ring->service->set_job_id(kRingJob);
    s.ring->publisher->Publish(3, {1.0f, 2.0f, 3.0f});
  }

  // Calls every method of the three services (14) with `client`, in an
  // order in which each succeeds when the credentials are right.
  std::vector<Outcome> CallEveryMethod(const RpcSecurityConfig& client) {
    std::vector<Outcome> out;
    CallPs(client, out);
    CallCoordinator(client, out);
    CallRing(client, out);
    return out;
  }

  void CallPs(const RpcSecurityConfig& client, std::vector<Outcome>& out) {
    auto stub = NewStub<v1::ParameterServer>(servers_->ps.port, client);
    Record(out, "ParameterServer.Push", [&](grpc::ClientContext* context) {
      v1::PushResponse response;
      auto writer = stub->Push(context, &response);
      v1::PushRequest request;
      v1::PushHeader* header = request.mutable_header();
      header->set_job_id("job");
      header->set_worker_id("a");
      header->set_num_samples(1);
      const float grad[4] = {0.5f, 0.5f, 0.5f, 0.5f};
      request.set_chunk_id(0);
      request.set_data(grad, sizeof(grad));
      writer->Write(request);
      writer->WritesDone();
      return writer->Finish();
    });
    Record(out, "ParameterServer.FinalizeStep",
           [&](grpc::ClientContext* context) {
             v1::FinalizeStepRequest request;
             request.set_job_id("job");
             v1::Contributor* c = request.add_contributors();
             c->set_worker_id("a");
             c->set_num_samples(1);
             v1::FinalizeStepResponse response;
             return stub->FinalizeStep(context, request, &response);
           });
    Record(out, "ParameterServer.Pull", [&](grpc::ClientContext* context) {
      v1::PullRequest request;
      request.set_job_id("job");
      request.set_worker_id("a");
      request.set_min_version(1);  // the step above applied
      auto reader = stub->Pull(context, request);
      v1::PullResponse message;
      int messages = 0;
      while (reader->Read(&message)) ++messages;
      const grpc::Status status = reader->Finish();
      return status.ok() && messages != 1
                 ? grpc::Status(grpc::StatusCode::INTERNAL,
                                "not one pull message")
                 : status;
    });
    Record(out, "ParameterServer.ShardInfo", [&](grpc::ClientContext* context) {
      v1::ShardInfoResponse response;
      return stub->ShardInfo(context, v1::ShardInfoRequest(), &response);
    });
    // No checkpoint directory: FAILED_PRECONDITION once past security.
    Record(
        out, "ParameterServer.Checkpoint", [&](grpc::ClientContext* context) {
          v1::CheckpointResponse response;
          return stub->Checkpoint(context, v1::CheckpointRequest(), &response);
        });
    Record(out, "ParameterServer.Restore", [&](grpc::ClientContext* context) {
      v1::RestoreResponse response;
      return stub->Restore(context, v1::RestoreRequest(), &response);
    });
  }

  void CallCoordinator(const RpcSecurityConfig& client,
                       std::vector<Outcome>& out) {
    auto stub = NewStub<v1::Coordinator>(servers_->coordinator_port, client);
    std::string worker;
    Record(out, "Coordinator.Register", [&](grpc::ClientContext* context) {
      v1::RegisterResponse response;
      grpc::Status status =
          stub->Register(context, v1::RegisterRequest(), &response);
      worker = response.worker_id();
      return status;
    });
    Record(out, "Coordinator.Heartbeat", [&](grpc::ClientContext* context) {
      v1::HeartbeatRequest request;
      request.set_worker_id(worker);
      v1::HeartbeatResponse response;
      return stub->Heartbeat(context, request, &response);
    });
    Record(out, "Coordinator.GetJob", [&](grpc::ClientContext* context) {
      v1::JobSpec response;
      return stub->GetJob(context, v1::GetJobRequest(), &response);
    });
    Record(out, "Coordinator.NextTask", [&](grpc::ClientContext* context) {
      v1::NextTaskRequest request;
      request.set_worker_id(worker);
      v1::NextTaskResponse response;
      return stub->NextTask(context, request, &response);
    });
    Record(out, "Coordinator.Status", [&](grpc::ClientContext* context) {
      v1::StatusResponse response;
      return stub->Status(context, v1::StatusRequest(), &response);
    });
    Record(out, "Coordinator.Leave", [&](grpc::ClientContext* context) {
      v1::LeaveRequest request;
      request.set_worker_id(worker);
      v1::LeaveResponse response;
      return stub->Leave(context, request, &response);
    });
  }

  void CallRing(const RpcSecurityConfig& client, std::vector<Outcome>& out) {
    auto stub = NewStub<v1::RingPeer>(servers_->ring->port, client);
    Record(out, "RingPeer.Exchange", [&](grpc::ClientContext* context) {
      v1::ExchangeSummary summary;
      auto writer = stub->Exchange(context, &summary);
      v1::RingMessage message;
      v1::RingHello* hello = message.mutable_hello();
      hello->set_job_id(kRingJob);
      hello->set_generation(1);
      hello->set_ring_size(2);
      hello->set_from_worker_id("w0");
      const float piece[2] = {1.0f, 2.0f};
      message.set_data(piece, sizeof(piece));
      writer->Write(message);
      writer->WritesDone();
      const grpc::Status status = writer->Finish();
      return status.ok() && summary.messages() != 1
                 ? grpc::Status(grpc::StatusCode::INTERNAL, "message not filed")
                 : status;
    });
    Record(out, "RingPeer.GetWeights", [&](grpc::ClientContext* context) {
      v1::WeightsRequest request;
      request.set_job_id(kRingJob);
      auto reader = stub->GetWeights(context, request);
      v1::WeightsChunk chunk;
      int chunks = 0;
      while (reader->Read(&chunk)) ++chunks;
      const grpc::Status status = reader->Finish();
      return status.ok() && chunks != 1
                 ? grpc::Status(grpc::StatusCode::INTERNAL,
                                "not one weights chunk")
                 : status;
    });
  }

  // Runs `call` with a fresh context that has the short deadline.
  template <typename Call>
  static void Record(std::vector<Outcome>& out, const std::string& name,
                     Call call) {
    grpc::ClientContext context;
    SetDeadline(context, kDeadline);
    out.emplace_back(name, call(&context));
  }

  // Every call got `code`, with `message` in its text when not empty.
  static void ExpectAll(const std::vector<Outcome>& outcomes,
                        grpc::StatusCode code,
                        const std::string& message = "") {
    ASSERT_EQ(outcomes.size(), 14u);
    for (const auto& [name, status] : outcomes) {
      EXPECT_EQ(status.error_code(), code)
          << name << ": " << status.error_message();
      EXPECT_THAT(status.error_message(), HasSubstr(message)) << name;
    }
  }

  // Every call passed security: OK, except Checkpoint and Restore which
  // reach the shard and find no checkpoint directory.
  static void ExpectAllAccepted(const std::vector<Outcome>& outcomes) {
    ASSERT_EQ(outcomes.size(), 14u);
    for (const auto& [name, status] : outcomes) {
      const grpc::StatusCode want = name == "ParameterServer.Checkpoint" ||
                                            name == "ParameterServer.Restore"
                                        ? grpc::StatusCode::FAILED_PRECONDITION
                                        : grpc::StatusCode::OK;
      EXPECT_EQ(status.error_code(), want)
          << name << ": " << status.error_message();
    }
  }

  std::unique_ptr<Servers> servers_;
};

}  // namespace ferry::tls_test

#endif  // FERRY_TESTS_INTEGRATION_TLS_AUTH_FIXTURE_H_
