// A stateless worker of a job run by a coordinator:
//
//   Register -> heartbeat thread -> load data, build model and backend
//   (StepTrainer) -> pick the job's GradientExchange once
//   (MakeGradientExchange: PS or ring) ->
//   loop { NextTask(report of the previous step):
//            TRAIN:  StepTrainer::Train through the exchange (PS: pull,
//                    then push each layer's gradient SUM while the earlier
//                    layers still run backward; ring: join the lease's
//                    ring, all-reduce each bucket as soon as it is final,
//                    apply the optimizer locally);
//            WAIT:   ask again;
//            FINISH: leave }
//
// The loop has no mode branches: what differs between modes is the
// exchange and its ExchangePolicy (worker/gradient_exchange.h). Everything
// that touches the outside (coordinator, shards, peers, clock) comes in
// through WorkerDeps (worker/worker_deps.h); ferry-worker wires the gRPC
// ones (worker/grpc_worker_deps.h), tests in-memory ones.
//
// The samples of a DataTask are EpochPermutation(epoch_size, job.seed, epoch,
// shuffle = true)[begin, end), so every worker and the standalone trainer
// agree on them.
#ifndef FERRY_WORKER_DISTRIBUTED_WORKER_H_
#define FERRY_WORKER_DISTRIBUTED_WORKER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/link_shaper.h"
#include "compute/compute_backend.h"
#include "nlohmann/json.hpp"
#include "ps/ps_client.h"
#include "worker/lease_trainer.h"
#include "worker/worker_deps.h"

namespace ferry {

class HealthState;

struct WorkerOptions {
  std::string coordinator_address;  // HOST:PORT
  DeviceChoice device = DeviceChoice::kAuto;
  int threads = 1;  // BLAS threads (CPU backend)
  // Deadline of Register, NextTask, every Pull and Push attempt. Pulls may
  // wait for other workers' gradients in sync mode, so keep it long.
  absl::Duration rpc_timeout = absl::Seconds(30);
  // Backoff for UNAVAILABLE coordinator and shards (restarting peers).
  RetryPolicy retry;
  // Where this worker's ring peer service listens (HOST:PORT, port 0: any
  // free port). It always runs; ring-mode jobs use it.
  std::string peer_listen_address = "0.0.0.0:0";
  // HOST[:PORT] other workers use to reach the peer service, sent to the
  // coordinator at Register. Empty: the listen host (or this machine's
  // hostname for a wildcard listen host) with the bound port; a HOST alone
  // gets the bound port.
  std::string peer_advertise_address;
  // Non-empty: at the end of the job write the final weights here (raw
  // little-endian fp32, flat parameter order), like a rank-0 checkpoint.
  std::string final_weights_path;
  // Deadline of one ring collective (a gradient bucket or a broadcast).
  absl::Duration collective_timeout = absl::Seconds(30);
  // ferry-worker: after an eviction (IsEviction) register again as a new
  // member, at most this many times (0: exit with the eviction's error).
  int max_rejoins = 5;
  // Not owned; may be set at any time (e.g. by a signal handler). The worker
  // then finishes the step it is in (an RPC in flight ends within
  // rpc_timeout), reports it, leaves the job and returns OK.
  const std::atomic<bool>* stop_requested = nullptr;
  // Link emulation of this worker's PS pushes and pulls and ring streams
  // (one LinkShaper for the process); the default is no limit.
  LinkLimit link;
  // Ring mode: offer the next rank a shared-memory link when it runs on
  // this host (ring/grpc_ring_transport.h; never with link emulation);
  // false: the loopback stream carries the messages.
  bool ring_shared_memory = true;
  // Ring members whose rollback copy is at least this many bytes learn of
  // each commit at once and, with sharded optimizer state, keep the copy in
  // their gradient buffer (RingExchangeOptions.prompt_commit_min_bytes;
  // -1: its default, 16 MiB).
  int64_t ring_prompt_commit_min_bytes = -1;
  // Not owned; when set, the ring peer server's grpc.health.v1 service
  // follows it (ferry-worker passes its ProcessOps' state).
  HealthState* health = nullptr;
  // Builds the trainer once the job is known (on the loop's thread, after
  // Register); empty: MakeLeaseTrainer, the job's model family. A host
  // program that computes the gradients itself passes its own
  // (worker/hosted_worker.h). Its error ends the worker.
  std::function<absl::StatusOr<std::unique_ptr<LeaseTrainer>>(
      const v1::JobSpec& job)>
      make_trainer;
};

struct WorkerSummary {
  std::string worker_id;
  std::string job_id;
  std::string device;
  std::string end_reason;  // "finished" (coordinator said FINISH) or "stopped"
  int64_t steps = 0;       // steps whose gradient every shard accepted
  int64_t samples = 0;     // samples in those steps
  int64_t abandoned_steps = 0;  // leased steps given up (see below)
  // Ring: steps whose rollback copy moved out of the gradient buffer
  // (CommittedStepsObserver::undo_state_moves).
  int64_t rollback_copies_moved = 0;
  double loss_sum = 0.0;  // over `samples`
  int64_t correct = 0;
  double wall_seconds = 0.0;
  double compute_seconds = 0.0;
  double comm_seconds = 0.0;  // pull + push not overlapped with compute
  TransferBytes ps_bytes;
  TransferBytes coordinator_bytes;
  TransferBytes peer_bytes;    // ring mode: other workers
  LinkLimit link;              // the link emulation in effect
  LinkShaperStats link_stats;  // what it delayed (zero without one)
  nlohmann::json trainer;      // LeaseTrainer::SummaryJson, merged in ToJson

