// Prometheus metrics of a ferry process (prometheus-cpp): one process-wide
// registry of ferry's metric families, one-line helpers for the code that
// observes them, scrape hooks that refresh gauges from core state right
// before a scrape, and the HTTP exposer behind --metrics-port.
//
// Names carry the `ferry_` prefix and base units (seconds, bytes, steps).
// Label values are bounded: `role` and `peer_role` in {coordinator, ps,
// worker} (peer_role also "other" for an unknown peer), `direction` in
// {sent, received}, `op` a fixed operation name and `reason` a status code
// name ("invalid_argument", ...). docs/operations.md has the reference table.
//
// Everything here is global to the process: several shards or coordinators
// in one process (tests) add to the same counters.
//
// Thread safety: every function and metric here is thread-safe.
#ifndef FERRY_COMMON_PROMETHEUS_METRICS_H_
#define FERRY_COMMON_PROMETHEUS_METRICS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace ferry {

// The process roles, as label values "coordinator", "ps", "worker".
enum class MetricRole { kCoordinator = 0, kPs = 1, kWorker = 2 };
inline constexpr int kNumMetricRoles = 3;

// What happened to a PS shard's embedding rows (ps/sparse_table.h's
// counters): ferry_embedding_events_total{event}.
enum class EmbeddingEvent {
  kCreated = 0,        // "created": rows made (an id admitted or restored)
  kAdmitted = 1,       // "admitted": ids that reached --embedding-admit-count
  kDroppedUpdate = 2,  // "dropped_update": updates of ids not yet admitted
  kEvictedTtl = 3,     // "evicted_ttl": rows unseen for --embedding-ttl-steps
  kEvictedMemory = 4,  // "evicted_memory": LRU rows past --embedding-max-mb
};
inline constexpr int kNumEmbeddingEvents = 5;
const char* MetricRoleName(MetricRole role);

// The peer role label of a byte-count key as the services use them:
// "coordinator"; "ps" or "ps<N>" -> "ps"; "worker" -> "worker"; anything
// else -> "other".
const char* PeerRoleLabel(absl::string_view role_key);

// The `reason` label of a status code: "invalid_argument", "aborted", ...
std::string ReasonLabel(absl::StatusCode code);

// Histogram bucket boundaries in seconds: 100 us .. 60 s, roughly x2.5.
const prometheus::Histogram::BucketBoundaries& LatencyBuckets();

// The metric families and their bounded children. Obtain with Metrics().
class FerryMetrics {
 public:
  FerryMetrics();
  FerryMetrics(const FerryMetrics&) = delete;
  FerryMetrics& operator=(const FerryMetrics&) = delete;

