// The dense half of a DLRM export directory (ps/dlrm_export.h has the
// whole): DIR/model.json (DlrmToJson) and DIR/model.safetensors (the dense
// parameters under DlrmParameterLayout's names, F32, with the tables'
// metadata). Here so that a distributed job's processes (the coordinator,
// shards, ring members: proto/job_convert.h JobDenseInitialValues) read it
// without the tables' code.
//
// Thread safety: pure functions over their arguments.
#ifndef FERRY_MODEL_DLRM_WEIGHTS_H_
#define FERRY_MODEL_DLRM_WEIGHTS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/file_system.h"
#include "model/dlrm_spec.h"

namespace ferry {

// The export directory's third file, the tables (ps/tables_file.h).
inline constexpr char kDlrmEmbeddingsFile[] = "embeddings.ckpt";

// How the export's tables read ids without a row, kept in the weights
// file's metadata ("ferry.embedding.*"): an id without a row reads zeros
// until admitted (admit_count <= 1: always admitted; else once counted
// admit_count times), then its initial values: compute/
// row_optimizer_math.h InitialRowValue(seed, table, id, element,
// init_scale), or zeros when zero_initial (FTRL with l1 > 0). The rows keep
// the state of row_optimizer ("adagrad", "ftrl", "sgd"; empty in exports
// made before it was recorded: not checked then).
struct DlrmTablesMeta {
  uint64_t seed = 0;
  float init_scale = 0.0f;  // resolved (> 0)
  int32_t admit_count = 1;
  bool zero_initial = false;
  std::string row_optimizer;
  bool operator==(const DlrmTablesMeta&) const = default;
};
std::map<std::string, std::string> TablesMetadata(const DlrmTablesMeta& meta);
// INVALID_ARGUMENT naming the key when one is missing or garbled.
absl::StatusOr<DlrmTablesMeta> ParseTablesMetadata(
    const std::map<std::string, std::string>& metadata);
// OK when a job whose tables are `job` may start from an export of
// `exported`; else INVALID_ARGUMENT naming the flag and both values (an id
// the export never saw would read other values than it did there).
absl::Status CheckTablesMetaFits(const DlrmTablesMeta& exported,
                                 const DlrmTablesMeta& job);

// INVALID_ARGUMENT when `params` is not DlrmParameterLayout(spec)'s size.
absl::Status CheckDlrmParams(const DlrmSpec& spec,
                             absl::Span<const float> params);

// Writes DIR/model.json and DIR/model.safetensors (each replaced
// atomically; DIR is created), `tables` in the weights file's metadata.
// INVALID_ARGUMENT when `params` is not DlrmParameterLayout(spec)'s size.
absl::Status WriteDlrmWeights(const std::string& dir, const DlrmSpec& spec,
                              absl::Span<const float> params,
                              const DlrmTablesMeta& tables,
                              FileSystem* fs = PosixFileSystem());

// The dense parameters of DIR. The directory's model must be `expected`
// (INVALID_ARGUMENT showing both otherwise); the weights file must hold
// exactly the layout's tensors with their shapes and finite values
// (INVALID_ARGUMENT naming the first that does not); NOT_FOUND for a
// missing file. `tables` (optional) receives the tables' metadata
// (ParseTablesMetadata's errors when it cannot be read).
absl::StatusOr<std::vector<float>> ReadDlrmWeights(
    const std::string& dir, const DlrmSpec& expected,
    FileSystem* fs = PosixFileSystem(), DlrmTablesMeta* tables = nullptr);

}  // namespace ferry

#endif  // FERRY_MODEL_DLRM_WEIGHTS_H_
