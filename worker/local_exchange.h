// LocalExchange: the GradientExchange of standalone training
// (worker/standalone_loop.h), the one worker's own parameter server held
// in-process. The weights stay in the trainer's buffers: BeginStep leaves
// them as they are; FinishStep applies the job's optimizer to the step's
// mean gradient (the declared sums divided by the step's samples, as the
// shards and the ring do: compute/optimizer.h, BatchNorm state in the
// buffer's last state_elements). A DLRM's tables live in a SparseStore of
// one shard (not owned): embedding_rows() reads them, and FinishStep applies
// the rows ReadyRows declared with the store's row-wise optimizer, after the
// dense update, as step lease.step().
//
// Ownership: owns the optimizer; the backend, buffers and store outlive it.
// Thread safety: not thread-safe; the training loop's thread calls it.
#ifndef FERRY_WORKER_LOCAL_EXCHANGE_H_
#define FERRY_WORKER_LOCAL_EXCHANGE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/optimizer_config.h"
#include "compute/compute_backend.h"
#include "compute/optimizer.h"
#include "ps/sparse_store.h"
#include "worker/gradient_exchange.h"

namespace ferry {

struct LocalExchangeOptions {
  ComputeBackend* backend = nullptr;
  ExchangeBuffers buffers;  // the whole job buffer (no segments)
  OptimizerConfig optimizer;
  int64_t state_elements = 0;     // BatchNorm state at the buffer's end
  SparseStore* tables = nullptr;  // a DLRM's tables; nullptr: none
};

class LocalExchange final : public GradientExchange,
                            public EmbeddingRowExchange {
 public:
  // INVALID_ARGUMENT for missing buffers or backend, buffers with segments
  // or state_elements outside the buffer; Optimizer::Create's errors.
  static absl::StatusOr<std::unique_ptr<LocalExchange>> Create(
      LocalExchangeOptions options);

  std::string mode() const override { return "local"; }
  ExchangePolicy policy() const override { return ExchangePolicy(); }
  // INVALID_ARGUMENT for a step without samples or with other buffers.
  absl::Status BeginStep(const ExchangeStep& step) override;
  absl::Status Ready(int64_t offset, int64_t length) override;
  absl::Status FinishStep() override;
  void AbandonStep() override { open_ = false; }
  void CancelIfOlder(int64_t /*fence*/) override {}
  bool WaitedForOthers(const absl::Status& /*failure*/) override {
    return false;
  }
  // EmbeddingRowExchange (with tables).
  EmbeddingRowSource* embedding_rows() override {
    return rows_.has_value() ? &*rows_ : nullptr;
  }
  absl::Status ReadyRows(const std::vector<SparseRows>& rows) override;
  void BetweenSteps() override {}
  absl::Status AddToReport(v1::StepReport& /*report*/) override {
    return absl::OkStatus();
  }
  // The buffers' params, on the host.
  absl::StatusOr<std::vector<float>> FinalWeights() override;
  ExchangeBytes bytes() const override { return ExchangeBytes(); }

  int64_t steps_applied() const { return optimizer_.steps_applied(); }

 protected:
  // EmbeddingRowExchange when the job has tables.
  ExchangeCapability* FindCapability(std::string_view name) override {
    return options_.tables != nullptr ? Offer<EmbeddingRowExchange>(this, name)
                                      : nullptr;
  }

 private:
  LocalExchange(LocalExchangeOptions options, Optimizer optimizer);

  LocalExchangeOptions options_;
  Optimizer optimizer_;
  std::optional<SparseStoreRowSource> rows_;
  // The open step's.
  bool open_ = false;
  int64_t step_ = 0;
  int64_t samples_ = 0;
  int64_t declared_ = 0;  // elements declared Ready
  std::optional<std::vector<SparseRows>> step_rows_;
};

}  // namespace ferry

#endif  // FERRY_WORKER_LOCAL_EXCHANGE_H_
