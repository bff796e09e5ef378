// A DLRM-style CTR model as data (Naumov et al. 2019, facebookresearch/dlrm
// with the "dot" interaction), its JSON form, the `dlrm` preset, and its dense
// parameters without a backend: layout and seeded initial values. The model
// itself runs in model/dlrm_model.h; the embedding tables are not parameters
// here (they are hash-keyed rows, model/embedding_bag.h).
//
// The network, for one sample:
//   bottom MLP: dense_features -> bottom[0] -> ... -> embedding_dim, a ReLU
//               after every layer (the last too);
//   interaction: the (num_fields + 1) vectors [bottom output, pooled embedding
//               of field 0, ..., of field F-1], their pairwise dot products
//               (strictly lower triangle, compute/ctr_math.h), concatenated
//               after the bottom output: embedding_dim + (F + 1) F / 2 values;
//   top MLP:    that -> top[0] -> ... -> 1, a ReLU between layers, none after
//               the last; its output is the logit of the click probability.
//
// JSON (a model file, docs/models.md):
//   {"format": "ferry.model.v1", "kind": "dlrm", "dense_features": 13,
//    "num_fields": 26, "embedding_dim": 16, "bottom": [512, 256, 64],
//    "top": [512, 256], "pooling": "sum", "interaction": "dot"}
// `bottom` and `top` are the hidden widths (the bottom's last layer is
// embedding_dim wide, the top's is 1). Every key but "format" and "kind" may
// be omitted (the `dlrm` preset's value applies).
//
// Parameter names are facebookresearch/dlrm's DLRM_Net state_dict names:
// bot_l and top_l are nn.Sequential(Linear, ReLU, Linear, ReLU, ...), so the
// Linear layers are at even indices: "bot_l.0.weight" [out, in],
// "bot_l.0.bias" [out], "bot_l.2.weight", ..., then "top_l.0.weight", ....
//
// Pure (ResolveDlrmSpec reads a file through a FileSystem). Values are plain
// structs: copyable, thread-compatible.
#ifndef FERRY_MODEL_DLRM_SPEC_H_
#define FERRY_MODEL_DLRM_SPEC_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/file_system.h"
#include "model/embedding_bag.h"
#include "model/parameter_layout.h"

namespace ferry {

inline constexpr char kDlrmKind[] = "dlrm";
// Upper bounds that keep every product of sizes far inside int / int64.
inline constexpr int kDlrmMaxFields = 1024;
inline constexpr int kDlrmMaxWidth = 1 << 16;

// The defaults are the `dlrm` preset: DLRM's Criteo-Kaggle configuration,
// embedding dim 16, bottom 13-512-256-64-16, top 367-512-256-1.
struct DlrmSpec {
  int dense_features = 13;
  int num_fields = 26;
  int embedding_dim = 16;
  std::vector<int> bottom = {512, 256, 64};  // hidden widths
  std::vector<int> top = {512, 256};         // hidden widths
  Pooling pooling = Pooling::kSum;
  bool operator==(const DlrmSpec&) const = default;
};

// INVALID_ARGUMENT, naming the field, for a size <= 0 or above the bounds
// above (num_fields <= kDlrmMaxFields, every other size <= kDlrmMaxWidth).
absl::Status ValidateDlrmSpec(const DlrmSpec& spec);

// Inputs of the top MLP: embedding_dim + (num_fields + 1) num_fields / 2.
int64_t DlrmInteractionFeatures(const DlrmSpec& spec);
// Layer widths, input first: {dense_features, bottom..., embedding_dim} and
// {DlrmInteractionFeatures, top..., 1}.
std::vector<int64_t> DlrmBottomSizes(const DlrmSpec& spec);
std::vector<int64_t> DlrmTopSizes(const DlrmSpec& spec);

// "dlrm".
std::vector<std::string> DlrmPresetNames();
// The spec of a preset name; NOT_FOUND for another name.
absl::StatusOr<DlrmSpec> DlrmPreset(std::string_view name);

// Parses the JSON above. INVALID_ARGUMENT for bad JSON, a "format" other than
// ferry.model.v1, a "kind" other than "dlrm", unknown keys, non-integer or
// invalid sizes, a pooling other than "sum" / "mean", an interaction other
// than "dot"; the message names the key.
absl::StatusOr<DlrmSpec> ParseDlrmJson(std::string_view text);
// Every key written explicitly; ParseDlrmJson(DlrmToJson(s)) == s.
std::string DlrmToJson(const DlrmSpec& spec);
// Whether `text` is a JSON object whose "kind" is "dlrm" (no other checks).
bool IsDlrmJson(std::string_view text);

// Resolves --model text for a DLRM: a preset name ("dlrm"), a JSON file, or a
// directory holding model.json. INVALID_ARGUMENT for a bad spec (naming the
// file), NOT_FOUND when the text is neither a preset nor a readable path.
absl::StatusOr<DlrmSpec> ResolveDlrmSpec(const std::string& text,
                                         FileSystem* fs = PosixFileSystem());

// Whether --model `text` names a DLRM: the preset "dlrm", or a JSON file (or
// a directory's model.json) whose "kind" is "dlrm". Reads at most two small
// files; false for anything unreadable (the dense resolver reports it).
bool IsDlrmModelText(const std::string& text,
                     FileSystem* fs = PosixFileSystem());

// The dense parameters (names above), bottom then top, each Linear's weight
// then bias. INVALID_ARGUMENT for an invalid spec; RESOURCE_EXHAUSTED beyond
// the layout limits (parameter_layout.h).
absl::StatusOr<ParameterLayout> DlrmParameterLayout(const DlrmSpec& spec);

// Deterministic initial values, as ModelInitialParameters (model_params.h)
// does for Linear layers: one mt19937_64 seeded with `seed` draws every weight
// in layout order (FillNormal, model/normal_init.h); He-normal (sqrt(2/fan_in))
// for the layers a ReLU follows (all but the top's last), Xavier-normal
// (sqrt(2/(fan_in + fan_out))) for the top's last; biases 0. Bit-identical on
// every platform. REQUIRES: `layout` == DlrmParameterLayout(spec).
std::vector<float> DlrmInitialParameters(const DlrmSpec& spec,
                                         const ParameterLayout& layout,
                                         uint64_t seed);

}  // namespace ferry

#endif  // FERRY_MODEL_DLRM_SPEC_H_
