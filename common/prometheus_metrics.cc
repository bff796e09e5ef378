#include "common/prometheus_metrics.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "prometheus/text_serializer.h"

namespace ferry {
namespace {

constexpr const char* kRoleNames[kNumMetricRoles] = {"coordinator", "ps",
                                                     "worker"};
constexpr const char* kPeerRoleNames[4] = {"coordinator", "ps", "worker",
                                           "other"};
constexpr const char* kDirections[2] = {"sent", "received"};

int PeerRoleIndex(absl::string_view key) {
  if (key == "coordinator") return 0;
  if (key == "ps" ||
      (absl::StartsWith(key, "ps") &&
       key.find_first_not_of("0123456789", 2) == absl::string_view::npos)) {
    return 1;
  }
  if (key == "worker") return 2;
  return 3;
}

template <typename T>
T* AddPerRole(prometheus::Family<T>& family, MetricRole role) {
  return &family.Add({{"role", MetricRoleName(role)}});
}

prometheus::Histogram* AddHistogram(
    prometheus::Family<prometheus::Histogram>& family,
    const prometheus::Labels& labels,
    const prometheus::Histogram::BucketBoundaries& buckets) {
  return &family.Add(labels, buckets);
}

// Scrape hooks, by id.
struct Hooks {
  absl::Mutex mu;
  uint64_t next_id ABSL_GUARDED_BY(mu) = 1;
  std::map<uint64_t, std::function<void()>> hooks ABSL_GUARDED_BY(mu);
};
Hooks& GetHooks() {
  static Hooks* const hooks = new Hooks();
  return *hooks;
}

}  // namespace

const char* MetricRoleName(MetricRole role) {
  return kRoleNames[static_cast<int>(role)];
}

const char* PeerRoleLabel(absl::string_view role_key) {
  return kPeerRoleNames[PeerRoleIndex(role_key)];
}

std::string ReasonLabel(absl::StatusCode code) {
  std::string name = absl::StatusCodeToString(code);
  for (char& c : name) c = c == ' ' ? '_' : absl::ascii_tolower(c);
  return name.empty() ? "unknown" : name;
}

const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* const buckets =
      new prometheus::Histogram::BucketBoundaries{
          0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
          0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30,    60};
  return *buckets;
}

