#include "coordinator/job_progress.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/status_macros.h"

namespace ferry {
namespace {

// A pipeline step's figures: a stage of the job's (or the whole model
// alone), finite non-negative times and counts.
absl::Status CheckPipelineFigures(const v1::PipelineStepFigures& f,
                                  int job_stages) {
  const bool ok = (f.stages() == 1 || f.stages() == job_stages) &&
                  f.stage() >= 0 && f.stage() < f.stages() &&
                  std::isfinite(f.busy_seconds()) && f.busy_seconds() >= 0 &&
                  std::isfinite(f.wait_seconds()) && f.wait_seconds() >= 0 &&
                  std::isfinite(f.step_seconds()) && f.step_seconds() >= 0 &&
                  f.activation_bytes() >= 0 && f.neighbour_bytes_sent() >= 0 &&
                  f.neighbour_bytes_received() >= 0;
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "the report's pipeline figures are not a stage's of the job's ",
      job_stages, " (stage ", f.stage(), " of ", f.stages(),
      ", or negative or non-finite times or bytes)"));
}

void AddPipelineFigures(const v1::PipelineStepFigures& f,
                        v1::PipelineStageTotals& t) {
  if (t.steps() == 0) {
    const bool alone = f.stages() == 1;
    t.set_role(alone ? std::string("alone")
                     : absl::StrCat("stage ", f.stage(), " of ", f.stages()));
    t.set_stage(f.stage());
    t.set_stages(f.stages());
  }
  t.set_steps(t.steps() + 1);
  t.set_busy_seconds(t.busy_seconds() + f.busy_seconds());
  t.set_wait_seconds(t.wait_seconds() + f.wait_seconds());
  t.set_step_seconds(t.step_seconds() + f.step_seconds());
  t.set_peak_activation_bytes(
      std::max(t.peak_activation_bytes(), f.activation_bytes()));
  t.set_neighbour_bytes_sent(t.neighbour_bytes_sent() +
                             f.neighbour_bytes_sent());
  t.set_neighbour_bytes_received(t.neighbour_bytes_received() +
                                 f.neighbour_bytes_received());
}

double UnixSeconds(absl::Time t) {
  return absl::ToDoubleSeconds(t - absl::UnixEpoch());
}
absl::Time FromUnixSeconds(double s) {
  return absl::UnixEpoch() + absl::Seconds(s);
}

v1::ThroughputWindowState WindowToProto(const ThroughputWindow::State& w) {
  v1::ThroughputWindowState p;
  if (w.first.has_value()) {
    p.set_has_first(true);
    p.set_first_end_unix_seconds(UnixSeconds(w.first->ended));
    p.set_first_samples(w.first->samples);
    p.set_first_reports(w.first->reports);
    p.set_first_compute_seconds(w.first->compute_seconds);
    p.set_first_comm_seconds(w.first->comm_seconds);
  }
  if (w.last_end.has_value()) {
    p.set_last_end_unix_seconds(UnixSeconds(*w.last_end));
  }
  if (w.earliest_began.has_value()) {
    p.set_earliest_began_unix_seconds(UnixSeconds(*w.earliest_began));
  }
  p.set_steps(w.inside.steps);
  p.set_samples(w.inside.samples);
  p.set_reports(w.inside.reports);
  p.set_compute_seconds(w.inside.compute_seconds);
  p.set_comm_seconds(w.inside.comm_seconds);
  return p;
}

ThroughputWindow::State WindowFromProto(const v1::ThroughputWindowState& p) {
  ThroughputWindow::State w;
  if (p.has_first()) {
    w.first = TimedStep{.ended = FromUnixSeconds(p.first_end_unix_seconds()),
                        .began = std::nullopt,
                        .samples = p.first_samples(),
                        .reports = p.first_reports(),
                        .compute_seconds = p.first_compute_seconds(),
                        .comm_seconds = p.first_comm_seconds()};
    w.last_end = FromUnixSeconds(p.last_end_unix_seconds());
    w.earliest_began = FromUnixSeconds(p.earliest_began_unix_seconds());
  }
  w.inside.steps = p.steps();
  w.inside.samples = p.samples();
  w.inside.reports = p.reports();
  w.inside.compute_seconds = p.compute_seconds();
  w.inside.comm_seconds = p.comm_seconds();
  return w;
}

}  // namespace

