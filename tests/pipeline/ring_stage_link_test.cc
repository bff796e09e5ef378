// Pipeline stages over the ring's real gRPC streams: one RingPeer server per
// stage on loopback, a forward and a backward GrpcRingTransport per stage.
#include "pipeline/ring_stage_link.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ring/grpc_ring_transport.h"
#include "ring/ring_peer_service.h"
#include "tests/pipeline/pipeline_fixture.h"

namespace ferry {
namespace {

constexpr char kJob[] = "pipeline-test";

// P stages' peer servers and links.
struct GrpcPipeline {
  std::vector<std::unique_ptr<RingPeerServer>> peers;
  std::vector<std::unique_ptr<GrpcRingTransport>> forward, backward;
  std::vector<std::unique_ptr<RingStageLink>> links;

  explicit GrpcPipeline(int stages) {
    std::vector<RingMemberAddress> in_order;
    for (int s = 0; s < stages; ++s) {
      auto peer = StartRingPeerServer("127.0.0.1:0");
      EXPECT_TRUE(peer.ok()) << peer.status();
      (*peer)->service->set_job_id(kJob);
      in_order.push_back(
          {absl::StrCat("w", s), absl::StrCat("127.0.0.1:", (*peer)->port)});
      peers.push_back(std::move(*peer));
    }
    const std::vector<RingMemberAddress> reversed(in_order.rbegin(),
                                                  in_order.rend());
    for (int s = 0; s < stages; ++s) {
      forward.push_back(Transport(s, s, in_order));
      backward.push_back(Transport(s, stages - 1 - s, reversed));
      links.push_back(std::make_unique<RingStageLink>(
          s, stages, forward.back().get(), backward.back().get()));
    }
  }

  std::unique_ptr<GrpcRingTransport> Transport(
      int stage, int rank, const std::vector<RingMemberAddress>& ring) {
    GrpcRingTransportOptions o;
    o.job_id = kJob;
    o.generation = 1;
    o.rank = rank;
    o.ring = ring;
    o.mailbox = peers[stage]->mailbox.get();
    o.counter = peers[stage]->counter.get();
    auto t = GrpcRingTransport::Create(o);
    EXPECT_TRUE(t.ok()) << t.status();
    return std::move(*t);
  }

  void Abort() {
    for (auto& t : forward) t->Abort();
    for (auto& t : backward) t->Abort();
  }
};

TEST(RingStageLinkTest, ThreeStagesOverGrpcEqualOneProcess) {
  for (PipelineSchedule schedule :
       {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B}) {
    const PipelineCase c = MakeCase(MlpWithDropout(), 3, 12, 4, schedule);
    const OneProcessStep want = RunOneProcess(c);
    GrpcPipeline pipeline(3);
    PipelineRun run = RunPipeline(
        c, [&](int s) -> StageLink& { return *pipeline.links[s]; },
        [&](int, const absl::Status&) { pipeline.Abort(); });
    for (const absl::Status& status : run.statuses) {
      ASSERT_TRUE(status.ok()) << status;
    }
    EXPECT_LT(WorstRelativeError(run.grads, want.grads), 1e-4)
        << PipelineScheduleName(schedule);
    EXPECT_NEAR(run.loss.loss_sum, want.loss.loss_sum,
                1e-4 * std::abs(want.loss.loss_sum));
    // The peers' byte accounting saw the activations and gradients.
    EXPECT_GT(run.stages[1].bytes_received, 0);
    EXPECT_EQ(run.stages[1].bytes_received, run.stages[1].bytes_sent);
    EXPECT_GE(pipeline.peers[1]->counter->Get().received,
              run.stages[1].bytes_received);
  }
}

TEST(RingStageLinkTest, LostStageFailsItsNeighboursWithinTheDeadline) {
  PipelineCase c =
      MakeCase(MlpWithDropout(), 3, 12, 4, PipelineSchedule::k1F1B);
  c.receive_timeout = absl::Milliseconds(300);
  GrpcPipeline pipeline(3);
  // Stage 2's process is gone: its server is shut down before the step.
  pipeline.peers[2]->server->Shutdown();
  const absl::Time start = absl::Now();
  PipelineRun run =
      RunPipeline(c, [&](int s) -> StageLink& { return *pipeline.links[s]; });
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_FALSE(run.statuses[1].ok());
  EXPECT_FALSE(run.statuses[0].ok());
  EXPECT_NE(run.statuses[1].message().find("pipeline stage 1"),
            std::string::npos)
      << run.statuses[1];
}

TEST(RingStageLinkTest, TagsKeepStepsDirectionsAndMicroBatchesApart) {
  EXPECT_EQ(PipelineTag(0, false, 0), (RingTag{-1, 0, 0}));
  EXPECT_EQ(PipelineTag(5, true, 3), (RingTag{-6, 1, 3}));
  EXPECT_FALSE(PipelineTag(5, true, 3) == PipelineTag(5, false, 3));
  EXPECT_LT(PipelineTag(0, false, 0).op_id, 0);  // apart from ring op ids
}

}  // namespace
}  // namespace ferry
