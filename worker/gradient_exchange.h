// GradientExchange: what the worker's training loop needs from a training
// mode for one synchronous or asynchronous step, so that the loop never
// branches on the mode. One exchange is chosen once, when the job is known,
// by MakeGradientExchange() (worker/make_gradient_exchange.h):
//
//   PS   (PsExchange, worker/ps_exchange.h): BeginStep pulls the weights of
//        version >= lease.pull_version from every shard and opens a push
//        session; Ready pushes each final gradient range to its shards;
//        FinishStep waits until every shard accepted the push. The optimizer
//        runs on the shards.
//   ring (RingExchange, worker/ring_exchange.h): BeginStep joins the lease's
//        ring (a new ring generation: new links, rank 0's state broadcast,
//        rolled back to the committed step first); Ready all-reduces each
//        complete bucket; FinishStep waits for every bucket and applies the
//        optimizer locally. A DLRM's tables are the member's own
//        (worker/ring_tables.h), their touched rows all-gathered in
//        FinishStep.
//   hybrid (HybridExchange): the ring's, for a DLRM's dense layers, plus its
//        embedding rows pulled from and pushed to the shards.
//   local (LocalExchange, worker/local_exchange.h): standalone training's
//        in-process parameter server.
//
// A step, as the loop drives it:
//
//   BeginStep(step)                        weights in buffers.params
//   forward + backward; for every range that became final:
//     Ready(offset, length)                buffers.host_grads[range] final
//   FinishStep()                           the step's gradient is committed
//   AddToReport(report)                    mode's figures for the coordinator
//
// and after any of them failed: AbandonStep(), then the loop asks the
// coordinator again (policy() says how it counts and reports the failure).
//
// This interface holds only what every exchange does. What only some modes
// do is a capability (worker/exchange_capabilities.h) that an exchange has
// or lacks, and that a trainer or the loop asks for with capability<C>() /
// RequireCapability<C>(): a DLRM's rows (EmbeddingRowExchange: PS, ring
// with tables, hybrid, local), zeros declared without a buffer
// (PartialBufferExchange: PS), work at the job's end
// (EndOfTrainingExchange: ring) and dropping undo state of committed steps
// (CommittedStepsObserver: ring).
//
// Extension points. Every method works on flat ranges of the parameter
// buffer (model/parameter_layout.h), never on the whole model at once, so:
//  - the hybrid mode (HybridExchange, worker/hybrid_exchange.h) composes
//    a RingExchange over the dense buffer with a rows-only ParameterClient:
//    Ready goes to the ring, EmbeddingRowExchange::ReadyRows to the shards;
//  - pipeline jobs (worker/pipeline_lease_trainer.h) keep the ring's or
//    the PS's exchange and change the compute instead: a stage declares its
//    layers' gradient and zeros for the rest of the buffer (on the PS, the
//    all-zero chunks travel as flags), and ExchangeStep names the stage's
//    range (PS: pull only it) and stage rings (ring: all-reduce and apply
//    only its range, in its stage's ring). In PS mode a stage's buffers
//    hold only its layers (ExchangeStep.buffers) and it declares the rest
//    of the gradient with PartialBufferExchange::ReadyZeros.
//
// Ownership: an exchange owns its clients (ParameterClient, ring transports)
// and never owns the buffers or the backend it is given; those outlive it.
//
// Thread safety: one thread, the training loop's, calls every method, except
// CancelIfOlder(), capability() and CommittedStepsObserver::
// ObserveCommitted(), which any thread (the heartbeat thread) may call at
// any time.
#ifndef FERRY_WORKER_GRADIENT_EXCHANGE_H_
#define FERRY_WORKER_GRADIENT_EXCHANGE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/byte_counter.h"
#include "common/sharding.h"
#include "ferry/v1/coordinator.pb.h"
#include "worker/exchange_capabilities.h"

namespace ferry {

// The worker's flat parameter and gradient buffers (num_elements floats
// each), not owned. params and grads are in the backend's memory;
// host_params and host_grads are host staging buffers, equal to params and
// grads for a host-memory backend.
struct ExchangeBuffers {
  int64_t num_elements = 0;
  float* params = nullptr;
  float* grads = nullptr;
  float* host_params = nullptr;
  float* host_grads = nullptr;
  // The ranges of the model's flat buffer the buffers hold, back to back in
  // this order (their sizes add up to num_elements); empty: the whole
  // buffer, [0, num_elements). A PS pipeline stage's buffers hold its
  // parameters' range and, for a model with BatchNorm, its state's.
  std::vector<FlatRange> segments;
  // The trainer writes grads and host_grads only between a BeginStep that
  // returned OK and the step's FinishStep or AbandonStep, and reads nothing
  // it did not write there: outside a step the exchange may use them (a
  // sharded ring member keeps its rollback copy there). False when a host
  // program's code holds views of them (PyTorch workers' .grad).
  bool grads_idle_between_steps = false;
  // Only the exchange writes params; the trainer reads them (false when a
  // host program's code holds views of them: PyTorch workers' buffers and
  // evaluations).
  bool params_written_only_by_exchange = false;

