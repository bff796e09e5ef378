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

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/file_system.h"
#include "model/model_def.h"

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

}  // namespace ferry

#endif  // FERRY_MODEL_MODEL_EXPORT_H_
