// The coordinator's training curves: per committed step (sync), per applied
// task (async), per evaluation, handed to CoordinatorOptions::metrics.
#include <algorithm>
#include <set>
#include <string>

#include "coordinator/coordinator.h"
#include "coordinator/step_times.h"

namespace ferry {

void Coordinator::AddStepReport(OpenStep& step, const std::string& worker_id,
                                const v1::StepReport& done) {
  step.loss_sum += done.loss_sum();
  step.correct += done.correct();
  step.reported_samples += done.num_samples();
  step.compute_seconds += done.compute_seconds();
  step.comm_seconds += done.comm_seconds();
  ++step.reports;
  step.reported_bytes[worker_id] = {done.bytes(), done.peer_bytes()};
  const ReportTimes t = TimesOf(done, Now());
  step.began =
      step.began.has_value() ? std::min(*step.began, t.began) : t.began;
  step.ended =
      step.ended.has_value() ? std::max(*step.ended, t.ended) : t.ended;
}

void Coordinator::FillCommon(StepMetrics& m, const OpenStep* step,
                             absl::Time began, absl::Time ended) {
  m.time = Now();
  const double start_unix = start_unix_;
  const auto elapsed = [start_unix](absl::Time t) {
    return absl::ToDoubleSeconds(t - absl::UnixEpoch()) - start_unix;
  };
  m.elapsed_seconds = elapsed(m.time);
  m.began_seconds = elapsed(began);
  m.ended_seconds = elapsed(ended);
  // From the previous step's end (the lines' step_seconds add up to the
  // throughput window's span), the first step from its own beginning.
  m.step_seconds =
      absl::ToDoubleSeconds(ended - last_step_end_.value_or(began));
  last_step_end_ = std::max(last_step_end_.value_or(ended), ended);
  m.mode = ModeName(options_.job.mode());
  // Cumulative counts of every worker, those that left included: for the
  // step's reporters as of their report of it, for the others the latest.
  std::set<std::string> counted;
  auto add = [&](const std::string& id, const v1::ByteCounts& bytes,
                 const v1::ByteCounts& peers) {
    if (bytes.sent().empty() && bytes.received().empty()) return;
    if (!counted.insert(id).second) return;
    for (const auto& [role, n] : bytes.sent()) {
      m.bytes_sent += n;
      (role == "coordinator" ? m.control_bytes_sent : m.data_bytes_sent) += n;
    }
    for (const auto& [role, n] : bytes.received()) {
      m.bytes_received += n;
      (role == "coordinator" ? m.control_bytes_received
                             : m.data_bytes_received) += n;
    }
    for (const auto& [peer, n] : peers.sent()) m.peers[peer].sent += n;
    for (const auto& [peer, n] : peers.received()) m.peers[peer].received += n;
    for (const auto& [peer, n] : peers.calls()) m.peers[peer].calls += n;
  };
  if (step != nullptr) {
    for (const auto& [id, counts] : step->reported_bytes)
      add(id, counts.first, counts.second);
  }
  for (const auto& [id, member] : membership_.members())
    add(id, member.bytes, member.peer_bytes);
  const auto& departed_peers = membership_.departed_peer_bytes();
  for (const auto& [id, bytes] : membership_.departed_bytes()) {
    const auto peers = departed_peers.find(id);
    add(id, bytes,
        peers == departed_peers.end() ? v1::ByteCounts::default_instance()
                                      : peers->second);
  }
  m.bytes_workers = static_cast<int64_t>(counted.size());
}

void Coordinator::RecordAppliedStep(const OpenStep& step, absl::Time began,
                                    absl::Time ended) {
  TimedStep timed{.ended = ended,
                  .began = began,
                  .reports = step.reports,
                  .compute_seconds = step.compute_seconds,
                  .comm_seconds = step.comm_seconds};
  for (const Slot& s : step.slots) timed.samples += s.pushed ? s.samples : 0;
  progress_.AddTimed(timed);
  if (options_.metrics == nullptr) return;
  StepMetrics m;
  FillCommon(m, &step, began, ended);
  m.step = step.step + 1;
  m.epoch = step.epoch;
  for (const Slot& s : step.slots) {
    if (!s.pushed) continue;
    m.samples += s.samples;
    ++m.workers;
  }
  if (step.reported_samples > 0) {
    m.train_loss = step.loss_sum / step.reported_samples;
    m.train_accuracy =
        static_cast<double>(step.correct) / step.reported_samples;
  }
  if (step.reports > 0) {
    m.compute_seconds = step.compute_seconds / step.reports;
    m.comm_seconds = step.comm_seconds / step.reports;
  }
  pending_metrics_.emplace_back(std::move(m), std::nullopt);
}

void Coordinator::RecordAppliedTask(const v1::StepReport& done,
                                    absl::Time began, absl::Time ended) {
  progress_.AddTimed({.ended = ended,
                      .began = began,
                      .samples = done.num_samples(),
                      .reports = 1,
                      .compute_seconds = done.compute_seconds(),
                      .comm_seconds = done.comm_seconds()});
  if (options_.metrics == nullptr) return;
  StepMetrics m;
  FillCommon(m, nullptr, began, ended);
  m.step = tasks_applied_;
  m.epoch = queue_->epoch();
  m.samples = done.num_samples();
  m.workers = 1;
  if (done.num_samples() > 0) {
    m.train_loss = done.loss_sum() / done.num_samples();
    m.train_accuracy = static_cast<double>(done.correct()) / done.num_samples();
  }
  m.compute_seconds = done.compute_seconds();
  m.comm_seconds = done.comm_seconds();
  pending_metrics_.emplace_back(std::move(m), std::nullopt);
}

v1::EvalPoint ToEvalPoint(const TestScores& scores) {
  v1::EvalPoint point;
  point.set_test_accuracy(scores.accuracy);
  point.set_test_loss(scores.loss);
  if (scores.auc.has_value()) point.set_test_auc(*scores.auc);
  if (scores.embedding_rows.has_value()) {
    point.set_embedding_rows(*scores.embedding_rows);
  }
  if (scores.embedding_pending_ids.has_value()) {
    point.set_embedding_pending_ids(*scores.embedding_pending_ids);
  }
  return point;
}

void Coordinator::QueueEvalMetrics(const v1::EvalPoint& point) {
  if (options_.metrics == nullptr) return;
  EvalMetrics m;
  m.time = Now();
  m.elapsed_seconds =
      absl::ToDoubleSeconds(m.time - absl::UnixEpoch()) - start_unix_;
  m.mode = ModeName(options_.job.mode());
  const bool sync = rules_.sync();
  m.step = sync ? point.step() : tasks_applied_;
  m.final = point.final();
  m.epoch = point.epoch() >= 0 ? point.epoch() : queue_->epoch();
  m.test_accuracy = point.test_accuracy();
  m.test_loss = point.test_loss();
  if (point.has_test_auc()) m.test_auc = point.test_auc();
  pending_metrics_.emplace_back(std::nullopt, std::move(m));
}

void Coordinator::FlushMetrics() {
  if (options_.metrics == nullptr) return;
  absl::MutexLock order(&metrics_mu_);
  std::vector<std::pair<std::optional<StepMetrics>, std::optional<EvalMetrics>>>
      points;
  {
    absl::MutexLock lock(&mu_);
    points.swap(pending_metrics_);
  }
  for (const auto& [step, eval] : points) {
    if (step.has_value()) options_.metrics->RecordStep(*step);
    if (eval.has_value()) options_.metrics->RecordEval(*eval);
  }
}

}  // namespace ferry
