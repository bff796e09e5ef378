#include "client/supervision.h"

#include <signal.h>
#include <string.h>

#include "absl/strings/str_cat.h"
#include "common/exit_codes.h"

namespace ferry {

std::string DescribeExitCode(int exit_code) {
  if (exit_code <= 128) return absl::StrCat("exited with code ", exit_code);
  const int sig = exit_code - 128;
  const char* abbrev = sig < NSIG ? sigabbrev_np(sig) : nullptr;
  if (abbrev == nullptr) return absl::StrCat("killed by signal ", sig);
  return absl::StrCat("killed by SIG", abbrev);
}

ExitDecision DecideOnExit(const ChildExit& e) {
  ExitDecision d;
  d.reason = DescribeExitCode(e.exit_code);
  if (e.chaos_signalled) absl::StrAppend(&d.reason, " (chaos)");
  if (e.stopping) return d;
  if (e.exit_code == kExitConfig && !e.chaos_signalled) {
    d.kind = ExitDecision::Kind::kConfigError;
    absl::StrAppend(&d.reason, ": invalid configuration, not restarted");
    return d;
  }
  if (e.role == ProcessName::Role::kWorker) {
    if (e.exit_code != 0 && !e.chaos_signalled) {
      d.kind = ExitDecision::Kind::kReport;
      absl::StrAppend(
          &d.reason, "; workers are not restarted, the job goes on without it");
    }
    return d;
  }
  if (e.chaos_signalled) {
    d.kind = ExitDecision::Kind::kRestart;
    return d;
  }
  d.unexpected = true;
  if (e.unexpected_restarts < e.max_restarts) {
    d.kind = ExitDecision::Kind::kRestart;
    absl::StrAppend(&d.reason, " unexpectedly (restart ",
                    e.unexpected_restarts + 1, " of at most ", e.max_restarts,
                    ")");
  } else {
    d.kind = ExitDecision::Kind::kFail;
    absl::StrAppend(&d.reason, " unexpectedly after ", e.unexpected_restarts,
                    " restarts (--max-restarts ", e.max_restarts, ")");
  }
  return d;
}

bool JobHasNoWorkersLeft(const WorkerPresence& p) {
  return p.live_workers == 0 && !p.join_pending && !p.job_finished &&
         !p.training_done && p.without_workers > p.grace;
}

}  // namespace ferry
