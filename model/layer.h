// One layer of a SequentialModel on a ComputeBackend: its forward and backward
// passes over a batch of NCHW (or [N, F]) activations in backend memory.
//
// A layer owns only its workspaces (Reserve); parameters, state, activations
// and gradients are ranges of the model's buffers passed to each call.
// Thread safety: one thread at a time (workspaces).
#ifndef FERRY_MODEL_LAYER_H_
#define FERRY_MODEL_LAYER_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compute/compute_backend.h"
#include "model/model_def.h"
#include "model/shape_inference.h"

namespace ferry {

// What one pass needs besides tensors.
struct LayerContext {
  ComputeBackend* backend = nullptr;
  int batch = 0;
  bool training = false;  // dropout active, BatchNorm on batch statistics
  // Dropout masks: a pure function of (seed, step, first_sample + row,
  // layer index, element); see DropoutKey in compute/kernel_math.h.
  uint64_t seed = 0;
  int64_t step = 0;
  int64_t first_sample = 0;
};

class Layer {
 public:
  virtual ~Layer() = default;

  // Allocates the workspaces for batches of up to `batch` samples. Called
  // when the model's batch capacity grows, never per step.
  virtual absl::Status Reserve(ComputeBackend* backend, int batch) {
    (void)backend;
    (void)batch;
    return absl::OkStatus();
  }

  // Floats of backend memory Reserve(batch) allocates at most, on any
  // backend (the memory estimates count them).
  virtual int64_t WorkspaceElements(int batch) const {
    (void)batch;
    return 0;
  }

  // y = layer(x). `params` and `state` point at this layer's first tensor in
  // the model's parameter and state buffers (null when it has none). Training
  // BatchNorm updates `state` (running statistics).
  virtual absl::Status Forward(const LayerContext& ctx, const float* params,
                               float* state, const float* x, float* y) = 0;

  // Given dy = d loss / d y, writes (overwrites) this layer's parameter
  // gradients at `dparams` and, when `dx` is non-null, d loss / d x. `x` and
  // `y` are the input and output of the last Forward of this batch, which
  // must have been a training pass.
  virtual absl::Status Backward(const LayerContext& ctx, const float* params,
                                const float* x, const float* y, const float* dy,
                                float* dx, float* dparams) = 0;

  // True when the output is the input itself (Flatten): the model passes the
  // same buffer on and skips Forward and Backward.
  virtual bool IsView() const { return false; }
};

// The layer for `def` at position `index` of its model, with the per-sample
// input and output shapes from InferShapes. INVALID_ARGUMENT when the shapes
// do not suit the layer.
absl::StatusOr<std::unique_ptr<Layer>> MakeLayer(const LayerDef& def, int index,
                                                 const SampleShape& in,
                                                 const SampleShape& out);

}  // namespace ferry

#endif  // FERRY_MODEL_LAYER_H_
