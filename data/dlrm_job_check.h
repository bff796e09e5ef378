// The checks a DLRM (CTR) job's flags must pass before anything starts,
// shared by the coordinator (server/run_coordinator.cc) and `ferry local`
// (client/main.cc) so that both refuse a configuration with the same words
// and neither starts a process that cannot train. INVALID_ARGUMENT, naming
// the flag, for each; callers exit with kExitConfig.
#ifndef FERRY_DATA_DLRM_JOB_CHECK_H_
#define FERRY_DATA_DLRM_JOB_CHECK_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/dlrm_spec.h"
#include "model/embedding_options.h"

namespace ferry {

// The DLRM that --model `model` names (IsDlrmModelText), checked to train on
// --dataset `dataset`: a criteo:DIR spec, and the spec's dense_features /
// num_fields Criteo's 13 / 26. ResolveDlrmSpec's errors (a file that cannot
// be read or parsed) otherwise. Reads no data.
absl::StatusOr<DlrmSpec> ResolveCriteoDlrm(const std::string& model,
                                           const std::string& dataset);

// What a distributed DLRM job cannot do: --export of full ring tables
// (`ring_full_table_rows` > 0: rows hold ids mod that many, not ids), and
// in ring mode a TTL or a memory limit on the tables (every member keeps
// every row, and a step a member rolls back cannot bring evicted rows
// back). Empty strings are "not given". (--init-from with full ring tables
// is refused by the coordinator: CheckRingFullTableRows' caller.)
absl::Status CheckDistributedDlrmFlags(const std::string& mode,
                                       const std::string& export_dir,
                                       int64_t ring_full_table_rows,
                                       const EmbeddingOptions& embedding);

// --mode hybrid with a model without embedding tables (a dense model has
// nothing for hybrid's shards): INVALID_ARGUMENT naming the model.
// Ring mode keeps every row on every member and rolls steps back by undo
// records, which no eviction is in: a TTL or a memory limit is refused
// (INVALID_ARGUMENT naming the flag).
absl::Status CheckRingKeepsEveryRow(const EmbeddingOptions& embedding);

// Full tables of `rows` rows whose every row holds `floats_per_row`
// gradient floats over all tables: refused below 0 and when the tables'
// gradient exceeds 2^31 floats.
absl::Status CheckFullTableRows(int64_t rows, int64_t floats_per_row);

// --ring-full-table-rows N (ring mode's full-table all-reduce) for `model`
// (its DLRM spec; null: a dense model): N != 0 is refused for a dense
// model and in another mode than ring, and as CheckFullTableRows with
// num_fields x embedding_dim floats a row.
absl::Status CheckRingFullTableRows(const std::string& mode, int64_t rows,
                                    const std::string& model,
                                    const DlrmSpec* spec);

absl::Status CheckModeFitsModel(const std::string& mode, bool dlrm,
                                const std::string& model);

// The --embedding-* flags configure a DLRM's tables: given (`given`) with a
// dense --model `model` (`dlrm` false) they are refused.
absl::Status CheckEmbeddingFlagsFitModel(bool given, bool dlrm,
                                         const std::string& model);

}  // namespace ferry

#endif  // FERRY_DATA_DLRM_JOB_CHECK_H_
