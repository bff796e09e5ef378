#include "coordinator/eval_schedule.h"

namespace ferry {

void EvalSchedule::QueueEpochEnd(int64_t version, int64_t epoch,
                                 bool hold_steps) {
  queue_.push_back(
      {.version = version, .epoch = epoch, .holds_steps = hold_steps});
  if (hold_steps) steps_held_ = true;
}

bool EvalSchedule::EndTraining(int64_t version, int64_t epoch) {
  if (training_done_) return false;
  training_done_ = true;
  queue_.push_back({.version = version, .epoch = epoch, .final = true});
  return true;
}

EvalRequest EvalSchedule::Pop() {
  EvalRequest request = queue_.front();
  queue_.pop_front();
  return request;
}

bool EvalSchedule::ReleaseSteps() {
  if (!steps_held_) return false;
  steps_held_ = false;
  return true;
}

void EvalSchedule::AddResult(const v1::EvalPoint& point) {
  if (point.final()) final_eval_seconds_ = point.duration_seconds();
  results_.push_back(point);
}

void EvalSchedule::Finish(absl::Time now, const absl::Status& failure) {
  finished_ = true;
  finish_time_ = now;
  final_eval_error_ = failure.ok() ? "" : failure.ToString();
}

void EvalSchedule::FillStatus(v1::StatusResponse& status) const {
  status.set_eval_seconds(final_eval_seconds_);
  for (const v1::EvalPoint& e : results_) *status.add_evals() = e;
  status.set_finished(finished_);
  status.set_training_done(training_done_);
  status.set_final_eval_error(final_eval_error_);
}

void EvalSchedule::SaveTo(v1::CoordinatorState& state) const {
  for (const v1::EvalPoint& e : results_) *state.add_evals() = e;
  state.set_training_done(training_done_);
  state.set_final_eval_seconds(final_eval_seconds_);
}

void EvalSchedule::LoadFrom(const v1::CoordinatorState& state) {
  results_.assign(state.evals().begin(), state.evals().end());
  final_eval_seconds_ = state.final_eval_seconds();
}

}  // namespace ferry
