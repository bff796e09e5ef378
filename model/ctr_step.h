// CtrStep: the compute half of one CTR (DLRM) training step, without the
// optimizer and without the data loop, so that the standalone trainer and the
// distributed workers (PS, ring, hybrid) run the same code:
//
//   CtrBatch -> SparseBatch -> DeduplicateIds -> read the unique rows
//   (EmbeddingRowSource) -> GatherPooled -> DlrmModel::ForwardBackward
//   -> ScatterRowGradients
//
// It returns SUMS over the batch's samples (grad_scale 1): the dense
// gradient in `grads`, and per table the gradient of each unique row
// (SparseRows, model/embedding_bag.h), ready for SparseStore::ApplyStep or
// a push, whose receiver divides by the step's samples. The rows of a
// batch's unique ids are read from the EmbeddingRowSource in one call.
//
// Thread safety: not thread-safe (it owns its workspaces); one training
// thread uses it.
#ifndef FERRY_MODEL_CTR_STEP_H_
#define FERRY_MODEL_CTR_STEP_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "compute/compute_backend.h"
#include "model/dlrm_model.h"
#include "model/embedding_bag.h"
#include "model/embedding_row_source.h"

namespace ferry {

struct CtrStepResult {
  int batch = 0;
  double loss_sum = 0.0;  // binary cross-entropy summed over the batch
  // Per table with at least one id in the batch, in table order: its unique
  // ids (first-seen order) and d(loss sum)/d(row), ids.size() x dim.
  std::vector<SparseRows> rows;
  // Unique ids per table (every table, 0 for a table without ids), and
  // their sum.
  std::vector<int64_t> unique_ids_per_table;
  int64_t unique_ids = 0;
};

class CtrStep {
 public:
  // Builds the DLRM of `spec` on `backend` (not owned; it must outlive the
  // step). Tables are the spec's fields, table f of dim embedding_dim.
  // INVALID_ARGUMENT for a bad spec.
  static absl::StatusOr<CtrStep> Create(const DlrmSpec& spec,
                                        ComputeBackend* backend);

  CtrStep(CtrStep&&) = default;
  CtrStep& operator=(CtrStep&&) = default;

  const DlrmModel& model() const { return model_; }
  const DlrmSpec& spec() const { return model_.spec(); }
  int64_t num_params() const { return model_.layout().total_elements(); }

  // One training pass over `batch` with the dense parameters `params`
  // (backend memory, num_params() floats): reads each table's unique rows
  // once from `rows`, overwrites `grads` (backend memory, num_params()) with
  // d(sum of losses)/d(params) and returns the row gradient sums.
  // Errors (nothing written to `grads` unless the model ran):
  // INVALID_ARGUMENT for an empty batch or one that does not fit the spec
  // (num_fields, dense width, labels, malformed offsets), or rows of
  // another size than the tables' dim; the row source's errors with their
  // code, the message prefixed with what was read; the backend's.
  absl::StatusOr<CtrStepResult> ForwardBackward(const CtrBatch& batch,
                                                const float* params,
                                                EmbeddingRowSource& rows,
                                                float* grads);

  // The click probabilities of `batch`'s samples into `probabilities` (host,
  // batch.batch floats). Errors as ForwardBackward, and INVALID_ARGUMENT for
  // a wrong output size.
  absl::Status Predict(const CtrBatch& batch, const float* params,
                       EmbeddingRowSource& rows,
                       absl::Span<float> probabilities);

 private:
  CtrStep(DlrmModel model, ComputeBackend* backend)
      : model_(std::move(model)), backend_(backend) {}

  // Checks `batch`, deduplicates its ids into unique_, reads their rows and
  // pools them; dense features and pooled embeddings end up in dense_dev_ and
  // pooled_dev_.
  absl::Status Prepare(const CtrBatch& batch, EmbeddingRowSource& rows);
  absl::Status EnsureCapacity(int batch);

  DlrmModel model_;
  ComputeBackend* backend_;
  SparseBatch sparse_;
  UniqueRows unique_;
  std::vector<TableIds> read_;                  // tables with ids
  std::vector<std::vector<float>> row_values_;  // per entry of read_
  std::vector<float> pooled_host_, d_pooled_host_;
  int capacity_ = 0;
  DeviceBuffer dense_dev_, pooled_dev_, d_pooled_dev_;
};

}  // namespace ferry

#endif  // FERRY_MODEL_CTR_STEP_H_
