// ThroughputWindow: the one definition of training throughput behind every
// figure ferry reports (`ferry status`, `ferry local`'s summary JSON, the
// Prometheus gauges and `ferry bench compare`):
//
//   samples/s = samples of the steps that ended inside the steady window
//               / the window's wall-clock span.
//
// A step's end is taken where the work happened: the latest of its
// contributors' clocks when their exchange finished (and, where the
// coordinator applies a step on the shards, when that apply returned),
// never when a report reached the coordinator. The window opens at the end
// of the first step and closes at the end of the last one: start-up (the
// job's start to the first step's end) and the final evaluation (after the
// last step's end) lie outside it and are reported apart. Its samples are
// those of every step but the first, whose work lies before the window.
//
// The figures depend only on the set of steps added, not on the order of
// the calls: reports that arrive late or in batches change nothing.
// Memory is constant (the first step, the last end and running sums).
//
// Thread safety: none; the owner serializes calls (the coordinator holds
// its mutex).
#ifndef FERRY_COMMON_THROUGHPUT_WINDOW_H_
#define FERRY_COMMON_THROUGHPUT_WINDOW_H_

#include <cstdint>
#include <optional>

#include "absl/time/time.h"

namespace ferry {

// One applied step (sync) or task (async), as the workers' clocks saw it.
struct TimedStep {
  absl::Time ended;
  // The earliest beginning of its contributors' work (= ended: unknown).
  std::optional<absl::Time> began;
  int64_t samples = 0;
  int64_t reports = 0;         // contributors that reported it
  double compute_seconds = 0;  // summed over those contributors
  double comm_seconds = 0;     // summed over those contributors
};

// What lies inside the window.
struct WindowFigures {
  int64_t steps = 0;  // steps that ended inside (all but the first)
  int64_t samples = 0;
  int64_t reports = 0;
  double seconds = 0;  // the window's span: last end - first end
  double compute_seconds = 0;
  double comm_seconds = 0;
  // Where the work of the steps inside can lie: from the earliest beginning
  // of any step added to the last end. Each worker runs its steps one after
  // another, so the compute and comm summed over the reports inside are at
  // most workers x work_seconds, and the bytes of those steps crossed a
  // link within it (client/measurement_checks.h). It exceeds `seconds` by
  // the first step's own span (and a late starter's).
  double work_seconds = 0;

  // 0 while the window is empty (fewer than two steps).
  double samples_per_second() const;
  double step_seconds() const;  // seconds per step inside
};

class ThroughputWindow {
 public:
  // What the window keeps, for persistence (a restarted coordinator goes on
  // with the same window).
  struct State {
    std::optional<TimedStep> first;  // the step that ended first
    std::optional<absl::Time> last_end;
    std::optional<absl::Time> earliest_began;
    WindowFigures inside;  // sums of the other steps; the spans unused
  };

  ThroughputWindow() = default;
  explicit ThroughputWindow(State state) : state_(state) {}

  void Add(const TimedStep& step);
  // Takes `samples` out of the window's count (a rollback undid them); the
  // count never goes below zero.
  void Discount(int64_t samples);

  // The first step's end; nullopt before any step.
  std::optional<absl::Time> first_end() const;
  WindowFigures figures() const;
  const State& state() const { return state_; }

 private:
  State state_;
};

}  // namespace ferry

#endif  // FERRY_COMMON_THROUGHPUT_WINDOW_H_
