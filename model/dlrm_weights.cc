#include "model/dlrm_weights.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "model/model_export.h"
#include "model/safetensors.h"

namespace ferry {

std::map<std::string, std::string> TablesMetadata(const DlrmTablesMeta& meta) {
  std::map<std::string, std::string> metadata = {
      {"ferry.embedding.seed", absl::StrCat(meta.seed)},
      {"ferry.embedding.init_scale",
       absl::StrFormat("%.9g", meta.init_scale)},  // exact as float
      {"ferry.embedding.initial_values",
       meta.zero_initial ? "zeros" : "uniform"},
      {"ferry.embedding.admit_count", absl::StrCat(meta.admit_count)},
  };
  if (!meta.row_optimizer.empty()) {
    metadata["ferry.embedding.row_optimizer"] = meta.row_optimizer;
  }
  return metadata;
}

absl::StatusOr<DlrmTablesMeta> ParseTablesMetadata(
    const std::map<std::string, std::string>& metadata) {
  DlrmTablesMeta meta;
  const auto get = [&](const char* key) -> absl::StatusOr<std::string> {
    auto it = metadata.find(key);
    if (it == metadata.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the weights file's metadata has no ", key));
    }
    return it->second;
  };
  const auto garbled = [](const char* key, const std::string& value) {
    return absl::InvalidArgumentError(
        absl::StrCat("the weights file's metadata ", key, " is '", value, "'"));
  };
  ASSIGN_OR_RETURN(const std::string seed, get("ferry.embedding.seed"));
  if (!absl::SimpleAtoi(seed, &meta.seed)) {
    return garbled("ferry.embedding.seed", seed);
  }
  ASSIGN_OR_RETURN(const std::string scale, get("ferry.embedding.init_scale"));
  if (!absl::SimpleAtof(scale, &meta.init_scale) || !(meta.init_scale > 0.0f)) {
    return garbled("ferry.embedding.init_scale", scale);
  }
  ASSIGN_OR_RETURN(const std::string initial,
                   get("ferry.embedding.initial_values"));
  if (initial != "zeros" && initial != "uniform") {
    return garbled("ferry.embedding.initial_values", initial);
  }
  meta.zero_initial = initial == "zeros";
  ASSIGN_OR_RETURN(const std::string admit, get("ferry.embedding.admit_count"));
  if (!absl::SimpleAtoi(admit, &meta.admit_count) || meta.admit_count < 1) {
    return garbled("ferry.embedding.admit_count", admit);
  }
  if (auto it = metadata.find("ferry.embedding.row_optimizer");
      it != metadata.end()) {
    if (it->second.empty()) {
      return garbled("ferry.embedding.row_optimizer", it->second);
    }
    meta.row_optimizer = it->second;
  }
  return meta;
}

absl::Status CheckTablesMetaFits(const DlrmTablesMeta& exported,
                                 const DlrmTablesMeta& job) {
  const auto differs = [](const char* flag, const auto& e, const auto& j) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the export's tables were made with ", flag, " ", e, ", this job's is ",
        j, ": ids the export never saw would read other values; pass ", flag,
        " ", e));
  };
  if (!exported.row_optimizer.empty() && !job.row_optimizer.empty() &&
      exported.row_optimizer != job.row_optimizer) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the export's rows keep the state of --embedding-optimizer ",
        exported.row_optimizer, ", this job's is ", job.row_optimizer,
        ": pass --embedding-optimizer ", exported.row_optimizer));
  }
  if (exported.seed != job.seed) {
    return differs("--seed", exported.seed, job.seed);
  }
  if (exported.admit_count != job.admit_count) {
    return differs("--embedding-admit-count", exported.admit_count,
                   job.admit_count);
  }
  if (exported.zero_initial != job.zero_initial ||
      exported.init_scale != job.init_scale) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the export's tables start rows at %s (scale %g), this job's at %s "
        "(scale %g): the same --embedding-optimizer and --embedding-ftrl-l1 "
        "are needed",
        exported.zero_initial ? "zeros" : "uniform values", exported.init_scale,
        job.zero_initial ? "zeros" : "uniform values", job.init_scale));
  }
  return absl::OkStatus();
}