FerryMetrics::FerryMetrics()
    : registry_(std::make_shared<prometheus::Registry>()) {
  prometheus::Registry& r = *registry_;
  auto& steps =
      prometheus::BuildCounter()
          .Name("ferry_steps_total")
          .Help(
              "Committed training steps (coordinator: applied on every shard, "
              "async: tasks applied; worker: steps it trained)")
          .Register(r);
  auto& samples = prometheus::BuildCounter()
                      .Name("ferry_samples_total")
                      .Help("Training samples of the counted steps")
                      .Register(r);
  bytes_family_ =
      &prometheus::BuildCounter()
           .Name("ferry_bytes_total")
           .Help(
               "Payload bytes exchanged with peers, by this process's role, "
               "the peer's role and the direction")
           .Register(r);
  rejected_family_ =
      &prometheus::BuildCounter()
           .Name("ferry_rejected_inputs_total")
           .Help(
               "Requests refused for bad or out-of-date peer input, by "
               "operation and status code")
           .Register(r);
  auto& push =
      prometheus::BuildHistogram()
          .Name("ferry_push_seconds")
          .Help(
              "Gradient push latency (worker: a step's push to every shard; "
              "ps: header to commit of one push)")
          .Register(r);
  auto& pull =
      prometheus::BuildHistogram()
          .Name("ferry_pull_seconds")
          .Help(
              "Weight pull latency (worker: a pull from every shard; ps: "
              "time a pull waited for its version)")
          .Register(r);
  auto& allreduce = prometheus::BuildHistogram()
                        .Name("ferry_allreduce_seconds")
                        .Help("Ring all-reduce of one gradient bucket")
                        .Register(r);
  auto& staleness =
      prometheus::BuildGauge()
          .Name("ferry_staleness_steps")
          .Help(
              "Staleness (version - base_version) of the last push an "
              "async/ssp shard applied")
          .Register(r);
  auto& push_staleness =
      prometheus::BuildHistogram()
          .Name("ferry_push_staleness_steps")
          .Help("Staleness of the pushes an async/ssp shard applied")
          .Register(r);
  auto& pending =
      prometheus::BuildGauge()
          .Name("ferry_pending_pulls")
          .Help("Pulls waiting on the shard for a version not made yet")
          .Register(r);
  auto& members = prometheus::BuildGauge()
                      .Name("ferry_members")
                      .Help("Live workers of the job")
                      .Register(r);
  auto& generation =
      prometheus::BuildGauge()
          .Name("ferry_generation")
          .Help(
              "Membership generation (coordinator: current; worker: the "
              "newest it saw)")
          .Register(r);
  auto& version = prometheus::BuildGauge()
                      .Name("ferry_model_version")
                      .Help(
                          "Optimizer updates applied (ps: the shard's version; "
                          "coordinator: steps applied on every shard)")
                      .Register(r);
  auto& age =
      prometheus::BuildGauge()
          .Name("ferry_checkpoint_age_seconds")
          .Help(
              "Seconds since the last successful checkpoint (ps: the shard's "
              "state; coordinator: its state file); -1 when none yet")
          .Register(r);
  for (int i = 0; i < kNumMetricRoles; ++i) {
    const MetricRole role = static_cast<MetricRole>(i);
    steps_[i] = AddPerRole(steps, role);
    samples_[i] = AddPerRole(samples, role);
    for (int p = 0; p < 4; ++p) {
      for (int d = 0; d < 2; ++d) {
        bytes_[i][p][d] = &bytes_family_->Add({{"role", kRoleNames[i]},
                                               {"peer_role", kPeerRoleNames[p]},
                                               {"direction", kDirections[d]}});
      }
    }
    push_seconds_[i] =
        AddHistogram(push, {{"role", kRoleNames[i]}}, LatencyBuckets());
    pull_seconds_[i] =
        AddHistogram(pull, {{"role", kRoleNames[i]}}, LatencyBuckets());
    generation_[i] = AddPerRole(generation, role);
    model_version_[i] = AddPerRole(version, role);
    checkpoint_age_[i] = AddPerRole(age, role);
    checkpoint_age_[i]->Set(-1);
  }
  allreduce_seconds_ = AddHistogram(allreduce, {}, LatencyBuckets());
  staleness_steps_ = &staleness.Add({});
  push_staleness_ = AddHistogram(push_staleness, {},
                                 prometheus::Histogram::BucketBoundaries{
                                     0, 1, 2, 3, 4, 6, 8, 12, 16, 32, 64});
  pending_pulls_ = &pending.Add({});
  members_ = &members.Add({});
  train_samples_ =
      &prometheus::BuildGauge()
           .Name("ferry_train_samples_per_second")
           .Help(
               "Samples applied per second over the job's steady window "
               "(the steps after the first, timed by the workers' clocks)")
           .Register(r)
           .Add({});
  train_step_ = &prometheus::BuildGauge()
                     .Name("ferry_train_step_seconds")
                     .Help(
                         "Mean time per step (async: per task) over the "
                         "job's steady window")
                     .Register(r)
                     .Add({});
  job_samples_ = &prometheus::BuildGauge()
                      .Name("ferry_job_samples_applied")
                      .Help(
                          "Samples of every applied step since the job "
                          "began (survives coordinator restarts)")
                      .Register(r)
                      .Add({});
  job_finished_ = &prometheus::BuildGauge()
                       .Name("ferry_job_finished")
                       .Help("1 once the job's final evaluation is in")
                       .Register(r)
                       .Add({});

  auto& rows = prometheus::BuildGauge()
                   .Name("ferry_embedding_rows")
                   .Help(
                       "A PS shard's embedding rows (state=stored) and ids "
                       "counted but not yet admitted (state=pending)")
                   .Register(r);
  embedding_rows_[0] = &rows.Add({{"state", "stored"}});
  embedding_rows_[1] = &rows.Add({{"state", "pending"}});
  embedding_bytes_ =
      &prometheus::BuildGauge()
           .Name("ferry_embedding_bytes")
           .Help(
               "A PS shard's embedding memory as --embedding-max-mb counts it")
           .Register(r)
           .Add({});
  auto& events =
      prometheus::BuildCounter()
          .Name("ferry_embedding_events_total")
          .Help(
              "A PS shard's embedding rows created, ids admitted, updates "
              "dropped before admission, rows evicted by TTL or memory")
          .Register(r);
  const char* const kEvents[kNumEmbeddingEvents] = {
      "created", "admitted", "dropped_update", "evicted_ttl", "evicted_memory"};
  for (int e = 0; e < kNumEmbeddingEvents; ++e) {
    embedding_events_[e] = &events.Add({{"event", kEvents[e]}});
  }
}

