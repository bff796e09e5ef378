#include "client/measurement_checks.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace ferry {

namespace {

constexpr double kSlack = 1.02;  // see the header

}  // namespace

std::vector<std::string> CheckMeasurement(const MeasuredWindow& m) {
  std::vector<std::string> broken;
  if (m.window_steps <= 0 || !(m.window_seconds > 0)) {
    broken.push_back(absl::StrFormat("no steady window: %d steps over %.6f s",
                                     m.window_steps, m.window_seconds));
    return broken;
  }
  const double work = std::max(m.work_seconds, m.window_seconds);
  const double available = std::max(1, m.workers) * work;
  const auto fits = [&](double worker_seconds, const char* what) {
    if (!std::isfinite(worker_seconds) || worker_seconds < 0 ||
        worker_seconds > available * kSlack) {
      broken.push_back(absl::StrFormat(
          "%s longer than the step: %.4f worker-s in %d workers x %.4f s "
          "(%.1f%% of the time the window's work had)",
          what, worker_seconds, std::max(1, m.workers), work,
          100 * worker_seconds / available));
    }
  };
  fits(m.comm_worker_seconds, "exposed comm");
  fits(m.compute_worker_seconds, "compute");
  if (m.link_bytes_per_second > 0) {
    const double floor = m.busiest_link_bytes / m.link_bytes_per_second;
    if (work * kSlack < floor) {
      broken.push_back(absl::StrFormat(
          "faster than the link: %.0f bytes over the busiest link in one "
          "direction need >= %.4f s at %.4g B/s, the window's work had "
          "%.4f s",
          m.busiest_link_bytes, floor, m.link_bytes_per_second, work));
    }
  }
  const double implied = m.samples_per_second * m.window_seconds;
  if (std::abs(implied - static_cast<double>(m.window_samples)) >
      0.01 * static_cast<double>(m.window_samples) + 1) {
    broken.push_back(absl::StrFormat(
        "samples/s x window = %.0f samples, but %d were applied in it", implied,
        m.window_samples));
  }
  return broken;
}

}  // namespace ferry