  nlohmann::json ToJson() const;
  // Takes the run's totals from what counted them: the exchange's bytes
  // (and, with `committed`, its moved undo state), the peer endpoint's
  // bytes and link delays, the coordinator client's bytes.
  void AddTotals(GradientExchange& exchange,
                 const CommittedStepsObserver* committed,
                 const PeerEndpoint& peer, const TransferBytes& coordinator);
};

// Runs the worker until the coordinator says FINISH or stop is requested.
//
// A step that fails with UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED (stale
// generation), FAILED_PRECONDITION (step not open), ALREADY_EXISTS or
// CANCELLED is abandoned (GradientExchange::AbandonStep; a ring member
// reports it as failed so the coordinator re-forms it) and the worker asks
// for the next task; ExchangePolicy::max_consecutive_failures such failures
// in a row (PS 10, ring 60, with backoff) end the worker with the last one.
// In PS mode a DEADLINE_EXCEEDED does not count when every shard then
// answers a ShardInfo call (ParameterClient::CheckShards): the step was
// waiting for another contributor, e.g. one cut off from a shard by a
// network partition, which is the one whose failures count. A shard
// answering ALREADY_EXISTS to a push holds this worker's push from an
// earlier attempt at the step and counts as accepted (PushSession::Finish).
//
// Errors: NOT_FOUND when the coordinator evicted this worker; UNAVAILABLE
// when the coordinator stays unreachable through the retry budget;
// FAILED_PRECONDITION / RESOURCE_EXHAUSTED when Register is refused, or when
// the job's tensors do not match its model (or a PS job has no shards);
// INVALID_ARGUMENT for a lease without samples or outside the dataset;
// DATA_LOSS from a shard sending a bad pull; errors of dataset loading and
// the backend as they come.
//
// `options` configures the loop (device, threads, rpc_timeout for the
// shard checks, collective_timeout, final_weights_path, stop_requested);
// the gRPC-only fields (addresses, link, health, retry) matter to
// MakeGrpcWorkerDeps alone. INVALID_ARGUMENT for missing deps.
absl::StatusOr<WorkerSummary> RunDistributedWorker(const WorkerOptions& options,
                                                   WorkerDeps deps);

// Whether `status` is RunDistributedWorker's eviction (the coordinator no
// longer knew this worker: it missed heartbeats, e.g. paused past the
// timeout), after which the process may register again as a new member.
bool IsEviction(const absl::Status& status);

}  // namespace ferry

#endif  // FERRY_WORKER_DISTRIBUTED_WORKER_H_
