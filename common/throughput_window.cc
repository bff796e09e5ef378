#include "common/throughput_window.h"

#include <algorithm>

namespace ferry {
namespace {

void AddInside(WindowFigures& inside, const TimedStep& step) {
  ++inside.steps;
  inside.samples += step.samples;
  inside.reports += step.reports;
  inside.compute_seconds += step.compute_seconds;
  inside.comm_seconds += step.comm_seconds;
}

// The order that picks the step opening the window: the earliest end, ties
// broken by the other fields so that the choice does not depend on the
// order of the calls (equal steps are interchangeable).
bool OpensBefore(const TimedStep& a, const TimedStep& b) {
  if (a.ended != b.ended) return a.ended < b.ended;
  if (a.samples != b.samples) return a.samples < b.samples;
  if (a.reports != b.reports) return a.reports < b.reports;
  if (a.compute_seconds != b.compute_seconds)
    return a.compute_seconds < b.compute_seconds;
  return a.comm_seconds < b.comm_seconds;
}

}  // namespace

double WindowFigures::samples_per_second() const {
  return seconds > 0 ? samples / seconds : 0.0;
}

double WindowFigures::step_seconds() const {
  return steps > 0 ? seconds / steps : 0.0;
}

void ThroughputWindow::Add(const TimedStep& step) {
  const absl::Time began =
      std::min(step.began.value_or(step.ended), step.ended);
  state_.earliest_began = state_.earliest_began.has_value()
                              ? std::min(*state_.earliest_began, began)
                              : began;
  state_.last_end = state_.last_end.has_value()
                        ? std::max(*state_.last_end, step.ended)
                        : step.ended;
  if (!state_.first.has_value()) {
    state_.first = step;
  } else if (OpensBefore(step, *state_.first)) {
    // An earlier step reported late: it opens the window, and the step
    // that opened it so far is inside now.
    AddInside(state_.inside, *state_.first);
    state_.first = step;
  } else {
    AddInside(state_.inside, step);
  }
}

void ThroughputWindow::Discount(int64_t samples) {
  state_.inside.samples = std::max<int64_t>(0, state_.inside.samples - samples);
}

std::optional<absl::Time> ThroughputWindow::first_end() const {
  if (!state_.first.has_value()) return std::nullopt;
  return state_.first->ended;
}

WindowFigures ThroughputWindow::figures() const {
  WindowFigures f = state_.inside;
  if (state_.first.has_value() && state_.last_end.has_value()) {
    f.seconds = absl::ToDoubleSeconds(*state_.last_end - state_.first->ended);
    f.work_seconds =
        absl::ToDoubleSeconds(*state_.last_end - *state_.earliest_began);
  }
  return f;
}

}  // namespace ferry
