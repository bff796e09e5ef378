#include "worker/divergence.h"

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ferry {
namespace {

constexpr char kDivergedPayload[] = "ferry.dev/step-diverged";

}  // namespace

absl::Status DivergedError(int64_t step, const std::string& why) {
  absl::Status status = absl::FailedPreconditionError(
      absl::StrCat("training diverged at step ", step, ": ", why));
  status.SetPayload(kDivergedPayload, absl::Cord(why));
  return status;
}

bool IsDivergence(const absl::Status& status) {
  if (status.GetPayload(kDivergedPayload).has_value()) return true;
  return absl::IsInvalidArgument(status) &&
         absl::StrContains(status.message(), "is not finite");
}

std::string DivergenceReason(const absl::Status& status) {
  if (const auto why = status.GetPayload(kDivergedPayload)) {
    return std::string(*why);
  }
  return absl::StrCat("a pushed gradient was refused: ", status.message());
}

}  // namespace ferry
