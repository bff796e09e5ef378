#include "model/layer_kinds.h"

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "model/layer_families.h"

namespace ferry {

const LayerType LayerType::kLinear{&kLinearKind};
const LayerType LayerType::kConv2d{&kConv2dKind};
const LayerType LayerType::kMaxPool2d{&kMaxPool2dKind};
const LayerType LayerType::kAvgPool2d{&kAvgPool2dKind};
const LayerType LayerType::kReLU{&kReluKind};
const LayerType LayerType::kDropout{&kDropoutKind};
const LayerType LayerType::kFlatten{&kFlattenKind};
const LayerType LayerType::kBatchNorm2d{&kBatchNorm2dKind};
const LayerType LayerType::kBatchNorm1d{&kBatchNorm1dKind};

namespace {

// The registrations of the built-in kinds: one line per kind.
const LayerKind* const kBuiltinKinds[] = {
    &kLinearKind,    &kConv2dKind,      &kMaxPool2dKind,
    &kAvgPool2dKind, &kReluKind,        &kDropoutKind,
    &kFlattenKind,   &kBatchNorm2dKind, &kBatchNorm1dKind,
};

struct Registry {
  absl::Mutex mu;
  std::vector<const LayerKind*> added ABSL_GUARDED_BY(mu);
};

Registry& Added() {
  static Registry* registry = new Registry;
  return *registry;
}

std::vector<const LayerKind*> AllKinds(Registry& registry)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(registry.mu) {
  std::vector<const LayerKind*> kinds(std::begin(kBuiltinKinds),
                                      std::end(kBuiltinKinds));
  kinds.insert(kinds.end(), registry.added.begin(), registry.added.end());
  return kinds;
}

}  // namespace

std::vector<const LayerKind*> LayerKinds() {
  Registry& registry = Added();
  absl::MutexLock lock(&registry.mu);
  return AllKinds(registry);
}

absl::Status RegisterLayerKind(const LayerKind& kind) {
  const std::string name = kind.name == nullptr ? "" : kind.name;
  if (name.empty() || kind.output_shape == nullptr || kind.make == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer kind '", name, "' needs a name, output_shape and make"));
  }
  Registry& registry = Added();
  absl::MutexLock lock(&registry.mu);
  for (const LayerKind* k : AllKinds(registry)) {
    if (name == k->name) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer kind '", name, "' is already registered"));
    }
  }
  registry.added.push_back(&kind);
  return absl::OkStatus();
}

const char* LayerTypeName(LayerType type) { return type.kind().name; }

absl::StatusOr<LayerType> ParseLayerType(std::string_view name) {
  std::vector<std::string> known;
  for (const LayerKind* kind : LayerKinds()) {
    if (name == kind->name) return LayerType(kind);
    known.push_back(kind->name);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown layer type '", std::string(name),
                   "' (supported: ", absl::StrJoin(known, ", "), ")"));
}

absl::Status RefuseLayerShapes(const LayerDef& def, int index,
                               const SampleShape& in, const SampleShape& out,
                               const char* need) {
  return absl::InvalidArgumentError(
      absl::StrCat("layer ", index, " (", LayerTypeName(def.type), "): needs ",
                   need, ", got ", ShapeString(in), " -> ", ShapeString(out)));
}

}  // namespace ferry
