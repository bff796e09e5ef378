// Child processes started by `ferry local`: forked and exec'd with an empty
// signal mask, in their own process group, stdout+stderr appended to a log
// file, and PR_SET_PDEATHSIG = SIGKILL so that they die with their parent
// (a crashed `ferry local` leaves no orphans); signalled and reaped.
//
// The death signal fires when the *thread* that spawned the child exits:
// call Spawn from a thread that lives as long as the children should (main).
//
// Thread safety: not thread-safe.
#ifndef FERRY_CLIENT_CHILD_PROCESS_H_
#define FERRY_CLIENT_CHILD_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ferry {

class ChildProcess {
 public:
  // Starts `argv[0]` (a path) with `argv`, output appended to `log_path`.
  // UNAVAILABLE when the log cannot be opened, fork fails or the program
  // cannot be executed (the exec error is passed back from the child).
  static absl::StatusOr<ChildProcess> Spawn(
      const std::vector<std::string>& argv, const std::string& log_path);

  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }
  // Exit code (or 128 + signal) once it has exited; nullopt while running.
  std::optional<int> Poll();
  void Signal(int sig) const;
  // SIGTERM (and SIGCONT, in case it is stopped), then SIGKILL after
  // `grace`; returns the exit code. `terminated`: the caller sent the
  // SIGTERM already, so none is sent again (a second SIGTERM ends a
  // ferry-worker at once, a colocated one before its shard's last
  // checkpoint).
  int Stop(absl::Duration grace, bool terminated = false);
  // Its peak resident memory in KiB: the kernel's count at its exit
  // (wait4's ru_maxrss; a child that exited is reaped here, as by Poll),
  // else its VmHWM now; nullopt when neither can be read.
  std::optional<int64_t> PeakRssKib();

 private:
  pid_t pid_ = -1;
  std::string log_path_;
  std::optional<int> exit_code_;
  std::optional<int64_t> peak_rss_kib_;  // from wait4, once reaped
};

// A TCP port that was free a moment ago on every local address, picked at
// random outside the kernel's ephemeral range (where outgoing connections
// take their source ports, and where binds to port 0 land); the kernel's
// choice if none is found. Never a port it returned before in this process
// (a launcher hands out many before its children bind them), nor one that
// another running process got from PickFreePort (each port is claimed for
// the life of the process, see child_process.cc). Thread-safe.
//
// Only for a port that must be known before the process that binds it
// starts (a PS shard's address goes into the coordinator's --shards before
// either runs). Otherwise start the child on port 0 and read the port back
// (ferry-server --port-file, --ops-port-file): nothing can take it between.
absl::StatusOr<int> PickFreePort();
// Loopback addresses for `processes` shard processes of `partitions`
// partitions each, from PickFreePort: result[p][i] is process p's partition
// i (common/shard_partitions.h LogicalShardAddresses orders them for a job).
absl::StatusOr<std::vector<std::vector<std::string>>> PickPartitionAddresses(
    int processes, int partitions);
// The content of the file `child` writes at `path` (a port file, written
// whole: temp file + rename), once it exists. FAILED_PRECONDITION when the
// child exits first, DEADLINE_EXCEEDED after `timeout`; both name the
// child's log.
absl::StatusOr<std::string> AwaitFileOf(ChildProcess& child,
                                        const std::string& path,
                                        absl::Duration timeout);
// The ports of a ferry-server --port-file (one per line). DATA_LOSS for
// anything else.
absl::StatusOr<std::vector<int>> ParsePortFile(const std::string& text);

// The directory holding the running executable (/proc/self/exe).
std::string ExecutableDir();

}  // namespace ferry

#endif  // FERRY_CLIENT_CHILD_PROCESS_H_
