#include "client/process_supervisor.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "client/supervision.h"
#include "common/ops_flags.h"

namespace ferry {
namespace {
// When an event happened, comparable with the coordinator's job events.
double UnixSeconds() {
  return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
}

// How much of a child's log a configuration error quotes.
constexpr int kConfigErrorLogLines = 8;

// The last `n` lines of the file at `path` (each ending in a newline), or
// nothing when it cannot be read.
std::string LastLines(const std::string& path, int n) {
  std::ifstream in(path);
  std::deque<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(std::move(line));
    if (static_cast<int>(lines.size()) > n) lines.pop_front();
  }
  std::string out;
  for (const std::string& line : lines) absl::StrAppend(&out, "  ", line, "\n");
  return out;
}
}  // namespace

ProcessSupervisor::ProcessSupervisor(SupervisorOptions options,
                                     absl::Time launch)
    : options_(std::move(options)), launch_(launch) {
  if (!options_.print) {
    options_.print = [](const std::string& line) {
      std::fprintf(stderr, "%s\n", line.c_str());
    };
  }
}

ProcessSupervisor::~ProcessSupervisor() { StopAll(); }

const char* ProcessSupervisor::StateName(State state) {
  switch (state) {
    case State::kRunning:
      return "running";
    case State::kStopped:
      return "stopped";
    case State::kExited:
      return "exited";
    case State::kKilled:
      return "killed";
    case State::kRestarting:
      return "restarting";
  }
  return "?";
}

void ProcessSupervisor::Print(absl::Time now, const std::string& text) const {
  options_.print(absl::StrFormat("ferry local: [%7.2fs] %s",
                                 absl::ToDoubleSeconds(now - launch_), text));
}

absl::Status ProcessSupervisor::Spawn(Proc& p) {
  auto child = ChildProcess::Spawn(p.argv, p.log_path);
  if (!child.ok()) return child.status();
  if (p.child) {  // the incarnation it replaces ended
    p.peak_rss_kib =
        std::max(p.peak_rss_kib, p.child->PeakRssKib().value_or(0));
  }
  p.child = std::move(*child);
  p.state = State::kRunning;
  p.chaos_signalled = false;
  p.restart_at = absl::InfiniteFuture();
  if (p.name.role == ProcessName::Role::kCoordinator) ++coordinator_starts_;
  return absl::OkStatus();
}

absl::Status ProcessSupervisor::StartServer(const ProcessName& name,
                                            const std::string& address,
                                            std::vector<std::string> argv) {
  Proc p;
  p.name = name;
  p.address = address;
  p.argv = std::move(argv);
  p.log_path = absl::StrCat(options_.log_dir, "/", name.ToString(), ".log");
  absl::Status status = AddOpsPorts(p);
  if (status.ok()) status = Spawn(p);
  if (status.ok()) procs_.push_back(std::move(p));
  WriteClusterFile();
  return status;
}

absl::StatusOr<std::string> ProcessSupervisor::StartServerOnFreePort(
    const ProcessName& name, const std::string& host,
    std::vector<std::string> argv, absl::Duration timeout) {
  const std::string port_file =
      absl::StrCat(options_.log_dir, "/", name.ToString(), ".port");
  std::error_code ignored;
  std::filesystem::remove(port_file, ignored);  // a previous run's
  const std::string any = absl::StrCat(host, ":0");
  argv.insert(argv.end(), {"--listen", any, "--port-file", port_file});
  if (absl::Status s = StartServer(name, "", std::move(argv)); !s.ok())
    return s;
  Proc& p = *Find(name);
  absl::StatusOr<std::string> text = AwaitFileOf(*p.child, port_file, timeout);
  if (!text.ok()) return text.status();
  absl::StatusOr<std::vector<int>> ports = ParsePortFile(*text);
  if (!ports.ok()) return ports.status();
  p.address = absl::StrCat(host, ":", ports->front());
  for (std::string& arg : p.argv) {
    if (arg == any) arg = p.address;  // restarts serve on the same port
  }
  ReadOpsPorts(p);
  WriteClusterFile();
  return p.address;
}

