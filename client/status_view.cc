#include "client/status_view.h"

#include <cstdio>

#include "absl/strings/str_format.h"
#include "ferry/v1/coordinator.grpc.pb.h"
#include "google/protobuf/util/json_util.h"
#include "proto/job_convert.h"
#include "proto/rpc_util.h"

namespace ferry {

std::string EvalScoresText(const v1::EvalPoint& eval) {
  if (eval.has_test_auc()) {
    return absl::StrFormat("test auc %.4f logloss %.4f", eval.test_auc(),
                           eval.test_loss());
  }
  return absl::StrFormat("test accuracy %.4f", eval.test_accuracy());
}

int ShowStatus(const std::string& coordinator, bool json) {
  auto stub = v1::Coordinator::NewStub(MakeChannel(coordinator));
  grpc::ClientContext context;
  SetDeadline(context, absl::Seconds(5));
  v1::StatusResponse s;
  const grpc::Status rpc = stub->Status(&context, v1::StatusRequest(), &s);
  if (!rpc.ok()) {
    std::fprintf(stderr,
                 "ferry status: cannot reach the coordinator at %s: %s\n",
                 coordinator.c_str(), rpc.error_message().c_str());
    return 1;
  }
  if (json) {
    std::string out;
    google::protobuf::util::JsonPrintOptions options;
    options.add_whitespace = true;
    options.preserve_proto_field_names = true;
    (void)google::protobuf::util::MessageToJsonString(s, &out, options);
    std::printf("%s\n", out.c_str());
    return 0;
  }
  const v1::JobSpec& job = s.job();
  std::printf("job %s: %s %s, model %s, %s, global batch %d, %d epochs%s\n",
              job.job_id().c_str(), ModeName(job.mode()).c_str(),
              ConsistencyName(job.consistency(), job.staleness()).c_str(),
              job.model().c_str(), job.dataset().c_str(), job.global_batch(),
              job.epochs(), s.finished() ? " (finished)" : "");
  std::printf(
      "generation %lld, step %lld, epoch %lld/%d (%.1f%%), %.0f samples/s, "
      "loss %.4f, "
      "%.0f s\n",
      static_cast<long long>(s.generation()), static_cast<long long>(s.step()),
      static_cast<long long>(s.epoch() + 1), job.epochs(),
      100 * s.epoch_progress(), s.samples_per_second(), s.train_loss(),
      s.wall_seconds());
  if (s.window_steps() > 0) {
    std::printf(
        "throughput: %lld samples in %.2f s after a %.2f s start-up, %.4f s "
        "per step (the steps' own clocks)\n",
        static_cast<long long>(s.window_samples()), s.window_seconds(),
        s.startup_seconds(), s.step_seconds());
  }
  // What went wrong, above the figures' details.
  if (!s.error().empty()) std::printf("error: %s\n", s.error().c_str());
  if (!s.final_eval_error().empty()) {
    std::printf("final evaluation failed: %s\n", s.final_eval_error().c_str());
  }
  if (!s.state_error().empty()) {
    std::printf("warning: %s\n", s.state_error().c_str());
  }
  if (s.evals_size() > 0) {
    const v1::EvalPoint& e = s.evals(s.evals_size() - 1);
    std::printf("%s at step %lld\n", EvalScoresText(e).c_str(),
                static_cast<long long>(e.step()));
  }
  std::printf("%d members (%lld seen):\n", s.members_size(),
              static_cast<long long>(s.workers_seen()));
  for (const v1::MemberStatus& m : s.members()) {
    std::printf("  %-6s pid %-7lld host %-16s last heartbeat %.1f s ago\n",
                m.worker_id().c_str(), static_cast<long long>(m.pid()),
                m.hostname().c_str(), m.seconds_since_heartbeat());
  }
  return 0;
}

}  // namespace ferry