  // Where flat elements [flat, flat + length) are in the buffers: their
  // index, or -1 when no one segment holds them all (or length < 0).
  int64_t IndexOf(int64_t flat, int64_t length) const {
    if (length < 0 || flat < 0) return -1;
    if (segments.empty()) return flat + length <= num_elements ? flat : -1;
    int64_t at = 0;
    for (const FlatRange& s : segments) {
      if (flat >= s.begin && flat + length <= s.end) {
        return at + (flat - s.begin);
      }
      at += s.size();
    }
    return -1;
  }
};

// One TRAIN lease as the loop hands it to the exchange.
struct ExchangeStep {
  const v1::NextTaskResponse* lease = nullptr;  // not owned; outlives the step
  // The membership generation the worker knows (the lease's when it names
  // one, else the newest heartbeat's).
  int64_t generation = 0;
  // This worker's samples in the step; 0 only when policy() allows it (a
  // ring member without samples declares an all-zero gradient; a PS
  // pipeline stage of a replica with samples its stage's gradient).
  int64_t num_samples = 0;
  // The parts of the model the step computes with: a pipeline stage's
  // parameters and (with BatchNorm) state. Empty: the whole buffer. PS
  // pulls only the chunks in them, each into where the buffers hold it (the
  // rest of params keeps older values); the ring keeps the whole buffer.
  std::vector<FlatRange> pull_ranges;
  // Only for an exchange with PartialBufferExchange (PS): the buffers of
  // this step when they are not the ones the exchange was made with (not
  // owned): a pipeline stage's, holding its pull_ranges only. They must
  // outlive the step and the pull started ahead into them: free them only
  // after the next BeginStep with other buffers, or after AbandonStep.
  // Other exchanges refuse them (INVALID_ARGUMENT).
  const ExchangeBuffers* buffers = nullptr;
  // Ring pipelines (worker/pipeline_lease_trainer.h): the job's stages'
  // parameter ranges, in flat order (empty: not a pipeline job). A new
  // ring generation gathers each range from a member that holds it current.
  // Exchanges without a ring ignore this and stage_rings.
  std::vector<FlatRange> stage_ranges;
  // The stage rings this member all-reduces its stages' ranges in (one ring
  // per stage: that stage's members and the members training alone), in
  // stage order; empty: the whole buffer over the lease's ring.
  struct StageRing {
    int stage = 0;           // index into stage_ranges
    std::vector<int> ranks;  // ranks of lease.ring(), ascending, this one's too
  };
  std::vector<StageRing> stage_rings;
  // Ring pipelines: the ranks of lease.ring() that hold each of
  // stage_ranges current after the step (ascending; every member when
  // there are no stage rings), which split the ring checkpoint's parts
  // (common/ring_checkpoint.h RingCheckpointPartsOf).
  std::vector<std::vector<int>> stage_holders;

  static ExchangeStep Of(const v1::NextTaskResponse* lease, int64_t generation,
                         int64_t num_samples) {
    ExchangeStep step;
    step.lease = lease;
    step.generation = generation;
    step.num_samples = num_samples;
    return step;
  }
};

// How the loop treats this mode's leases and failures; fixed for the
// exchange's lifetime.
struct ExchangePolicy {
  // A lease without samples is trained (zeros contributed) instead of
  // refused with INVALID_ARGUMENT (ring: every member is in every step).
  bool allow_empty_batch = false;
  // A lease formed under a fence older than the newest one the heartbeats
  // saw is given up (ABORTED) without starting it.
  bool fenced = false;
  // A failed step is reported to the coordinator (StepReport.failed), so
  // that it re-forms the step for every member.
  bool report_failed_steps = false;
  // Failures in a row (not counting steps closed without this worker or
  // waits for other workers) after which the worker gives up.
  int max_consecutive_failures = 10;
  // Wait (exponential backoff on the worker's clock) before asking for the
  // next lease after a failure, e.g. until a dead member is evicted.
  bool backoff_after_failure = false;
};

// Cumulative bytes of the exchange's traffic, by kind of peer.
struct ExchangeBytes {
  TransferBytes ps;     // with PS shards
  TransferBytes peers;  // with other workers
};

class GradientExchange {
 public:
  virtual ~GradientExchange() = default;

  // The mode's name ("ps", "ring", "hybrid", "local"): logs and summaries.
  virtual std::string mode() const = 0;
  virtual ExchangePolicy policy() const = 0;

  // Makes buffers.params the weights `step` computes on and opens the
  // step's gradient exchange. REQUIRES: no step open (FinishStep or
  // AbandonStep called after the previous BeginStep).
  // Errors: INVALID_ARGUMENT for a lease the mode cannot train (a ring
  // lease without a ring, rank or samples); PS: the ParameterClient's Pull
  // errors (DATA_LOSS, DEADLINE_EXCEEDED, UNAVAILABLE, ...); ring: the
  // transport's (UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED) and
  // FAILED_PRECONDITION when rank 0 cannot roll back to the lease's step.
  virtual absl::Status BeginStep(const ExchangeStep& step) = 0;

