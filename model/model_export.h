// A trained model as a directory PyTorch can load, and back:
//   DIR/model.json         ModelToJson(def) (ferry.model.v1)
//   DIR/model.safetensors  every parameter and state tensor under its
//                          nn.Sequential state_dict name and PyTorch shape;
//                          num_batches_tracked as I64, the rest F32.
// so that nn.Sequential(*layers).load_state_dict(..., strict=True) takes it
// (scripts/ferry_torch.py), and a directory PyTorch wrote the same way starts
// a ferry job (--init-from).
#ifndef FERRY_MODEL_MODEL_EXPORT_H_
#define FERRY_MODEL_MODEL_EXPORT_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/file_system.h"
#include "model/model_def.h"
#include "model/parameter_layout.h"
#include "model/safetensors.h"

namespace ferry {

inline constexpr char kModelJsonFile[] = "model.json";
inline constexpr char kModelWeightsFile[] = "model.safetensors";

// A model's values on the host: `params` laid out by ModelParameterLayout,
// `state` by ModelStateLayout (empty for a model without state).
struct ModelValues {
  ModelDef def;
  std::vector<float> params;
  std::vector<float> state;
};

// Writes DIR/model.json and DIR/model.safetensors (each replaced atomically;
// DIR is created). INVALID_ARGUMENT when the value counts do not match the
// def's layouts; the file system's errors otherwise.
absl::Status ExportModel(const std::string& dir, const ModelValues& model,
                         FileSystem* fs = PosixFileSystem());

// `values` (the flat buffer of `layout`) as a safetensors file of the
// layout's tensors, F32, in layout order, with `metadata` ("format": "pt"
// added). INVALID_ARGUMENT when the sizes differ.
absl::StatusOr<std::string> EncodeLayoutValues(
    const ParameterLayout& layout, absl::Span<const float> values,
    std::map<std::string, std::string> metadata = {});
// Writes DIR/model.safetensors = EncodeLayoutValues (replaced atomically;
// DIR is created): a model that is not ferry's (a ferry.torch worker's),
// by its own tensor names, which torch's load_state_dict takes.
absl::Status ExportLayoutValues(const std::string& dir,
                                const ParameterLayout& layout,
                                absl::Span<const float> values,
                                FileSystem* fs = PosixFileSystem());

// Reads a directory ExportModel (or scripts/ferry_torch.py) wrote. Every
// tensor of the def's layouts must be in the weights file with its exact
// shape, and nothing else: INVALID_ARGUMENT naming the first missing,
// unexpected or misshapen tensor, or a value that is not finite; NOT_FOUND
// when a file is missing; the parsers' errors for malformed files.
absl::StatusOr<ModelValues> ImportModel(const std::string& dir,
                                        FileSystem* fs = PosixFileSystem());

// OK when `imported` is the model `expected` describes: INVALID_ARGUMENT
// naming the first difference (input shape, class count, a layer's type or
// argument) otherwise. Normalization (scale, mean, std) may differ: the job's
// own applies.
absl::Status CheckSameModel(const ModelDef& expected, const ModelDef& imported);

// For other models' export formats (ps/dlrm_export.h):
// Moves `layout`'s tensors out of `tensors` (by name) into `values` (laid
// out by `layout`): INVALID_ARGUMENT, `path` first, naming the first
// tensor of the layout that is missing, misshapen or not finite. Tensors
// not of the layout stay in `tensors`.
absl::Status TakeLayoutTensors(
    const std::string& path, const ParameterLayout& layout,
    std::map<std::string, const SafetensorsTensor*>& tensors,
    std::vector<float>& values);
// The safetensors file at `path`: the file system's errors (NOT_FOUND when
// missing), DecodeSafetensors' as INVALID_ARGUMENT prefixed with `path`.
absl::StatusOr<SafetensorsFile> ReadWeightsFile(FileSystem* fs,
                                                const std::string& path);
// INVALID_ARGUMENT naming the first tensor left in `tensors` (not one of
// the model in `json_path`); OK when none is left.
absl::Status RefuseLeftoverTensors(
    const std::string& path, const std::string& json_path,
    const std::map<std::string, const SafetensorsTensor*>& tensors);
// "DIR/FILE" (no doubled slash).
std::string JoinPath(const std::string& dir, const char* file);

}  // namespace ferry

#endif  // FERRY_MODEL_MODEL_EXPORT_H_
