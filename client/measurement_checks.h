// The physical checks every measured figure set passes before ferry
// publishes it (`ferry bench compare` rows, `ferry local` summaries). A set
// that breaks one was not timed by clocks that bracket the work, and is
// reported as INVALID instead of as a result.
//
// Checked over a window of steps (common/throughput_window.h). Each worker
// runs its steps one after another, so the work of the steps inside the
// window lies within work_seconds (the earliest beginning of any step to
// the last end: the window plus the first step's own span):
//   - exposed communication and compute each fit in the time the workers
//     had: sum over the window's reports <= workers x work_seconds;
//   - on an emulated link, the bytes over the busiest link in one direction
//     fit: bytes <= bandwidth x work_seconds;
//   - samples/s x window = the samples applied in it (within 1 %).
// The first two allow 2 %: the emulation's long-run rate is exact, but a
// message may start on a link that was busy a moment before
// (common/link_shaper.h's tolerance), and the readings are taken around
// the work, not inside it.
#ifndef FERRY_CLIENT_MEASUREMENT_CHECKS_H_
#define FERRY_CLIENT_MEASUREMENT_CHECKS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace ferry {

struct MeasuredWindow {
  double window_seconds = 0;
  double work_seconds = 0;  // WindowFigures::work_seconds
  int64_t window_steps = 0;
  int64_t window_samples = 0;
  double samples_per_second = 0;  // as it is published
  // Summed over the window's worker reports (worker-seconds).
  double compute_worker_seconds = 0;
  double comm_worker_seconds = 0;
  int workers = 0;  // processes training side by side
  // Emulated link (0: none): bytes/s per direction, and the bytes that
  // crossed the busiest link in one direction inside the window.
  double link_bytes_per_second = 0;
  double busiest_link_bytes = 0;
};

// Each broken check as a sentence with its figures; empty when all hold.
std::vector<std::string> CheckMeasurement(const MeasuredWindow& m);

}  // namespace ferry

#endif  // FERRY_CLIENT_MEASUREMENT_CHECKS_H_