absl::Status ProcessSupervisor::StartWorker() {
  Proc p;
  p.name = {ProcessName::Role::kWorker, workers_started_};
  p.argv = options_.worker_argv;
  p.log_path = absl::StrCat(options_.log_dir, "/", p.name.ToString(), ".log");
  absl::Status status = AddOpsPorts(p);
  if (status.ok()) status = Spawn(p);
  if (status.ok()) {
    ++workers_started_;
    procs_.push_back(std::move(p));
  }
  WriteClusterFile();
  return status;
}

absl::Status ProcessSupervisor::AddOpsPorts(Proc& p) {
  if (!options_.ops_ports) return absl::OkStatus();
  const bool trains =
      p.name.role == ProcessName::Role::kWorker ||
      (options_.shards_train && p.name.role == ProcessName::Role::kPs);
  if (trains && !options_.worker_ops_ports) return absl::OkStatus();
  p.ops_port_file =
      absl::StrCat(options_.log_dir, "/", p.name.ToString(), ".ops");
  std::error_code ignored;
  std::filesystem::remove(p.ops_port_file, ignored);  // a previous run's
  const std::string any = std::to_string(kAnyPort);
  p.argv.insert(p.argv.end(), {"--health-port", any, "--metrics-port", any,
                               "--ops-port-file", p.ops_port_file});
  return absl::OkStatus();
}

bool ProcessSupervisor::ReadOpsPorts(Proc& p) {
  if (p.ops_port_file.empty()) return false;
  std::ifstream in(p.ops_port_file);
  if (!in) return false;
  const std::string text((std::istreambuf_iterator<char>(in)),
                         std::istreambuf_iterator<char>());
  absl::StatusOr<OpsPorts> ports = ParseOpsPortFile(text);
  if (!ports.ok()) return false;  // written whole (rename): not expected
  p.ops_port_file.clear();
  p.health_address = absl::StrCat("127.0.0.1:", ports->health);
  p.metrics_address = absl::StrCat("127.0.0.1:", ports->metrics);
  // Restarts bind the same ports.
  for (size_t i = 0; i + 1 < p.argv.size(); ++i) {
    if (p.argv[i] == "--health-port") {
      p.argv[i + 1] = std::to_string(ports->health);
    } else if (p.argv[i] == "--metrics-port") {
      p.argv[i + 1] = std::to_string(ports->metrics);
    }
  }
  return true;
}

