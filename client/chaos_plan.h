// `ferry local --chaos SPEC`: scripted churn for a local job. A plan is a
// comma-separated list of events `ACTION:TARGET@TIME`, for example
//   join:2@30s,kill:worker1@45s,term:worker0@60s,kill:ps1@80s,stop:ps0@1m,cont:ps0@70s
//
//   ACTION  join:N    start N more workers (N >= 1 is a count, not a target);
//                     they are numbered after every worker started before
//           kill:T    SIGKILL to T
//           term:T    SIGTERM to T
//           stop:T    SIGSTOP to T (a hang), cont:T SIGCONT (the end of it)
//   TARGET  workerK   the K-th worker in start order (initial workers are
//                     worker0..W-1, joined ones continue the numbering)
//           psK       PS shard K (ps mode)
//           coordinator
//   TIME    a non-negative decimal number with a unit: 500ms, 1.5s, 30s, 2m;
//           measured from the moment `ferry local` started the processes;
//           or stepN: once the job has applied N steps (the coordinator's
//           status `step`), which does not depend on the machine's speed.
//           A plan uses one kind of TIME only.
//
// Pure functions, no I/O. Thread safety: stateless.
#ifndef FERRY_CLIENT_CHAOS_PLAN_H_
#define FERRY_CLIENT_CHAOS_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ferry {

enum class ChaosAction { kJoin, kKill, kTerm, kStop, kCont };

// A process of a local cluster: "coordinator", "ps3", "worker12".
struct ProcessName {
  enum class Role { kCoordinator, kPs, kWorker };
  Role role = Role::kCoordinator;
  int index = 0;  // 0 for the coordinator

  std::string ToString() const;
  bool operator==(const ProcessName& other) const {
    return role == other.role && index == other.index;
  }
};

struct ChaosEvent {
  absl::Duration at;     // since launch, >= 0
  int64_t at_step = -1;  // >= 0: when the job has applied this many steps
  ChaosAction action = ChaosAction::kKill;
  ProcessName target;  // unused for kJoin
  int count = 0;       // kJoin only: workers to start, >= 1

  // The event as it would be written in a spec ("kill:ps1@1.5s").
  std::string ToString() const;
};

// "join", "kill", "term", "stop", "cont".
const char* ChaosActionName(ChaosAction action);
// The signal an action sends (SIGKILL, SIGTERM, SIGSTOP, SIGCONT); 0 for join.
int ChaosSignal(ChaosAction action);

// Parses "coordinator", "psK", "workerK" (K a decimal index without sign or
// leading zeros, < 1000000). INVALID_ARGUMENT otherwise.
absl::StatusOr<ProcessName> ParseProcessName(absl::string_view text);

// Parses "500ms", "1.5s", "30s", "2m" (digits, an optional fraction, then
// ms, s or m; at most 24 h). INVALID_ARGUMENT for a missing or unknown unit,
// a sign, an empty number or a value above 24 h.
absl::StatusOr<absl::Duration> ParseChaosTime(absl::string_view text);

// Parses a whole spec into events sorted by time (or step) (events at the same
// time keep their order in the spec). Whitespace around events and their parts
// is ignored; an empty or all-blank spec is an empty plan. Every error is
// INVALID_ARGUMENT and names the offending event: an empty event, a missing
// ':' or '@', an unknown action, a bad target, join with a target instead
// of a count, a count < 1 or > 1000, a bad time, times and steps mixed.
absl::StatusOr<std::vector<ChaosEvent>> ParseChaosPlan(absl::string_view spec);

// Checks a parsed plan against the cluster it will run on: `initial_workers`
// workers started at launch, `shards` PS shards (0 in ring mode). A target
// must exist when its event fires: psK needs K < shards, workerK needs K <
// initial_workers + the workers joined by earlier events (in plan order).
// INVALID_ARGUMENT naming the event otherwise. REQUIRES: `plan` sorted.
absl::Status ValidateChaosPlan(const std::vector<ChaosEvent>& plan,
                               int initial_workers, int shards);

}  // namespace ferry

#endif  // FERRY_CLIENT_CHAOS_PLAN_H_
