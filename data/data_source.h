// Selects the train and test datasets of a job by name.
#ifndef FERRY_DATA_DATA_SOURCE_H_
#define FERRY_DATA_DATA_SOURCE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "data/dataset.h"
#include "model/model_def.h"

namespace ferry {

struct TrainTestData {
  Dataset train;
  Dataset test;
};

// `name` is "fashion-mnist" or "mnist" (IDX files in `data_dir`, empty for
// the Fashion-MNIST default) or "synthetic:N" (N training samples and N/6
// test samples of the same classes, shaped for the model, deterministic by
// `seed`). "criteo:DIR" (CTR data for sparse models, data/ctr_dataset.h:
// ParseCtrDatasetSpec, LoadCtrTrainTest) is refused here with
// INVALID_ARGUMENT: the dense trainers do not take it.
// INVALID_ARGUMENT for an unknown name or a dataset whose feature count or
// class count does not fit the model; NOT_FOUND / DATA_LOSS from the reader.
// IDX images are normalised by `normalization`.
absl::StatusOr<TrainTestData> LoadTrainTest(
    const std::string& name, const std::string& data_dir, int input_dim,
    int num_classes, uint64_t seed,
    const PixelNormalization& normalization = {});
// The same for `model`: its input's element count, class count and pixel
// normalization (its "input" scale, mean and std).
absl::StatusOr<TrainTestData> LoadTrainTest(const std::string& name,
                                            const std::string& data_dir,
                                            const ModelDef& model,
                                            uint64_t seed);

// Checks, before any process starts, that `model` fits dataset `name` (the
// coordinator's own checks, with its messages): INVALID_ARGUMENT naming what
// does not fit; NOT_FOUND / DATA_LOSS when the dataset cannot be read. Reads
// the dataset once.
absl::Status CheckModelFitsDataset(const ModelDef& model,
                                   const std::string& name,
                                   const std::string& data_dir);

// A job whose model and data are its PyTorch workers' (--model external)
// names only its epoch's size: "external:N" -> N (>= 1). INVALID_ARGUMENT
// otherwise, saying what --model external takes.
absl::StatusOr<int64_t> ParseExternalDatasetSpec(const std::string& name);

}  // namespace ferry

#endif  // FERRY_DATA_DATA_SOURCE_H_