ProcessSupervisor::Proc* ProcessSupervisor::Find(const ProcessName& name) {
  for (Proc& p : procs_) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

absl::Status ProcessSupervisor::Apply(const ChaosEvent& event, absl::Time now) {
  const double at = absl::ToDoubleSeconds(now - launch_);
  const double planned = absl::ToDoubleSeconds(event.at);
  const char* action = ChaosActionName(event.action);
  if (event.action == ChaosAction::kJoin) {
    for (int i = 0; i < event.count; ++i) {
      if (absl::Status s = StartWorker(); !s.ok()) return s;
      const Proc& p = procs_.back();
      Print(now, absl::StrCat("chaos ", event.ToString(), ": started ",
                              p.name.ToString(), ", pid ", p.child->pid()));
      chaos_events_.push_back({{"at_seconds", at},
                               {"planned_seconds", planned},
                               {"planned_step", event.at_step},
                               {"action", action},
                               {"target", p.name.ToString()},
                               {"pid", p.child->pid()},
                               {"result", "started"},
                               {"unix_seconds", UnixSeconds()}});
    }
    return absl::OkStatus();
  }
  Proc* p = Find(event.target);
  nlohmann::json record = {{"at_seconds", at},
                           {"planned_seconds", planned},
                           {"planned_step", event.at_step},
                           {"action", action},
                           {"target", event.target.ToString()},
                           {"unix_seconds", UnixSeconds()}};
  const bool alive =
      p != nullptr && p->child && !p->child->Poll() &&
      (p->state == State::kRunning || p->state == State::kStopped);
  if (!alive) {
    Print(now, absl::StrCat("chaos ", event.ToString(), ": ",
                            event.target.ToString(),
                            " is not running, nothing to do"));
    record["pid"] = nullptr;
    record["result"] = "not running";
    chaos_events_.push_back(record);
    return absl::OkStatus();
  }
  const int sig = ChaosSignal(event.action);
  p->child->Signal(sig);
  if (event.action == ChaosAction::kKill ||
      event.action == ChaosAction::kTerm) {
    p->chaos_signalled = true;
  } else {
    p->state =
        event.action == ChaosAction::kStop ? State::kStopped : State::kRunning;
  }
  Print(now, absl::StrCat("chaos ", event.ToString(), ": SIG",
                          sigabbrev_np(sig), " to ", event.target.ToString(),
                          ", pid ", p->child->pid()));
  record["pid"] = p->child->pid();
  record["result"] = "signalled";
  chaos_events_.push_back(record);
  WriteClusterFile();
  return absl::OkStatus();
}

absl::Status ProcessSupervisor::Tick(absl::Time now) {
  if (stopping_) return absl::OkStatus();
  bool changed = false;
  absl::Status failure;
  for (Proc& p : procs_) changed |= ReadOpsPorts(p);
  for (Proc& p : procs_) {
    if (!p.child || p.state == State::kRestarting ||
        p.state == State::kExited || p.state == State::kKilled) {
      continue;
    }
    const std::optional<int> code = p.child->Poll();
    if (!code) continue;
    changed = true;
    p.exit_code = code;
    p.state = *code > 128 ? State::kKilled : State::kExited;
    ChildExit exit;
    exit.role = p.name.role;
    exit.exit_code = *code;
    exit.chaos_signalled = p.chaos_signalled;
    exit.unexpected_restarts = p.unexpected_restarts;
    exit.max_restarts = options_.max_restarts;
    const ExitDecision d = DecideOnExit(exit);
    const std::string who =
        absl::StrCat(p.name.ToString(), " (pid ", p.child->pid(), ")");
    switch (d.kind) {
      case ExitDecision::Kind::kIgnore:
        Print(now, absl::StrCat(who, " ", d.reason));
        break;
      case ExitDecision::Kind::kReport:
        Print(now, absl::StrCat(who, " ", d.reason, "; see ", p.log_path));
        break;
      case ExitDecision::Kind::kRestart:
        if (d.unexpected) ++p.unexpected_restarts;
        p.state = State::kRestarting;
        p.restart_at = now + options_.restart_delay;
        Print(now, absl::StrCat(who, " ", d.reason, "; restarting in ",
                                absl::FormatDuration(options_.restart_delay)));
        break;
      case ExitDecision::Kind::kConfigError:
        Print(now, absl::StrCat(who, " ", d.reason, "; see ", p.log_path));
        if (failure.ok()) {
          failure = absl::InvalidArgumentError(
              absl::StrCat(p.name.ToString(), " refused its configuration:\n",
                           LastLines(p.log_path, kConfigErrorLogLines),
                           "(full log: ", p.log_path, ")"));
        }
        break;
      case ExitDecision::Kind::kFail:
        Print(now, absl::StrCat(who, " ", d.reason, "; see ", p.log_path));
        if (failure.ok()) {
          failure = absl::FailedPreconditionError(absl::StrCat(
              p.name.ToString(), " ", d.reason, "; see ", p.log_path));
        }
        break;
    }
  }
  for (Proc& p : procs_) {
    if (!failure.ok() || p.state != State::kRestarting || p.restart_at > now)
      continue;
    changed = true;
    if (std::ofstream log(p.log_path, std::ios::app); log) {
      log << "\n==== ferry local: restart " << p.restarts + 1 << " of "
          << p.name.ToString() << " at " << absl::ToDoubleSeconds(now - launch_)
          << " s ====\n";
    }
    if (absl::Status s = Spawn(p); !s.ok()) {
      failure = s;
      break;
    }
    ++p.restarts;
    Print(now, absl::StrCat(p.name.ToString(), " restarted (restart ",
                            p.restarts, "), pid ", p.child->pid()));
  }
  if (changed) WriteClusterFile();
  return failure;
}

absl::Time ProcessSupervisor::NextRestart() const {
  absl::Time next = absl::InfiniteFuture();
  for (const Proc& p : procs_) {
    if (p.state == State::kRestarting) next = std::min(next, p.restart_at);
  }
  return next;
}

int ProcessSupervisor::LiveWorkers() const {
  int n = 0;
  for (const Proc& p : procs_) {
    const bool trains =
        p.name.role == ProcessName::Role::kWorker ||
        (options_.shards_train && p.name.role == ProcessName::Role::kPs);
    if (trains && (p.state == State::kRunning || p.state == State::kStopped)) {
      ++n;
    }
  }
  return n;
}

void ProcessSupervisor::StopAll(absl::Duration grace) {
  if (stopping_) return;
  stopping_ = true;
  // Reverse start order: workers (joined ones first), shards, coordinator.
  for (auto it = procs_.rbegin(); it != procs_.rend(); ++it) {
    if (it->child &&
        (it->state == State::kRunning || it->state == State::kStopped)) {
      it->child->Signal(SIGTERM);
      it->child->Signal(SIGCONT);
    }
  }
  for (auto it = procs_.rbegin(); it != procs_.rend(); ++it) {
    if (it->state == State::kRestarting) {
      it->state = *it->exit_code > 128 ? State::kKilled : State::kExited;
      it->restart_at = absl::InfiniteFuture();
    }
    if (!it->child ||
        (it->state != State::kRunning && it->state != State::kStopped))
      continue;
    // Signalled above; a second SIGTERM would cut a worker's shutdown short.
    const int code = it->child->Stop(grace, /*terminated=*/true);
    it->exit_code = code;
    it->state = code > 128 ? State::kKilled : State::kExited;
  }
  WriteClusterFile();
}

nlohmann::json ProcessSupervisor::RestartsJson() const {
  nlohmann::json out = nlohmann::json::object();
  for (const Proc& p : procs_) {
    if (p.name.role != ProcessName::Role::kWorker)
      out[p.name.ToString()] = p.restarts;
  }
  return out;
}

nlohmann::json ProcessSupervisor::PeakRssJson() {
  nlohmann::json out = nlohmann::json::object();
  for (Proc& p : procs_) {
    int64_t kib = p.peak_rss_kib;
    if (p.child) kib = std::max(kib, p.child->PeakRssKib().value_or(0));
    if (kib > 0) out[p.name.ToString()] = static_cast<double>(kib) / 1024.0;
  }
  return out;
}

nlohmann::json ProcessSupervisor::ClusterJson() const {
  nlohmann::json list = nlohmann::json::array();
  for (const Proc& p : procs_) {
    list.push_back(
        {{"name", p.name.ToString()},
         {"role", p.name.role == ProcessName::Role::kCoordinator ? "coordinator"
                  : p.name.role == ProcessName::Role::kPs        ? "ps"
                                                                 : "worker"},
         {"index", p.name.index},
         {"address", p.address},
         {"health_address", p.health_address},
         {"metrics_address", p.metrics_address},
         {"pid", p.child ? p.child->pid() : -1},
         {"log", p.log_path},
         {"status", StateName(p.state)},
         {"exit_code", p.exit_code ? nlohmann::json(*p.exit_code) : nullptr},
         {"restarts", p.restarts}});
  }
  return list;
}

void ProcessSupervisor::WriteClusterFile() const {
  if (options_.cluster_file.empty()) return;
  const std::string tmp =
      absl::StrCat(options_.cluster_file, ".tmp.", getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << ClusterJson().dump(2) << "\n";
    if (!out.flush()) {
      options_.print(absl::StrCat("ferry local: cannot write ", tmp));
      return;
    }
  }
  if (std::rename(tmp.c_str(), options_.cluster_file.c_str()) != 0) {
    options_.print(absl::StrCat("ferry local: cannot rename ", tmp, " to ",
                                options_.cluster_file));
  }
}

}  // namespace ferry