  // buffers.host_grads[offset, offset + length) holds the final gradient
  // SUM of the step's samples for that range. Ranges come in any order and
  // do not overlap; together they cover the whole buffer once.
  // Errors: FAILED_PRECONDITION without an open step; INVALID_ARGUMENT for
  // a range outside the buffer or declared twice; a transport failure may
  // surface here or only in FinishStep.
  virtual absl::Status Ready(int64_t offset, int64_t length) = 0;

  // Completes the step. OK means the step's gradient is committed: PS,
  // every shard accepted the push (ALREADY_EXISTS from a retried push
  // counts as accepted); ring, every bucket was all-reduced and
  // buffers.params -= optimizer(sum / step_samples) was applied exactly
  // once. Errors: FAILED_PRECONDITION when a range was never declared or
  // no step is open; PS: the first failing shard's status (ABORTED stale
  // generation, FAILED_PRECONDITION step closed, UNAVAILABLE,
  // DEADLINE_EXCEEDED, ...); ring: the collective's (DEADLINE_EXCEEDED,
  // UNAVAILABLE naming the peer, CANCELLED after CancelIfOlder).
  // The step is closed whatever the outcome.
  virtual absl::Status FinishStep() = 0;

  // Drops whatever the open step holds (PS: the push streams are cancelled,
  // the shards apply nothing; ring: the ring session is dropped, the next
  // step forms a new one). Idempotent; no step is open afterwards.
  virtual void AbandonStep() = 0;

  // Any thread: when the open step was leased under a fence older than
  // `fence` (the coordinator aborted it), its exchange ends at once with
  // CANCELLED. A no-op for modes without fences.
  virtual void CancelIfOlder(int64_t fence) = 0;

  // Whether `failure` (of BeginStep/Ready/FinishStep) was a wait for other
  // workers rather than a fault of this one (PS: DEADLINE_EXCEEDED while
  // every shard answers); such failures do not count towards giving up.
  virtual bool WaitedForOthers(const absl::Status& failure) = 0;

  // Called between steps and while waiting for a lease (ring: hands the
  // weights to a reader that asked for them). Never fails the loop.
  virtual void BetweenSteps() = 0;

  // Adds the mode's figures to a finished step's report: the cumulative
  // byte counts of its peers and, when due, the weights digest.
  virtual absl::Status AddToReport(v1::StepReport& report) = 0;
  // What a failed step's report (ExchangePolicy.report_failed_steps) says
  // beyond the failure itself. Default: nothing.
  virtual void AddToFailedReport(v1::StepReport& report) { (void)report; }

  // The weights the worker ends with, flat, on the host (PS: the shards'
  // newest; ring: its own). Errors as BeginStep's.
  virtual absl::StatusOr<std::vector<float>> FinalWeights() = 0;

  virtual ExchangeBytes bytes() const = 0;

  // The exchange's capability C (worker/exchange_capabilities.h: an
  // interface deriving from ExchangeCapability), or nullptr when it has
  // none. Fixed for the exchange's lifetime; the pointer lives as long as
  // the exchange. Any thread.
  template <class C>
  C* capability() {
    static_assert(std::is_base_of_v<ExchangeCapability, C>);
    return static_cast<C*>(FindCapability(C::kName));
  }

  // capability<C>(), or INVALID_ARGUMENT naming the mode and the capability
  // when the exchange lacks it (a trainer the job's mode cannot serve).
  template <class C>
  absl::StatusOr<C*> RequireCapability() {
    C* found = capability<C>();
    if (found == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("the ", mode(), " exchange has no ", C::kName,
                       " (this job's trainer needs them)"));
    }
    return found;
  }

 protected:
  // The capability named `name` (some C::kName), as Offer<C> returns it;
  // nullptr (the default) when the exchange lacks it.
  virtual ExchangeCapability* FindCapability(std::string_view name) {
    (void)name;
    return nullptr;
  }

  // For FindCapability: `self` as its capability C when `name` is C's,
  // else nullptr.
  template <class C, class Self>
  static ExchangeCapability* Offer(Self* self, std::string_view name) {
    static_assert(std::is_base_of_v<C, Self>);
    if (name != C::kName) return nullptr;
    return static_cast<C*>(self);
  }
};

// Sets `bytes` under `role` in `out` (sent, received and, when any, calls):
// how exchanges put their cumulative counts into a StepReport.
inline void AddRoleBytes(const std::string& role, const TransferBytes& bytes,
                         v1::ByteCounts* out) {
  (*out->mutable_sent())[role] = bytes.sent;
  (*out->mutable_received())[role] = bytes.received;
  if (bytes.calls > 0) (*out->mutable_calls())[role] = bytes.calls;
}

}  // namespace ferry

#endif  // FERRY_WORKER_GRADIENT_EXCHANGE_H_
