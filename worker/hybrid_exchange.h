// The hybrid mode's GradientExchange (worker/gradient_exchange.h): a DLRM's
// embedding tables live on the PS shards, its dense layers on the workers,
// all-reduced in their ring (Parallax's split: sparse variables on a
// parameter server, dense ones by all-reduce).
//
// A step, composed of a RingExchange over the dense buffer and a
// ParameterClient that holds no dense chunk (rows only):
//
//   BeginStep    the ring's (joins the lease's ring: rank 0's dense state
//                broadcast, rolled back to the committed step first);
//                embedding_rows() then reads rows of shard version >=
//                lease.pull_version() (the committed step).
//   ReadyRows    opens the step's push (PushInfo.with_rows,
//                commit_at_finish) and sends the row gradients at once, so
//                they travel while the dense buckets are all-reduced.
//   Ready        the ring's (dense buckets all-reduced as they complete).
//   FinishStep   the ring's (all buckets, then the dense optimizer applied
//                locally), then commits the rows' push and waits for every
//                shard to accept it.
//
// Atomicity: a shard applies a step's rows only once every contributor
// committed its push (finalize on push: the lease names the step's
// contributors) or the coordinator finalizes it (after every member
// reported), and a member commits only after its all-reduce succeeded and
// it applied the dense update. So rows applied on a shard mean the dense
// update is applied on every member. A step that fails anywhere is aborted
// by the coordinator: the shards drop its buffered rows (a rollback of the
// open step) and the members roll their dense state back when the next
// ring forms (RingExchange's state copies). A member lost after every
// commit (the rows applied, its report missing) makes the coordinator roll
// shards and ring back to the last checkpoint, as for PS's finalize on
// push.
//
// A member with no samples in a step (the ring's every-member-in-every-step
// at an epoch's end) all-reduces zeros and pushes nothing; the coordinator
// leaves it out of the shards' contributor set.
//
// Thread safety: as GradientExchange.
#ifndef FERRY_WORKER_HYBRID_EXCHANGE_H_
#define FERRY_WORKER_HYBRID_EXCHANGE_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ps/ps_client.h"
#include "worker/gradient_exchange.h"
#include "worker/ring_exchange.h"

namespace ferry {

class HybridExchange final : public GradientExchange,
                             public EmbeddingRowExchange {
 public:
  // `rows` is a client built with no dense chunks (an empty layout).
  HybridExchange(std::unique_ptr<RingExchange> ring,
                 std::unique_ptr<ParameterClient> rows);

  std::string mode() const override { return "hybrid"; }
  ExchangePolicy policy() const override { return ring_->policy(); }
  // The ring's BeginStep. INVALID_ARGUMENT also for a negative pull
  // version.
  absl::Status BeginStep(const ExchangeStep& step) override;
  absl::Status Ready(int64_t offset, int64_t length) override {
    return ring_->Ready(offset, length);
  }
  // The ring's FinishStep, then the rows' push Finish (its first failing
  // shard's status). FAILED_PRECONDITION when a step with samples never
  // declared its rows.
  absl::Status FinishStep() override;
  void AbandonStep() override;
  void CancelIfOlder(int64_t fence) override { ring_->CancelIfOlder(fence); }
  bool WaitedForOthers(const absl::Status& failure) override {
    return ring_->WaitedForOthers(failure);
  }
  // EmbeddingRowExchange: the shards' rows.
  EmbeddingRowSource* embedding_rows() override;
  absl::Status ReadyRows(const std::vector<SparseRows>& rows) override;
  void BetweenSteps() override { ring_->BetweenSteps(); }
  // The ring's figures (peer bytes, digest, checkpoint part) and the
  // shards' bytes.
  absl::Status AddToReport(v1::StepReport& report) override;
  // Why the ring checkpoint of the dense layers could not be restored.
  void AddToFailedReport(v1::StepReport& report) override {
    ring_->AddToFailedReport(report);
  }
  // The member's own dense weights (the tables stay on the shards).
  absl::StatusOr<std::vector<float>> FinalWeights() override {
    return ring_->FinalWeights();
  }
  ExchangeBytes bytes() const override {
    return {rows_->bytes(), ring_->bytes().peers};
  }

 protected:
  // EmbeddingRowExchange only: the ring's other capabilities are not
  // offered (its tables are on the shards; its committed steps are not
  // final, a shard restore may take the job back below them).
  ExchangeCapability* FindCapability(std::string_view name) override {
    return Offer<EmbeddingRowExchange>(this, name);
  }

 private:
  const std::unique_ptr<RingExchange> ring_;
  const std::unique_ptr<ParameterClient> rows_;
  ParameterClientRowSource row_source_;

  // The open step (step_open_) and its push.
  bool step_open_ = false;
  bool rows_declared_ = false;
  PushInfo push_info_;
  std::unique_ptr<PushSession> push_;
};

}  // namespace ferry

#endif  // FERRY_WORKER_HYBRID_EXCHANGE_H_
