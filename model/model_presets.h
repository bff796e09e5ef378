// Where a model spec comes from: the presets, today's MLP strings, and
// `--model` text that names one of those or a ferry.model.v1 JSON file.
//
// Pure except ResolveModelSpec, which reads a file through a FileSystem.
#ifndef FERRY_MODEL_MODEL_PRESETS_H_
#define FERRY_MODEL_MODEL_PRESETS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/file_system.h"
#include "model/model_def.h"

namespace ferry {

// The input normalization of the presets: Fashion-MNIST's, as the data layer
// applies it today ((pixel / 255 - 0.2860) / 0.3530, data/dataset.h).
inline constexpr double kPresetInputMean = 0.2860;
inline constexpr double kPresetInputStd = 0.3530;

// Linear/ReLU layers for sizes like {784, 256, 128, 10}: input [sizes[0]],
// Linear(sizes[l], sizes[l+1]) with a ReLU after every layer but the last.
// REQUIRES: at least two sizes, all positive (ParseMlpSpec checks).
ModelDef MlpModelDef(const std::vector<int>& sizes);

// The PyTorch MNIST example network on [1, 28, 28], 10 classes:
// Conv2d(1, 32, 3, 1) ReLU Conv2d(32, 64, 3, 1) ReLU MaxPool2d(2)
// Dropout(0.25) Flatten Linear(9216, 128) ReLU Dropout(0.5) Linear(128, 10).
ModelDef ConvNetModelDef();

// "mlp", "convnet".
std::vector<std::string> ModelPresetNames();

// Resolves --model text: a preset name ("mlp" = 784-256-128-10), an MLP string
// ("784-256-128-10"), a ferry.model.v1 JSON file, or a directory holding
// model.json. The result is validated (ValidateModel). INVALID_ARGUMENT for a
// bad spec or JSON (naming the file), NOT_FOUND when the path is not there.
absl::StatusOr<ModelDef> ResolveModelSpec(const std::string& text,
                                          FileSystem* fs = PosixFileSystem());

}  // namespace ferry

#endif  // FERRY_MODEL_MODEL_PRESETS_H_
