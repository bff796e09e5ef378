// The decisions `ferry local` takes as a supervisor, as pure functions (the
// process handling lives in process_supervisor.h):
//   - what to do when a child exits (restart a shard or the coordinator, as a
//     Kubernetes StatefulSet would; never restart a worker, which is
//     elastic: `join` adds new ones);
//   - whether a job without workers must be given up.
//
// Thread safety: stateless.
#ifndef FERRY_CLIENT_SUPERVISION_H_
#define FERRY_CLIENT_SUPERVISION_H_

#include <string>

#include "absl/time/time.h"
#include "client/chaos_plan.h"

namespace ferry {

struct ChildExit {
  ProcessName::Role role = ProcessName::Role::kWorker;
  // Exit code, or 128 + signal number when a signal ended it.
  int exit_code = 0;
  // A chaos `kill` or `term` was sent to this incarnation of the process.
  bool chaos_signalled = false;
  // `ferry local` is shutting down (job finished, interrupted or failed):
  // every exit is expected.
  bool stopping = false;
  // Restarts after deaths that chaos did not cause, so far (this process).
  int unexpected_restarts = 0;
  // The bound on unexpected restarts per process (--max-restarts).
  int max_restarts = 5;
};

struct ExitDecision {
  enum class Kind {
    kIgnore,  // expected: a worker that finished or was told to go, or shutdown
    kReport,  // a worker that died on its own: say so; the job goes on
    kRestart,  // a shard or the coordinator: start it again after the delay
    kFail,     // a shard or the coordinator out of restarts: the job fails
    // Any process that refused its configuration (exit kExitConfig): the
    // same flags would fail the same way, so the job fails at once.
    kConfigError,
  };
  Kind kind = Kind::kIgnore;
  // Counts against ChildExit::max_restarts (an unexpected death).
  bool unexpected = false;
  // One line for stderr ("exited with code 1", "killed by SIGKILL (chaos)").
  std::string reason;
};

// What to do when a child exits:
//   stopping                                  -> kIgnore
//   any role, exit kExitConfig, not chaos     -> kConfigError
//   worker, exit 0 or chaos kill/term         -> kIgnore
//   worker, anything else                     -> kReport
//   shard/coordinator, chaos kill/term        -> kRestart (bound not used)
//   shard/coordinator, otherwise (any code, 0 included: a StatefulSet pod
//   restarts whatever its exit code), while unexpected_restarts <
//   max_restarts                              -> kRestart, unexpected
//   shard/coordinator, out of restarts        -> kFail
ExitDecision DecideOnExit(const ChildExit& exit);

// "exited with code 3", "killed by SIGKILL", "killed by signal 64".
std::string DescribeExitCode(int exit_code);

struct WorkerPresence {
  int live_workers = 0;       // running or stopped (SIGSTOP) worker processes
  bool join_pending = false;  // a chaos join is still to come
  bool job_finished = false;  // the coordinator said so
  // The coordinator said every training step is applied: the job is in its
  // final evaluation, which needs no worker (bounded by --timeout only).
  bool training_done = false;
  absl::Duration without_workers;  // how long live_workers has been 0
  absl::Duration grace;  // how long to wait for the job to finish anyway
};

// True when the job cannot finish any more: no worker left, none to join,
// training unfinished, for longer than `grace` (the coordinator may still be
// about to report `finished` after the last workers exited 0).
bool JobHasNoWorkersLeft(const WorkerPresence& p);

}  // namespace ferry

#endif  // FERRY_CLIENT_SUPERVISION_H_