prometheus::Counter& FerryMetrics::bytes(MetricRole role,
                                         absl::string_view peer_role_key,
                                         bool sent) {
  return *bytes_[Index(role)][PeerRoleIndex(peer_role_key)][sent ? 0 : 1];
}

void FerryMetrics::AddBytes(MetricRole role, absl::string_view peer_role_key,
                            int64_t sent, int64_t received) {
  if (sent > 0)
    bytes(role, peer_role_key, true).Increment(static_cast<double>(sent));
  if (received > 0) {
    bytes(role, peer_role_key, false).Increment(static_cast<double>(received));
  }
}

prometheus::Counter& FerryMetrics::rejected(MetricRole role,
                                            absl::string_view op,
                                            absl::StatusCode code) {
  return rejected_family_->Add({{"role", MetricRoleName(role)},
                                {"op", std::string(op)},
                                {"reason", ReasonLabel(code)}});
}

absl::Status FerryMetrics::Reject(MetricRole role, absl::string_view op,
                                  absl::Status status) {
  if (!status.ok()) rejected(role, op, status.code()).Increment();
  return status;
}

FerryMetrics& Metrics() {
  static FerryMetrics* const metrics = new FerryMetrics();
  return *metrics;
}

double SecondsSince(absl::Time start) {
  return absl::ToDoubleSeconds(absl::Now() - start);
}

double AgeSeconds(const std::optional<absl::Time>& last) {
  return last.has_value() ? SecondsSince(*last) : -1;
}

void CumulativeBytesExport::Update(absl::string_view peer_role_key,
                                   int64_t sent_total, int64_t received_total) {
  auto it = last_.find(peer_role_key);
  if (it == last_.end()) {
    it = last_
             .emplace(std::string(peer_role_key),
                      std::make_pair(int64_t{0}, int64_t{0}))
             .first;
  }
  // A counter that restarted (smaller total) counts again from zero.
  const int64_t sent = sent_total >= it->second.first
                           ? sent_total - it->second.first
                           : sent_total;
  const int64_t received = received_total >= it->second.second
                               ? received_total - it->second.second
                               : received_total;
  it->second = {sent_total, received_total};
  Metrics().AddBytes(role_, peer_role_key, sent, received);
}

std::unique_ptr<ScrapeHook> RegisterScrapeHook(std::function<void()> hook) {
  Hooks& hooks = GetHooks();
  absl::MutexLock lock(&hooks.mu);
  const uint64_t id = hooks.next_id++;
  hooks.hooks.emplace(id, std::move(hook));
  return std::unique_ptr<ScrapeHook>(new ScrapeHook(id));
}

ScrapeHook::~ScrapeHook() {
  Hooks& hooks = GetHooks();
  absl::MutexLock lock(&hooks.mu);  // waits for a run in progress
  hooks.hooks.erase(id_);
}

void RunScrapeHooks() {
  Hooks& hooks = GetHooks();
  absl::MutexLock lock(&hooks.mu);
  for (auto& [id, hook] : hooks.hooks) hook();
}