  // ferry_steps_total{role}: committed steps (coordinator: steps applied on
  // every shard, async: tasks applied; worker: its own steps trained).
  prometheus::Counter& steps(MetricRole role) { return *steps_[Index(role)]; }
  // ferry_samples_total{role}: training samples of those steps.
  prometheus::Counter& samples(MetricRole role) {
    return *samples_[Index(role)];
  }
  // ferry_bytes_total{role,peer_role,direction}: payload bytes.
  prometheus::Counter& bytes(MetricRole role, absl::string_view peer_role_key,
                             bool sent);
  // Adds to both directions of ferry_bytes_total; negative values ignored.
  void AddBytes(MetricRole role, absl::string_view peer_role_key, int64_t sent,
                int64_t received);
  // ferry_push_seconds{role}: worker: one push of a step to every shard,
  // first chunk sent to the last shard's answer; ps: one push from its
  // header to its commit.
  prometheus::Histogram& push_seconds(MetricRole role) {
    return *push_seconds_[Index(role)];
  }
  // ferry_pull_seconds{role}: worker: one pull of the weights from every
  // shard; ps: how long a pull waited for its version (0 when ready).
  prometheus::Histogram& pull_seconds(MetricRole role) {
    return *pull_seconds_[Index(role)];
  }
  // ferry_allreduce_seconds: one bucket all-reduce of the ring collective.
  prometheus::Histogram& allreduce_seconds() { return *allreduce_seconds_; }
  // ferry_staleness_steps: staleness (version - base_version) of the last
  // push an async / ssp shard applied; ferry_push_staleness_steps: its
  // histogram.
  prometheus::Gauge& staleness_steps() { return *staleness_steps_; }
  prometheus::Histogram& push_staleness_steps() { return *push_staleness_; }
  // Scrape-time gauges (set by the roles' scrape hooks, see
  // server/server_metrics.h and ps/shard_gauges.h) and the worker's generation.
  prometheus::Gauge& pending_pulls() { return *pending_pulls_; }
  prometheus::Gauge& members() { return *members_; }
  // The coordinator's throughput window (common/throughput_window.h):
  // ferry_train_samples_per_second and ferry_train_step_seconds, the same
  // figures as `ferry status` and the summary JSON.
  prometheus::Gauge& train_samples_per_second() { return *train_samples_; }
  prometheus::Gauge& train_step_seconds() { return *train_step_; }
  // The job's state, not the process's: ferry_job_samples_applied (every
  // applied step's samples since the job began, across coordinator
  // restarts) and ferry_job_finished (1 once the final evaluation is in).
  prometheus::Gauge& job_samples_applied() { return *job_samples_; }
  prometheus::Gauge& job_finished() { return *job_finished_; }
  prometheus::Gauge& generation(MetricRole role) {
    return *generation_[Index(role)];
  }
  prometheus::Gauge& model_version(MetricRole role) {
    return *model_version_[Index(role)];
  }
  // -1 until the first checkpoint (see docs/operations.md).
  prometheus::Gauge& checkpoint_age_seconds(MetricRole role) {
    return *checkpoint_age_[Index(role)];
  }
  // PS shards of jobs with embedding tables (scrape time, see
  // ps/shard_gauges.h): ferry_embedding_rows{state="stored"} rows
  // held, {state="pending"} ids counted but not yet admitted;
  // ferry_embedding_bytes what --embedding-max-mb limits.
  prometheus::Gauge& embedding_rows(bool pending) {
    return *embedding_rows_[pending ? 1 : 0];
  }
  prometheus::Gauge& embedding_bytes() { return *embedding_bytes_; }
  prometheus::Counter& embedding_events(EmbeddingEvent event) {
    return *embedding_events_[static_cast<size_t>(event)];
  }
  // ferry_rejected_inputs_total{role,op,reason}.
  prometheus::Counter& rejected(MetricRole role, absl::string_view op,
                                absl::StatusCode code);
  // Counts `status` (when not OK) as a rejected input and returns it.
  absl::Status Reject(MetricRole role, absl::string_view op,
                      absl::Status status);

  const std::shared_ptr<prometheus::Registry>& registry() const {
    return registry_;
  }

 private:
  static size_t Index(MetricRole role) { return static_cast<size_t>(role); }
  template <typename T>
  using PerRole = std::array<T*, kNumMetricRoles>;

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* bytes_family_;
  prometheus::Family<prometheus::Counter>* rejected_family_;
  PerRole<prometheus::Counter> steps_, samples_;
  // [role][peer role: coordinator, ps, worker, other][sent, received]
  std::array<std::array<std::array<prometheus::Counter*, 2>, 4>,
             kNumMetricRoles>
      bytes_;
  PerRole<prometheus::Histogram> push_seconds_, pull_seconds_;
  prometheus::Histogram* allreduce_seconds_;
  prometheus::Gauge* staleness_steps_;
  prometheus::Histogram* push_staleness_;
  prometheus::Gauge* pending_pulls_;
  prometheus::Gauge* members_;
  prometheus::Gauge* train_samples_;
  prometheus::Gauge* train_step_;
  prometheus::Gauge* job_samples_;
  prometheus::Gauge* job_finished_;
  PerRole<prometheus::Gauge> generation_, model_version_, checkpoint_age_;
  std::array<prometheus::Gauge*, 2> embedding_rows_;
  prometheus::Gauge* embedding_bytes_;
  std::array<prometheus::Counter*, kNumEmbeddingEvents> embedding_events_;
};

// The process-wide metrics (created on first use, never destroyed).
FerryMetrics& Metrics();

// Seconds from `start` to now, for the latency histograms.
double SecondsSince(absl::Time start);
// An age gauge's value: seconds since `last`, or -1 when it never happened.
double AgeSeconds(const std::optional<absl::Time>& last);

