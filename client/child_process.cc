#include "client/child_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <utility>

#include "absl/base/const_init.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

extern char** environ;

namespace ferry {

absl::StatusOr<ChildProcess> ChildProcess::Spawn(
    const std::vector<std::string>& argv, const std::string& log_path) {
  if (argv.empty()) return absl::InvalidArgumentError("empty command line");
  // Everything the child needs is prepared here: between fork and exec it
  // may only make async-signal-safe calls (gRPC threads may hold locks).
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int log_fd =
      open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot open the log ", log_path,
                                               ": ", std::strerror(errno)));
  }
  // The child writes its exec error here; a successful exec closes it.
  int error_pipe[2];
  if (pipe2(error_pipe, O_CLOEXEC) != 0) {
    close(log_fd);
    return absl::UnavailableError(
        absl::StrCat("pipe2: ", std::strerror(errno)));
  }
  const pid_t parent = getpid();
  sigset_t empty;
  sigemptyset(&empty);
  const pid_t pid = fork();
  if (pid == 0) {
    int err = 0;
    // Die with the parent; if it already died before prctl, getppid() is
    // no longer `parent` (reparented to init or a subreaper).
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
      _exit(127);
    // Own process group: a Ctrl-C on the terminal reaches only `ferry local`,
    // which then stops its children in order.
    setpgid(0, 0);
    if (dup2(log_fd, STDOUT_FILENO) < 0 || dup2(log_fd, STDERR_FILENO) < 0) {
      err = errno;
    } else {
      sigprocmask(SIG_SETMASK, &empty, nullptr);
      execve(args[0], args.data(), environ);
      err = errno;
    }
    (void)!write(error_pipe[1], &err, sizeof(err));
    _exit(127);
  }
  const int fork_errno = errno;
  close(log_fd);
  close(error_pipe[1]);
  if (pid < 0) {
    close(error_pipe[0]);
    return absl::UnavailableError(absl::StrCat(
        "cannot start ", argv[0], ": fork: ", std::strerror(fork_errno)));
  }
  setpgid(pid, pid);  // also from here, so the group exists before we signal it
  int child_errno = 0;
  ssize_t n;
  do {
    n = read(error_pipe[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  close(error_pipe[0]);
  ChildProcess child;
  child.pid_ = pid;
  child.log_path_ = log_path;
  if (n == sizeof(child_errno)) {
    while (!child.Poll()) absl::SleepFor(absl::Milliseconds(1));
    return absl::UnavailableError(
        absl::StrCat("cannot start ", argv[0], " (log ", log_path,
                     "): ", std::strerror(child_errno)));
  }
  return child;
}

std::optional<int> ChildProcess::Poll() {
  if (exit_code_ || pid_ <= 0) return exit_code_;
  int status = 0;
  struct rusage usage {};
  if (wait4(pid_, &status, WNOHANG, &usage) == pid_) {
    exit_code_ =
        WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    peak_rss_kib_ = usage.ru_maxrss;  // KiB on Linux
  }
  return exit_code_;
}

std::optional<int64_t> ChildProcess::PeakRssKib() {
  // A zombie's status has no VmHWM: reap it for the kernel's count.
  if (Poll()) return peak_rss_kib_;
  if (pid_ <= 0) return std::nullopt;
  std::ifstream status(absl::StrCat("/proc/", pid_, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    int64_t kib = 0;
    if (absl::StartsWith(line, "VmHWM:") &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(absl::StripSuffix(
                             absl::StripPrefix(line, "VmHWM:"), "kB")),
                         &kib)) {
      return kib;
    }
  }
  return std::nullopt;
}

void ChildProcess::Signal(int sig) const {
  if (pid_ > 0 && !exit_code_) kill(pid_, sig);
}

int ChildProcess::Stop(absl::Duration grace, bool terminated) {
  if (!terminated) {
    Signal(SIGTERM);
    Signal(SIGCONT);  // a stopped process acts on SIGTERM only once it runs
  }
  const absl::Time deadline = absl::Now() + grace;
  while (!Poll() && absl::Now() < deadline)
    absl::SleepFor(absl::Milliseconds(20));
  if (!Poll()) {
    Signal(SIGKILL);
    while (!Poll()) absl::SleepFor(absl::Milliseconds(5));
  }
  return *exit_code_;
}

namespace {

// The kernel's range for the source ports of outgoing connections (and for
// bind to port 0); [32768, 60999] when it cannot be read.
std::pair<int, int> EphemeralPortRange() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 32768, high = 60999;
  if (!(in >> low >> high) || low < 1 || high > 65535 || low > high)
    return {32768, 60999};
  return {low, high};
}

// True when nothing holds `port` on any local address right now.
bool PortIsFree(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool free =
      bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return free;
}

// Claims `port` for this process among every process that picks ports
// with PickFreePort (other tests run by ctest -j, other launchers): binds
// the abstract Unix socket "@ferry-port-PORT", which only one process can
// hold and which the kernel releases when the process exits. False when
// another process holds the claim. The socket is kept open for the rest
// of the process's life (close-on-exec: the children bind the TCP port
// itself).
bool ClaimPortForThisProcess(int port) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return true;  // no claims possible: fall back to the check
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string name = absl::StrCat("ferry-port-", port);
  // Abstract namespace: a leading NUL, no file.
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  const socklen_t len =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    const bool taken = errno == EADDRINUSE;
    close(fd);
    return !taken;
  }
  return true;  // fd stays open: the claim lasts as long as this process
}

}  // namespace

