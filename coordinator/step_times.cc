#include "coordinator/step_times.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace ferry {
namespace {

bool Reading(double seconds) { return std::isfinite(seconds) && seconds >= 0; }

absl::Time FromUnix(double seconds) {
  return absl::UnixEpoch() + absl::Seconds(seconds);
}

}  // namespace

absl::Status CheckStepTimes(const v1::StepReport& r) {
  const double began = r.began_unix_seconds();
  const double ended = r.exchanged_unix_seconds();
  const bool ordered = began == 0 || ended == 0 || began <= ended;
  if (Reading(began) && Reading(ended) && ordered &&
      Reading(r.compute_seconds()) && Reading(r.comm_seconds())) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "the report's step times are impossible (began %g, exchanged %g unix "
      "seconds, compute %g s, comm %g s): finite, >= 0 and the exchange not "
      "before the beginning expected",
      began, ended, r.compute_seconds(), r.comm_seconds()));
}

ReportTimes TimesOf(const v1::StepReport& r, absl::Time arrival) {
  ReportTimes t;
  t.ended = r.exchanged_unix_seconds() > 0
                ? FromUnix(r.exchanged_unix_seconds())
                : arrival;
  t.began =
      r.began_unix_seconds() > 0 ? FromUnix(r.began_unix_seconds()) : t.ended;
  t.began = std::min(t.began, t.ended);
  return t;
}

}  // namespace ferry
