// Step timelines across processes: where a training step's time goes
// between the workers, the shards and their exchanges
// (bench/step_timeline.py reads them; docs/benchmarks.md shows a use).
//
// Off unless the environment variable FERRY_STEP_TRACE names a directory
// when the process first records. Then every event is kept in memory (at
// most kMaxEvents; later ones are only counted) and written when the
// process exits (or at Flush) to DIR/steptrace-<pid>.txt:
//
//   # ferry step trace: pid <pid> names <names> dropped <count>
//   <CLOCK_MONOTONIC ns> <event name> <step> <arg>
//
// CLOCK_MONOTONIC is one clock for all processes of a host, so the files of
// one job line up. `step` is the training step the event belongs to ("?"
// for kUnknownStep: the reader takes the step the process began last),
// `arg` a shard id where the event has one (else -1). Off, Record costs
// one relaxed atomic load. Thread-safe.
#ifndef FERRY_COMMON_STEP_TRACE_H_
#define FERRY_COMMON_STEP_TRACE_H_

#include <atomic>
#include <climits>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ferry {

enum class StepEvent : uint8_t {
  kBegun,          // worker: the step's weights are in, compute starts
  kComputed,       // worker: its gradient is handed to the exchange
  kFinished,       // worker: the exchange's FinishStep returned
  kPushAcked,      // PS client: shard `arg` answered the push
  kPullLanded,     // PS client: shard `arg`'s values of `step` + 1 are in
  kPushCommitted,  // shard `arg`: a worker's push of `step` committed
  kStepApplied,    // shard `arg`: `step` applied (version step + 1 exists)
};

// The event's name in the trace ("begun", "push_acked", ...).
absl::string_view StepEventName(StepEvent event);

class StepTrace {
 public:
  static constexpr int64_t kMaxEvents = int64_t{1} << 20;  // 24 MiB
  static constexpr int64_t kUnknownStep = INT64_MIN;

  // Records `event` when tracing is on.
  static void Record(StepEvent event, int64_t step, int64_t arg = -1) {
    if (State() == kOff) return;
    RecordSlow(event, step, arg);
  }
  // Adds a name to the process's header line ("worker w0", "ps shard 1");
  // a colocated worker has both.
  static void AddName(absl::string_view name);
  // Writes the file (again, with everything recorded so far). OK when off.
  static absl::Status Flush();
  // Starts tracing into `dir`, whatever the environment (tests).
  static void EnableForTest(const std::string& dir);

 private:
  enum : int { kUnknown = 0, kOff = 1, kOn = 2 };
  static int State() {
    const int s = state_.load(std::memory_order_relaxed);
    return s == kUnknown ? Initialize() : s;
  }
  static int Initialize();
  static void RecordSlow(StepEvent event, int64_t step, int64_t arg);

  static std::atomic<int> state_;
};

}  // namespace ferry

#endif  // FERRY_COMMON_STEP_TRACE_H_
