// The processes of a `ferry local` cluster under supervision: started,
// signalled by chaos events, reaped, restarted (shards and the coordinator,
// with the same command line: same port, shard id, checkpoint and state
// directories) or reported (workers), and listed in the cluster file, which
// is rewritten atomically (temp file + rename) on every change.
//
// Cluster file: a JSON array, one object per process in start order:
//   {"name": "ps1", "role": "ps", "index": 1, "address": "127.0.0.1:4567",
//    "health_address": "127.0.0.1:4568", "metrics_address": "127.0.0.1:4569",
//    "pid": 1234, "log": "/tmp/ferry-local-x/ps1.log",
//    "status": "running", "exit_code": null, "restarts": 0}
// status: "running", "stopped" (chaos stop), "restarting" (dead, to be
// started again after --restart-delay), "exited" (ended on its own with
// exit_code), "killed" (ended by a signal; exit_code = 128 + signal).
// pid is the current incarnation's while running or stopped, else the last.
// Workers have an empty address. health_address (plaintext grpc.health.v1)
// and metrics_address (Prometheus, http://ADDRESS/metrics) are empty when
// SupervisorOptions::ops_ports is off, and until the process has reported
// the ports it bound (Tick reads them); a restart keeps the same ports.
//
// Thread safety: not thread-safe; use it from the thread that runs the job
// (the children's death signal is tied to that thread, see child_process.h).
#ifndef FERRY_CLIENT_PROCESS_SUPERVISOR_H_
#define FERRY_CLIENT_PROCESS_SUPERVISOR_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/chaos_plan.h"
#include "client/child_process.h"
#include "nlohmann/json.hpp"

namespace ferry {

struct SupervisorOptions {
  absl::Duration restart_delay = absl::Seconds(1);
  int max_restarts = 5;  // per shard / coordinator, deaths not caused by chaos
  std::string cluster_file;  // empty: none
  std::string log_dir;       // <log_dir>/<name>.log for every process
  // Worker command line (joined workers get the same).
  std::vector<std::string> worker_argv;
  // Give every process (workers included) its own health and metrics
  // ports: free ports its first start binds (--health-port -1
  // --metrics-port -1) and reports (--ops-port-file <log_dir>/<name>.ops),
  // the same ports at every restart.
  bool ops_ports = false;
  // Whether workers (and shard processes that train) get them too (false:
  // workers that are not ferry-worker).
  bool worker_ops_ports = true;
  // Shard processes that also train (colocated shards): LiveWorkers counts
  // them.
  bool shards_train = false;
  // Where progress and events are printed (one line each).
  std::function<void(const std::string&)> print;
};

class ProcessSupervisor {
 public:
  // `launch`: time zero of the chaos plan and of the logged elapsed times.
  ProcessSupervisor(SupervisorOptions options, absl::Time launch);
  ProcessSupervisor(const ProcessSupervisor&) = delete;
  ProcessSupervisor& operator=(const ProcessSupervisor&) = delete;
  ~ProcessSupervisor();  // StopAll

  // Starts the coordinator or a shard (`address` is where it serves).
  // UNAVAILABLE when it cannot be started.
  absl::Status StartServer(const ProcessName& name, const std::string& address,
                           std::vector<std::string> argv);
  // Starts the coordinator or a shard serving on a free port of `host`
  // (appends --listen HOST:0 --port-file <log_dir>/<name>.port to `argv`),
  // waits up to `timeout` for the port it bound and returns HOST:PORT;
  // restarts serve on the same port. FAILED_PRECONDITION when it exits
  // first (Tick then says why), DEADLINE_EXCEEDED after `timeout`.
  absl::StatusOr<std::string> StartServerOnFreePort(
      const ProcessName& name, const std::string& host,
      std::vector<std::string> argv, absl::Duration timeout);
  // From now on, workers start with `argv` (e.g. once the coordinator's
  // address is known).
  void SetWorkerArgv(std::vector<std::string> argv) {
    options_.worker_argv = std::move(argv);
  }
  // Starts worker<K>, K = the number of workers started so far.
  absl::Status StartWorker();

  // Applies one chaos event at `now`: join starts workers, the others send
  // their signal to the target's current process (a no-op, recorded as
  // "not running", when it is dead or restarting). UNAVAILABLE when a
  // joined worker cannot be started.
  absl::Status Apply(const ChaosEvent& event, absl::Time now);

  // Reaps the children that exited and acts on them (DecideOnExit), then
  // starts those whose restart is due. FAILED_PRECONDITION naming the
  // process when a shard or the coordinator is out of restarts; UNAVAILABLE
  // when a restart cannot be started.
  absl::Status Tick(absl::Time now);

  // When Tick next has a restart to do (InfiniteFuture: none).
  absl::Time NextRestart() const;
  // Workers running or stopped (shard processes too with shards_train).
  int LiveWorkers() const;
  // Workers started so far (initial and joined).
  int workers_started() const { return workers_started_; }
  // Times the coordinator was started (1 after launch, +1 per restart).
  int coordinator_starts() const { return coordinator_starts_; }

  // Stops every process (workers, then shards, then the coordinator:
  // SIGTERM, SIGKILL after `grace`) and cancels pending restarts; later
  // exits are expected. Idempotent.
  void StopAll(absl::Duration grace = absl::Seconds(5));

  // Summary parts: [{at_seconds, planned_seconds, action, target, pid,
  // result}] (one entry per started worker for join; pid null when the
  // target was not running) and {name: restarts} for the coordinator and
  // every shard.
  nlohmann::json ChaosEventsJson() const { return chaos_events_; }
  nlohmann::json RestartsJson() const;
  // {name: peak resident MiB} of every process, the largest over its
  // incarnations (ChildProcess::PeakRssKib: at exit, or now while it runs);
  // a name whose memory could not be read is left out. Reaps children that
  // exited (Tick then acts on them as usual).
  nlohmann::json PeakRssJson();
  // The cluster file's content (see above).
  nlohmann::json ClusterJson() const;

 private:
  enum class State { kRunning, kStopped, kExited, kKilled, kRestarting };
  struct Proc {
    ProcessName name;
    std::string address;
    std::string health_address;
    std::string metrics_address;
    std::string ops_port_file;  // until its ports were read; then empty
    std::vector<std::string> argv;
    std::string log_path;
    std::optional<ChildProcess> child;
    State state = State::kRunning;
    std::optional<int> exit_code;
    int restarts = 0;
    int unexpected_restarts = 0;
    bool chaos_signalled = false;  // this incarnation got chaos kill/term
    absl::Time restart_at = absl::InfiniteFuture();
    int64_t peak_rss_kib = 0;  // the largest of its ended incarnations'
  };
  static const char* StateName(State state);

  absl::Status AddOpsPorts(Proc& p);
  // Reads p's ops port file once it exists; true when that changed p.
  bool ReadOpsPorts(Proc& p);
  absl::Status Spawn(Proc& p);
  Proc* Find(const ProcessName& name);
  void Print(absl::Time now, const std::string& text) const;
  void WriteClusterFile() const;

  SupervisorOptions options_;
  absl::Time launch_;
  std::vector<Proc> procs_;  // start order
  int workers_started_ = 0;
  int coordinator_starts_ = 0;
  bool stopping_ = false;
  nlohmann::json chaos_events_ = nlohmann::json::array();
};

}  // namespace ferry

#endif  // FERRY_CLIENT_PROCESS_SUPERVISOR_H_