// Turns cumulative byte counts (what ByteCounter / ByteCounts hold) into
// ferry_bytes_total increments: Update() adds what grew since the last call
// for the same key. Thread-compatible (one owner).
class CumulativeBytesExport {
 public:
  explicit CumulativeBytesExport(MetricRole role) : role_(role) {}
  void Update(absl::string_view peer_role_key, int64_t sent_total,
              int64_t received_total);

 private:
  const MetricRole role_;
  std::map<std::string, std::pair<int64_t, int64_t>, std::less<>> last_;
};

// A function that runs right before every scrape (and SerializeMetrics()),
// to set gauges from core state. Destroying the handle unregisters it and
// waits for a run in progress. A hook must not register or destroy hooks.
class ScrapeHook {
 public:
  ~ScrapeHook();
  ScrapeHook(const ScrapeHook&) = delete;
  ScrapeHook& operator=(const ScrapeHook&) = delete;

 private:
  friend std::unique_ptr<ScrapeHook> RegisterScrapeHook(std::function<void()>);
  explicit ScrapeHook(uint64_t id) : id_(id) {}
  const uint64_t id_;
};
std::unique_ptr<ScrapeHook> RegisterScrapeHook(std::function<void()> hook);
// Runs every registered hook now.
void RunScrapeHooks();

// From now on SerializeMetrics() leaves out the series whose `role` label
// is another role, and the role-less families only another role sets
// (ferry_members: coordinator; ferry_pending_pulls, ferry_staleness_steps,
// ferry_push_staleness_steps: ps; ferry_allreduce_seconds: worker), so a
// worker does not export a shard's gauges. Called once by the main.
void ExportOnlyRole(MetricRole role);
// Exports `role`'s series too, beside the role ExportOnlyRole chose: a
// worker that hosts a PS shard (colocated) exports both. Thread-safe.
void AlsoExportRole(MetricRole role);
void ExportAllRolesForTesting();  // undoes ExportOnlyRole

// Runs the hooks and returns the registry in the Prometheus text format.
std::string SerializeMetrics();

// Serves GET (and HEAD) /metrics over HTTP/1.x until destroyed: the
// hooks, then the registry in the Prometheus text format 0.0.4; 404 for
// other paths. One thread answers one connection at a time (a client that
// stalls is dropped after 5 s); every answer closes its connection.
//
// Not prometheus-cpp's Exposer: civetweb (under it) starts its threads with
// a fixed ~100 KiB stack, which pthread_create refuses once the process's
// static TLS is larger (cuBLAS alone has ~90 KiB), so it cannot start in a
// CUDA build.
class MetricsExposer {
 public:
  ~MetricsExposer();
  MetricsExposer(const MetricsExposer&) = delete;
  MetricsExposer& operator=(const MetricsExposer&) = delete;
  // The port bound (the OS's choice for a bind address with port 0).
  int port() const { return port_; }
  // Connections taken so far (the one being answered included), so that a
  // test knows the exposer holds its connection rather than guessing.
  int64_t connections_accepted() const { return accepted_.load(); }

 private:
  friend absl::StatusOr<std::unique_ptr<MetricsExposer>> StartMetricsExposerAt(
      const std::string& bind_address);
  MetricsExposer() = default;
  void Serve();

  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: written by the destructor
  int port_ = 0;
  std::atomic<int64_t> accepted_{0};
  std::thread thread_;
};

// --metrics-port: serves on 0.0.0.0:port. Port 0 means off: returns
// nullptr. INVALID_ARGUMENT for a port outside [0, 65535]; UNAVAILABLE
// naming the port when it cannot be bound.
absl::StatusOr<std::unique_ptr<MetricsExposer>> StartMetricsExposer(int port);
// The same on "host:port" (a numeric IPv4 or IPv6 host, or a name; port 0:
// a port the OS chooses, see port()). INVALID_ARGUMENT for an address
// without a port or a host that does not resolve; UNAVAILABLE naming the
// address and the reason when it cannot be bound.
absl::StatusOr<std::unique_ptr<MetricsExposer>> StartMetricsExposerAt(
    const std::string& bind_address);

}  // namespace ferry

#endif  // FERRY_COMMON_PROMETHEUS_METRICS_H_
