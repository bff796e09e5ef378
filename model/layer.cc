#include "model/layer.h"

#include "model/layer_kinds.h"

namespace ferry {

absl::StatusOr<std::unique_ptr<Layer>> MakeLayer(const LayerDef& def, int index,
                                                 const SampleShape& in,
                                                 const SampleShape& out) {
  return def.type.kind().make(def, index, in, out);
}

}  // namespace ferry
