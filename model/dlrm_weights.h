// The dense half of a DLRM export directory (worker/dlrm_export.h has the
// whole): DIR/model.json (DlrmToJson) and DIR/model.safetensors (the dense
// parameters under DlrmParameterLayout's names, F32, with metadata). Here
// so that a distributed job's processes (shards, ring members: proto/
// job_convert.h JobDenseInitialValues) read it without the tables' code.
//
// Thread safety: pure functions over their arguments.
#ifndef FERRY_MODEL_DLRM_WEIGHTS_H_
#define FERRY_MODEL_DLRM_WEIGHTS_H_

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

// Writes DIR/model.json and DIR/model.safetensors (each replaced atomically;
// DIR is created), `metadata` added to the weights file's. INVALID_ARGUMENT
// when `params` is not DlrmParameterLayout(spec)'s size.
absl::Status WriteDlrmWeights(
    const std::string& dir, const DlrmSpec& spec,
    absl::Span<const float> params,
    const std::map<std::string, std::string>& metadata,
    FileSystem* fs = PosixFileSystem());

// The dense parameters of DIR. The directory's model must be `expected`
// (INVALID_ARGUMENT showing both otherwise); the weights file must hold
// exactly the layout's tensors with their shapes and finite values
// (INVALID_ARGUMENT naming the first that does not); NOT_FOUND for a
// missing file.
absl::StatusOr<std::vector<float>> ReadDlrmWeights(
    const std::string& dir, const DlrmSpec& expected,
    FileSystem* fs = PosixFileSystem());

}  // namespace ferry

#endif  // FERRY_MODEL_DLRM_WEIGHTS_H_