namespace {
// Bit i: MetricRole i's series are exported.
constexpr int kAllRoles = (1 << kNumMetricRoles) - 1;
std::atomic<int> g_exported_roles{kAllRoles};
}  // namespace

// The families without a role label that only one role sets.
const std::map<std::string, MetricRole, std::less<>>& FamilyRoles() {
  static const auto* roles = new std::map<std::string, MetricRole, std::less<>>{
      {"ferry_members", MetricRole::kCoordinator},
      {"ferry_train_samples_per_second", MetricRole::kCoordinator},
      {"ferry_train_step_seconds", MetricRole::kCoordinator},
      {"ferry_job_samples_applied", MetricRole::kCoordinator},
      {"ferry_job_finished", MetricRole::kCoordinator},
      {"ferry_pending_pulls", MetricRole::kPs},
      {"ferry_staleness_steps", MetricRole::kPs},
      {"ferry_push_staleness_steps", MetricRole::kPs},
      {"ferry_allreduce_seconds", MetricRole::kWorker}};
  return *roles;
}

void ExportOnlyRole(MetricRole role) {
  g_exported_roles.store(1 << static_cast<int>(role));
}
void AlsoExportRole(MetricRole role) {
  g_exported_roles.fetch_or(1 << static_cast<int>(role));
}
void ExportAllRolesForTesting() { g_exported_roles.store(kAllRoles); }

std::string SerializeMetrics() {
  RunScrapeHooks();
  std::vector<prometheus::MetricFamily> families =
      Metrics().registry()->Collect();
  if (const int exported = g_exported_roles.load(); exported != kAllRoles) {
    std::vector<std::string> roles;
    for (int i = 0; i < kNumMetricRoles; ++i) {
      if ((exported >> i) & 1) {
        roles.push_back(MetricRoleName(static_cast<MetricRole>(i)));
      }
    }
    auto is_exported = [&roles](const std::string& role) {
      return std::find(roles.begin(), roles.end(), role) != roles.end();
    };
    for (prometheus::MetricFamily& family : families) {
      auto other_role = [&is_exported](const prometheus::ClientMetric& m) {
        return std::any_of(
            m.label.begin(), m.label.end(), [&is_exported](const auto& label) {
              return label.name == "role" && !is_exported(label.value);
            });
      };
      family.metric.erase(std::remove_if(family.metric.begin(),
                                         family.metric.end(), other_role),
                          family.metric.end());
    }
    const auto& owners = FamilyRoles();
    families.erase(
        std::remove_if(
            families.begin(), families.end(),
            [&owners, exported](const prometheus::MetricFamily& f) {
              const auto owner = owners.find(f.name);
              return f.metric.empty() ||
                     (owner != owners.end() &&
                      !((exported >> static_cast<int>(owner->second)) & 1));
            }),
        families.end());
  }
  return prometheus::TextSerializer().Serialize(families);
}

namespace {

constexpr absl::Duration kClientTimeout = absl::Seconds(5);
constexpr size_t kMaxRequestBytes = 16 * 1024;

void SendAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n =
        send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return;
    }
    off += static_cast<size_t>(n);
  }
}

std::string Response(const std::string& status, const std::string& content_type,
                     const std::string& body, bool head) {
  return absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(),
                      "\r\nConnection: close\r\n\r\n", head ? "" : body);
}