absl::StatusOr<int> PickFreePort() {
  // Outside the ephemeral range, so that the many outgoing connections of a
  // busy machine (which take their source ports from it) cannot take the
  // port between this check and the child's bind; at random, so that
  // concurrent launchers rarely pick the same one.
  const auto [low, high] = EphemeralPortRange();
  const int first = low > 11000 ? 10000 : high + 1;
  const int last = low > 11000 ? low - 1 : 65535;
  static absl::Mutex mu(absl::kConstInit);
  static auto* handed_out = new absl::flat_hash_set<int>();  // under mu
  absl::MutexLock lock(&mu);
  if (first <= last) {
    static thread_local std::mt19937 random{std::random_device{}()};
    std::uniform_int_distribution<int> pick(first, last);
    for (int attempt = 0; attempt < 200; ++attempt) {
      const int port = pick(random);
      if (!handed_out->contains(port) && ClaimPortForThisProcess(port) &&
          PortIsFree(port)) {
        handed_out->insert(port);
        return port;
      }
    }
  }
  // Fall back to the kernel's choice.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::UnavailableError("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return absl::UnavailableError("cannot bind a loopback port");
  }
  const int port = ntohs(addr.sin_port);
  close(fd);
  handed_out->insert(port);
  return port;
}

absl::StatusOr<std::vector<std::vector<std::string>>> PickPartitionAddresses(
    int processes, int partitions) {
  std::vector<std::vector<std::string>> addresses(processes);
  for (std::vector<std::string>& process : addresses) {
    for (int i = 0; i < partitions; ++i) {
      ASSIGN_OR_RETURN(const int port, PickFreePort());
      process.push_back(absl::StrCat("127.0.0.1:", port));
    }
  }
  return addresses;
}

absl::StatusOr<std::string> AwaitFileOf(ChildProcess& child,
                                        const std::string& path,
                                        absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration pause = absl::Milliseconds(1);
  while (true) {
    // Written as a temp file and renamed: once it exists it is whole.
    std::ifstream in(path);
    if (in) {
      return std::string(std::istreambuf_iterator<char>(in),
                         std::istreambuf_iterator<char>());
    }
    if (std::optional<int> code = child.Poll()) {
      return absl::FailedPreconditionError(
          absl::StrCat(child.log_path(), ": exited with code ", *code,
                       " before writing ", path));
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(child.log_path(), ": no ", path, " after ",
                       absl::FormatDuration(timeout)));
    }
    absl::SleepFor(std::min(pause, deadline - now));
    pause = std::min(pause * 2, absl::Milliseconds(50));
  }
}

absl::StatusOr<std::vector<int>> ParsePortFile(const std::string& text) {
  std::vector<int> ports;
  for (absl::string_view line :
       absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    int port = 0;
    if (!absl::SimpleAtoi(line, &port) || port <= 0 || port > 65535) {
      return absl::DataLossError(
          absl::StrCat("port file line '", line, "' is not a port"));
    }
    ports.push_back(port);
  }
  if (ports.empty()) return absl::DataLossError("empty port file");
  return ports;
}

std::string ExecutableDir() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string path(buf, n);
  return path.substr(0, path.find_last_of('/'));
}

}  // namespace ferry