absl::Status CheckDlrmParams(const DlrmSpec& spec,
                             absl::Span<const float> params) {
  ASSIGN_OR_RETURN(const ParameterLayout layout, DlrmParameterLayout(spec));
  if (static_cast<int64_t>(params.size()) != layout.total_elements()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DLRM export: ", params.size(), " dense parameters for a model of ",
        layout.total_elements()));
  }
  return absl::OkStatus();
}

absl::Status WriteDlrmWeights(const std::string& dir, const DlrmSpec& spec,
                              absl::Span<const float> params,
                              const DlrmTablesMeta& tables, FileSystem* fs) {
  RETURN_IF_ERROR(CheckDlrmParams(spec, params));
  ASSIGN_OR_RETURN(const ParameterLayout layout, DlrmParameterLayout(spec));
  SafetensorsFile weights;
  weights.metadata = TablesMetadata(tables);
  weights.metadata["format"] = "pt";
  weights.metadata["ferry.model"] = kDlrmKind;
  for (const TensorSlot& t : layout.tensors()) {
    SafetensorsTensor tensor;
    tensor.name = t.name;
    tensor.shape = t.shape;
    tensor.values.assign(params.begin() + t.offset,
                         params.begin() + t.offset + t.numel);
    weights.tensors.push_back(std::move(tensor));
  }
  ASSIGN_OR_RETURN(const std::string bytes, EncodeSafetensors(weights));
  RETURN_IF_ERROR(fs->CreateDirectories(dir));
  RETURN_IF_ERROR(
      fs->WriteFileAtomically(JoinPath(dir, kModelWeightsFile), bytes));
  return fs->WriteFileAtomically(JoinPath(dir, kModelJsonFile),
                                 DlrmToJson(spec) + "\n");
}

absl::StatusOr<std::vector<float>> ReadDlrmWeights(const std::string& dir,
                                                   const DlrmSpec& expected,
                                                   FileSystem* fs,
                                                   DlrmTablesMeta* tables) {
  const std::string json_path = JoinPath(dir, kModelJsonFile);
  const std::string weights_path = JoinPath(dir, kModelWeightsFile);
  ASSIGN_OR_RETURN(const std::string json, fs->ReadFile(json_path));
  absl::StatusOr<DlrmSpec> spec = ParseDlrmJson(json);
  if (!spec.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(json_path, ": ", spec.status().message()));
  }
  if (!(*spec == expected)) {
    return absl::InvalidArgumentError(absl::StrCat(
        json_path, " is another model than the job's: ", DlrmToJson(*spec),
        " vs ", DlrmToJson(expected)));
  }
  ASSIGN_OR_RETURN(const ParameterLayout layout, DlrmParameterLayout(*spec));
  ASSIGN_OR_RETURN(const SafetensorsFile weights,
                   ReadWeightsFile(fs, weights_path));
  std::map<std::string, const SafetensorsTensor*> tensors;
  for (const SafetensorsTensor& t : weights.tensors) tensors[t.name] = &t;
  std::vector<float> params;
  RETURN_IF_ERROR(TakeLayoutTensors(weights_path, layout, tensors, params));
  RETURN_IF_ERROR(RefuseLeftoverTensors(weights_path, json_path, tensors));
  if (tables != nullptr) {
    absl::StatusOr<DlrmTablesMeta> meta = ParseTablesMetadata(weights.metadata);
    if (!meta.ok()) {
      return absl::Status(
          meta.status().code(),
          absl::StrCat(weights_path, ": ", meta.status().message()));
    }
    *tables = *meta;
  }
  return params;
}

}  // namespace ferry