// Reads one request's head and answers it. The whole request must arrive
// within kClientTimeout (one deadline, however slowly it trickles in), and
// `wake_fd` turning readable (the exposer's destructor) ends it at once.
void Answer(int fd, int wake_fd) {
  const timeval timeout = absl::ToTimeval(kClientTimeout);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  const absl::Time deadline = absl::Now() + kClientTimeout;
  std::string request;
  char buf[2048];
  while (request.find("\r\n\r\n") == std::string::npos &&
         request.find("\n\n") == std::string::npos &&
         request.size() < kMaxRequestBytes) {
    pollfd fds[2] = {{fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) return;  // too slow: dropped without an answer
    const int ready = poll(fds, 2, static_cast<int>(left_ms));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0 || fds[1].revents != 0) return;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    request.append(buf, static_cast<size_t>(n));
  }
  const std::string line = request.substr(0, request.find_first_of("\r\n"));
  const std::vector<std::string> parts =
      absl::StrSplit(line, ' ', absl::SkipEmpty());
  if (parts.size() < 2) {
    SendAll(fd,
            Response("400 Bad Request", "text/plain", "bad request\n", false));
    return;
  }
  const std::string& method = parts[0];
  const std::string path = parts[1].substr(0, parts[1].find('?'));
  if (method != "GET" && method != "HEAD") {
    SendAll(fd, Response("405 Method Not Allowed", "text/plain", "use GET\n",
                         false));
  } else if (path != "/metrics") {
    SendAll(fd, Response("404 Not Found", "text/plain",
                         "metrics are at /metrics\n", method == "HEAD"));
  } else {
    SendAll(fd, Response("200 OK", "text/plain; version=0.0.4; charset=utf-8",
                         SerializeMetrics(), method == "HEAD"));
  }
}

}  // namespace

void MetricsExposer::Serve() {
  pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  while (true) {
    fds[0].revents = fds[1].revents = 0;
    const int ready = poll(fds, 2, -1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;  // the destructor
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    accepted_.fetch_add(1);
    Answer(fd, wake_fd_);
    close(fd);
  }
}

MetricsExposer::~MetricsExposer() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
    thread_.join();
  }
  if (listen_fd_ >= 0) close(listen_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

absl::StatusOr<std::unique_ptr<MetricsExposer>> StartMetricsExposer(int port) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics-port ", port, " is not a port (0..65535, 0: off)"));
  }
  if (port == 0) return nullptr;
  absl::StatusOr<std::unique_ptr<MetricsExposer>> exposer =
      StartMetricsExposerAt(absl::StrCat("0.0.0.0:", port));
  if (!exposer.ok()) {
    return absl::Status(exposer.status().code(),
                        absl::StrCat("--metrics-port ", port, ": ",
                                     exposer.status().message()));
  }
  return exposer;
}

absl::StatusOr<std::unique_ptr<MetricsExposer>> StartMetricsExposerAt(
    const std::string& bind_address) {
  const size_t colon = bind_address.rfind(':');
  if (colon == std::string::npos || colon + 1 == bind_address.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics address '", bind_address, "' has no port (HOST:PORT)"));
  }
  std::string host = bind_address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string port = bind_address.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* info = nullptr;
  if (const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(),
                                 port.c_str(), &hints, &info);
      rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics address '", bind_address, "': ", gai_strerror(rc)));
  }
  Metrics();  // the families exist before the first scrape
  auto exposer = std::unique_ptr<MetricsExposer>(new MetricsExposer());
  std::string error = "no address";
  for (addrinfo* a = info; a != nullptr; a = a->ai_next) {
    const int fd =
        socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    const int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));  // restarts
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 64) != 0) {
      error = std::strerror(errno);
      close(fd);
      continue;
    }
    exposer->listen_fd_ = fd;
    break;
  }
  freeaddrinfo(info);
  if (exposer->listen_fd_ < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", bind_address, ": ", error));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  if (getsockname(exposer->listen_fd_, reinterpret_cast<sockaddr*>(&bound),
                  &len) == 0) {
    exposer->port_ =
        ntohs(bound.ss_family == AF_INET6
                  ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                  : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  }
  exposer->wake_fd_ = eventfd(0, EFD_CLOEXEC);
  if (exposer->wake_fd_ < 0) {
    return absl::InternalError(
        absl::StrCat("metrics: eventfd: ", std::strerror(errno)));
  }
  exposer->thread_ = std::thread([e = exposer.get()] { e->Serve(); });
  return exposer;
}

}  // namespace ferry