absl::Status JobProgress::AddReport(const v1::StepReport& done) {
  if (done.has_pipeline()) {
    const v1::PipelineStepFigures& f = done.pipeline();
    RETURN_IF_ERROR(CheckPipelineFigures(f, pipeline_stages_));
    AddPipelineFigures(f, pipeline_totals_[{f.stages() == 1, f.stage()}]);
  }
  compute_seconds_ += done.compute_seconds();
  unique_ids_ += done.unique_ids();
  comm_seconds_ += done.comm_seconds();
  if (done.num_samples() > 0 && !done.failed()) {
    const double loss = done.loss_sum() / done.num_samples();
    recent_loss_ = recent_loss_ == 0.0 ? loss : 0.9 * recent_loss_ + 0.1 * loss;
  }
  return absl::OkStatus();
}

void JobProgress::CountDigest(bool equal) {
  ++digest_checks_;
  if (!equal) ++digest_mismatches_;
}

void JobProgress::TakeBack(int64_t samples) {
  samples_applied_ -= samples;
  window_.Discount(samples);
}

void JobProgress::CountBytes(const std::string& role, int64_t sent,
                             int64_t received) {
  (*own_bytes_.mutable_sent())[role] += sent;
  (*own_bytes_.mutable_received())[role] += received;
}

void JobProgress::FillStatus(v1::StatusResponse& s, double start_unix) const {
  s.set_train_loss(recent_loss_);
  const WindowFigures w = window_.figures();
  s.set_samples_per_second(w.samples_per_second());
  if (const std::optional<absl::Time> first = window_.first_end()) {
    s.set_startup_seconds(UnixSeconds(*first) - start_unix);
  }
  s.set_window_seconds(w.seconds);
  s.set_window_samples(w.samples);
  s.set_window_steps(w.steps);
  s.set_step_seconds(w.step_seconds());
  s.set_window_reports(w.reports);
  s.set_window_compute_seconds(w.compute_seconds);
  s.set_window_comm_seconds(w.comm_seconds);
  s.set_window_work_seconds(w.work_seconds);
  s.set_samples_applied(samples_applied_);
  *s.mutable_coordinator_bytes() = own_bytes_;
  s.set_compute_seconds(compute_seconds_);
  s.set_unique_ids(unique_ids_);
  for (const auto& [key, totals] : pipeline_totals_) *s.add_pipeline() = totals;
  s.set_comm_seconds(comm_seconds_);
  s.set_digest_checks(digest_checks_);
  s.set_digest_mismatches(digest_mismatches_);
}

void JobProgress::SaveTo(v1::CoordinatorState& s) const {
  s.set_samples_applied_total(samples_applied_);
  s.set_compute_seconds(compute_seconds_);
  s.set_comm_seconds(comm_seconds_);
  s.set_unique_ids(unique_ids_);
  for (const auto& [key, totals] : pipeline_totals_) *s.add_pipeline() = totals;
  *s.mutable_window() = WindowToProto(window_.state());
  s.set_digest_checks(digest_checks_);
  s.set_digest_mismatches(digest_mismatches_);
}

void JobProgress::LoadFrom(const v1::CoordinatorState& s) {
  samples_applied_ = s.samples_applied_total();
  compute_seconds_ = s.compute_seconds();
  comm_seconds_ = s.comm_seconds();
  unique_ids_ = s.unique_ids();
  pipeline_totals_.clear();
  for (const v1::PipelineStageTotals& t : s.pipeline()) {
    pipeline_totals_[{t.stages() == 1, t.stage()}] = t;
  }
  window_ = ThroughputWindow(WindowFromProto(s.window()));
  digest_checks_ = s.digest_checks();
  digest_mismatches_ = s.digest_mismatches();
}

}  // namespace ferry
