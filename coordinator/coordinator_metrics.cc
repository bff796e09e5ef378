// The coordinator's training curves: per committed step (sync), per applied
// task (async), per evaluation, handed to CoordinatorOptions::metrics.
#include <algorithm>
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
  m.step_seconds = lines_.StepSeconds(began, ended);
  m.mode = ModeName(options_.job.mode());
  AddWorkerBytes(m, step, membership_);
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
  m.lr = FirstGroupLearningRateAt(optimizer_, step.step);
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
  lines_.AddStep(std::move(m));
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
  m.lr = FirstGroupLearningRateAt(optimizer_, tasks_applied_ - 1);
  m.samples = done.num_samples();
  m.workers = 1;
  if (done.num_samples() > 0) {
    m.train_loss = done.loss_sum() / done.num_samples();
    m.train_accuracy = static_cast<double>(done.correct()) / done.num_samples();
  }
  m.compute_seconds = done.compute_seconds();
  m.comm_seconds = done.comm_seconds();
  lines_.AddStep(std::move(m));
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
  lines_.AddEval(std::move(m));
}

void Coordinator::FlushMetrics() {
  if (options_.metrics == nullptr) return;
  absl::MutexLock order(&metrics_mu_);
  std::vector<MetricsLines::Point> points;
  {
    absl::MutexLock lock(&mu_);
    points = lines_.Take();
  }
  for (const auto& [step, eval] : points) {
    if (step.has_value()) options_.metrics->RecordStep(*step);
    if (eval.has_value()) options_.metrics->RecordEval(*eval);
  }
}

}  // namespace ferry
