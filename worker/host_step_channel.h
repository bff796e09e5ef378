// HostStepChannel: the handoff between a distributed worker's training loop
// (its thread runs HostedLeaseTrainer::Train) and a host program whose own
// code computes the gradients (the Python bindings' thread, python/).
//
// One step, as the two sides see it:
//
//   host                                 loop (inside Train)
//   NextLease() ------- asks ----------> WaitForHost()
//                                        exchange.BeginStep (weights written)
//               <------ lease ---------- Offer(lease)
//   forward, backward;
//   Ready(offset, length) -- range ----> TakeEvent(): exchange.Ready
//   Finish(loss) ---------- finish ----> TakeEvent(): exchange.FinishStep
//               <------ applied? ------- Complete(applied)
//
// The loop writes the weights (a pull, a ring's update, a rollback) only
// between the host's NextLease() and the lease it returns, or between its
// Finish() and the answer: the host's own code never runs while its
// parameters change.
//
// Ending: the host's Close() (the program leaves) makes the loop's waits
// return CANCELLED; the loop's End(status) (the worker finished or failed)
// makes the host's waits return that status (OK: NextLease gives nullopt,
// "no more leases").
//
// Evaluations (a job whose model is the host's): an evaluation comes as a
// lease without samples that carries a HostEvalTask; no step opens. The
// host evaluates the weights it holds and ReportEvaluation()s the result,
// which the loop's AwaitEvaluation waits for.
//
// Thread safety: every method is thread-safe. Host methods are meant for one
// host thread, loop methods for the loop's thread.
#ifndef FERRY_WORKER_HOST_STEP_CHANNEL_H_
#define FERRY_WORKER_HOST_STEP_CHANNEL_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ferry {

// An evaluation the host runs (v1::EvalTask): the weights it holds when it
// gets the lease are those of `version`.
struct HostEvalTask {
  int64_t version = 0;
  int64_t epoch = -1;  // the epoch that ended at `version`, or -1
  bool final = false;  // the job's last evaluation
};

// A lease as the host trains it.
struct HostLease {
  int64_t step = 0;   // the coordinator's step (async: task) number
  int64_t epoch = 0;  // the epoch its samples are from
  // Indices into the training set, in the order the job trains them. Empty
  // only for an evaluation (then no step opens).
  std::vector<int64_t> samples = {};
  // An evaluation of the weights the host holds: ReportEvaluation.
  std::optional<HostEvalTask> evaluate = std::nullopt;
};

// The host's figures for a HostEvalTask.
struct HostEvaluation {
  HostEvalTask task;
  double accuracy = 0;
  double loss = 0;
  double duration_seconds = 0;
};

// What the host sends the loop during a step.
struct HostEvent {
  enum class Kind { kReady, kFinish };
  Kind kind = Kind::kReady;
  int64_t offset = 0;  // kReady: the flat range whose gradient is final
  int64_t length = 0;
  // kReady: no sample of the step used those parameters (their gradient is
  // zero and, in torch, None): AbsentGradientExchange::ReadyAbsent.
  bool absent = false;
  double loss_sum = 0;  // kFinish: the loss summed over the lease's samples
  int64_t correct = 0;  // kFinish: samples predicted right (0: unknown)
};

class HostStepChannel {
 public:
  // ---- host side ----
  // Waits up to `wait` for the next lease of samples from the host's
  // training set of `train_samples` samples. nullopt: the worker finished
  // (no more leases). DEADLINE_EXCEEDED when none came within `wait`: the
  // host still counts as asking and calls again (so it can look at its
  // signals meanwhile). Other errors: the worker's error (End);
  // INVALID_ARGUMENT for train_samples <= 0; FAILED_PRECONDITION while a
  // step is open (Finish not called) or after Close().
  absl::StatusOr<std::optional<HostLease>> NextLease(
      int64_t train_samples, absl::Duration wait = absl::InfiniteDuration());
  // The gradient of flat elements [offset, offset + length) is final for
  // the open step; `absent`: no sample of the step used those parameters
  // (HostEvent.absent). FAILED_PRECONDITION without an open step.
  absl::Status Ready(int64_t offset, int64_t length, bool absent = false);
  // Ends the open step and waits for the loop's verdict: true when the step
  // was applied, false when it was given up (a member lost, a shard rolled
  // back: the next lease starts from the state to continue from), or the
  // error that refused the step (INVALID_ARGUMENT: a gradient the host
  // declared is not finite or not in the model; nothing was applied).
  // FAILED_PRECONDITION without an open step; the worker's error (End).
  absl::StatusOr<bool> Finish(double loss_sum, int64_t correct);
  // Whether the host evaluates (it runs the leases' HostEvalTasks).
  void SetEvaluates(bool evaluates);
  // The result of the evaluation a lease asked for. FAILED_PRECONDITION
  // after Close() or the worker's error.
  absl::Status ReportEvaluation(const HostEvaluation& result);
  // The host leaves: the loop's waits end with CANCELLED. Idempotent.
  void Close();

  // ---- loop side ----
  // Waits until the host asks for a lease; the size of the host's training
  // set. CANCELLED after Close().
  absl::StatusOr<int64_t> WaitForHost();
  // Hands `lease` to the host waiting in NextLease (after WaitForHost).
  void Offer(HostLease lease);
  // The host's next event of the open step. CANCELLED after Close().
  absl::StatusOr<HostEvent> TakeEvent();
  // Answers the host's Finish: applied or not, or the step's refusal.
  void Complete(absl::StatusOr<bool> verdict);
  // The worker ended: OK (finished) or its error; the host's waits return.
  void End(absl::Status status);
  bool evaluates() const;
  // After offering an evaluation-only lease: waits for the host's result.
  // CANCELLED after Close(); FAILED_PRECONDITION when the host asked for
  // the next lease without reporting one.
  absl::StatusOr<HostEvaluation> AwaitEvaluation();

 private:
  enum class HostState { kIdle, kAsking, kInStep, kFinishing };

  absl::Status EndedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  HostState host_ ABSL_GUARDED_BY(mu_) = HostState::kIdle;
  int64_t train_samples_ ABSL_GUARDED_BY(mu_) = 0;  // of the last NextLease
  std::optional<HostLease> offered_ ABSL_GUARDED_BY(mu_);
  std::deque<HostEvent> events_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::StatusOr<bool>> verdict_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool evaluates_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<HostEvaluation> evaluation_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Status> ended_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_WORKER_HOST_STEP_CHANNEL_H_
