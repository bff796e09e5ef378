#include "worker/ring_exchange.h"

#include <numeric>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace ferry {
namespace {
// Op id 0 of every ring session is the broadcast of rank 0's weights.
constexpr int64_t kBroadcastOp = 0;
}  // namespace

absl::StatusOr<std::unique_ptr<RingExchange>> RingExchange::Create(
    RingExchangeOptions options) {
  if (options.backend == nullptr || options.peer == nullptr ||
      options.params == nullptr || options.grads == nullptr ||
      options.host_grads == nullptr) {
    return absl::InvalidArgumentError("ring exchange: missing backend, peer or buffers");
  }
  const int64_t n = std::accumulate(options.tensor_sizes.begin(),
                                    options.tensor_sizes.end(), int64_t{0});
  ASSIGN_OR_RETURN(std::vector<Bucket> plan,
                   PlanBuckets(options.tensor_sizes, options.bucket_elements));
  ASSIGN_OR_RETURN(Optimizer optimizer,
                   Optimizer::Create(options.optimizer, options.backend,
                                     static_cast<size_t>(n)));
  return std::unique_ptr<RingExchange>(new RingExchange(
      std::move(options), std::move(plan), std::move(optimizer), n));
}

absl::Status RingExchange::JoinRing(const v1::NextTaskResponse& lease) {
  session_.reset();  // closes the old links first
  GrpcRingTransportOptions topts;
  topts.job_id = options_.job_id;
  topts.generation = lease.ring_generation();
  topts.rank = lease.rank();
  for (const v1::RingMember& m : lease.ring()) {
    topts.ring.push_back({m.worker_id(), m.peer_address()});
  }
  topts.mailbox = options_.peer->mailbox.get();
  topts.counter = options_.peer->counter.get();
  auto session = std::make_unique<Session>();
  session->ring_generation = lease.ring_generation();
  ASSIGN_OR_RETURN(session->transport, GrpcRingTransport::Create(std::move(topts)));
  RingCollectiveOptions copts;
  copts.timeout = options_.collective_timeout;
  session->collective =
      std::make_unique<RingCollective>(session->transport.get(), copts);
  session->reducer = std::make_unique<BucketAllReducer>(
      session->collective.get(), plan_, options_.host_grads);
  // Every member starts the ring from rank 0's weights.
  ComputeBackend* backend = options_.backend;
  if (backend->IsHostMemory()) {
    RETURN_IF_ERROR(session->collective->Broadcast(kBroadcastOp, options_.params, n_, 0));
  } else {
    ASSIGN_OR_RETURN(std::vector<float> host, HostParams());
    RETURN_IF_ERROR(session->collective->Broadcast(kBroadcastOp, host.data(), n_, 0));
    RETURN_IF_ERROR(backend->CopyToDevice(host.data(), n_, options_.params));
  }
  session->next_op = kBroadcastOp + 1;
  session_ = std::move(session);
  return absl::OkStatus();
}

absl::Status RingExchange::BeginStep(const v1::NextTaskResponse& lease) {
  if (lease.ring_size() == 0 || lease.rank() < 0 || lease.rank() >= lease.ring_size() ||
      lease.step_samples() <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ring lease for step %d: rank %d in a ring of %d, %d samples", lease.step(),
        lease.rank(), lease.ring_size(), lease.step_samples()));
  }
  if (lease.ring(lease.rank()).worker_id() != options_.worker_id) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ring lease for step %d puts %s, not %s, at rank %d", lease.step(),
        lease.ring(lease.rank()).worker_id(), options_.worker_id, lease.rank()));
  }
  if (session_ == nullptr || session_->ring_generation != lease.ring_generation()) {
    if (absl::Status joined = JoinRing(lease); !joined.ok()) {
      session_.reset();
      return joined;
    }
  }
  step_samples_ = lease.step_samples();
  session_->reducer->Start(session_->next_op);
  session_->next_op += static_cast<int64_t>(plan_.size());
  return absl::OkStatus();
}

absl::Status RingExchange::Ready(int64_t offset, int64_t length) {
  if (session_ == nullptr) return absl::FailedPreconditionError("no ring step begun");
  return session_->reducer->Ready(offset, length);
}

absl::Status RingExchange::FinishStep() {
  if (session_ == nullptr) return absl::FailedPreconditionError("no ring step begun");
  if (absl::Status reduced = session_->reducer->Finish(); !reduced.ok()) {
    session_.reset();
    return reduced;
  }
  ComputeBackend* backend = options_.backend;
  if (!backend->IsHostMemory()) {
    RETURN_IF_ERROR(backend->CopyToDevice(options_.host_grads, n_, options_.grads));
  }
  RETURN_IF_ERROR(backend->Scale(n_, 1.0f / static_cast<float>(step_samples_),
                                 options_.grads));
  return optimizer_.Apply(options_.grads, options_.params);
}

void RingExchange::Abandon() {
  // Abort first: a bucket in flight then ends at once instead of running
  // into its deadline while the reducer is destroyed.
  if (session_ != nullptr) session_->transport->Abort();
  session_.reset();
}

absl::StatusOr<std::vector<float>> RingExchange::HostParams() {
  std::vector<float> host(n_);
  RETURN_IF_ERROR(options_.backend->CopyToHost(options_.params, n_, host.data()));
  return host;
}

absl::Status RingExchange::PublishIfWanted() {
  WeightsPublisher* publisher = options_.peer->publisher.get();
  if (!publisher->wanted()) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::vector<float> host, HostParams());
  publisher->Publish(optimizer_.steps_applied(), std::move(host));
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> RingExchange::WeightsDigest() {
  ASSIGN_OR_RETURN(std::vector<float> host, HostParams());
  uint64_t hash = 1469598103934665603ull;
  const auto* bytes = reinterpret_cast<const unsigned char*>(host.data());
  for (size_t i = 0; i < host.size() * sizeof(float); ++i) {
    hash = (hash ^ bytes[i]) * 1099511628211ull;
  }
  return hash;
}

}  // namespace ferry
