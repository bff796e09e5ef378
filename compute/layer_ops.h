// Layer op families: the backend kernels of one family of layers (convolution,
// pooling, dropout, BatchNorm) behind their own small interface instead of
// ComputeBackend's. A layer asks its backend for the family it uses:
//
//   ASSIGN_OR_RETURN(PoolOps* pool, backend->LayerOpsOf<PoolOps>());
//
// A family is an interface deriving from LayerOps with a static
// `LayerOpsFamily kFamily` (conv_ops.h, pool_ops.h, dropout_ops.h,
// batch_norm_ops.h). Each backend implements it in one file
// (compute/cpu_<family>_ops.cc, compute/cuda/<family>_ops.cc) and adds it to
// its LayerOpsSet in one line. Per-element math stays in the FERRY_HD
// functions of kernel_math.h, which both backends call.
//
// Header-only: ferry_cuda cannot link back to ferry_compute.
// Thread safety: an ops object is used like its backend, by one thread at a
// time; LayerOpsSet is immutable after the backend's construction.
#ifndef FERRY_COMPUTE_LAYER_OPS_H_
#define FERRY_COMPUTE_LAYER_OPS_H_

#include <memory>
#include <utility>
#include <vector>

namespace ferry {

// The identity of a family: its address (one per family, an inline static
// member of the family's interface).
struct LayerOpsFamily {
  const char* name;  // "conv", for messages
};

class LayerOps {
 public:
  virtual ~LayerOps() = default;
};

// The families one backend provides.
class LayerOpsSet {
 public:
  void Add(const LayerOpsFamily& family, std::unique_ptr<LayerOps> ops) {
    entries_.emplace_back(&family, std::move(ops));
  }
  // Null when the family was not added.
  LayerOps* Find(const LayerOpsFamily& family) const {
    for (const auto& [key, ops] : entries_) {
      if (key == &family) return ops.get();
    }
    return nullptr;
  }

 private:
  std::vector<std::pair<const LayerOpsFamily*, std::unique_ptr<LayerOps>>>
      entries_;
};

}  // namespace ferry

#endif  // FERRY_COMPUTE_LAYER_OPS_H_
