// A feed-forward stack of layers built from a ModelDef, with a softmax
// cross-entropy head, computed on a ComputeBackend. Same public API as Mlp
// (model/mlp.h) plus what Dropout and BatchNorm need:
// - a StepContext per training pass (dropout masks are a pure function of
//   (seed, step, sample position in the global batch, layer, element), so any
//   split of a global batch across workers draws the same masks);
// - a state buffer (BatchNorm running statistics) that training passes update
//   in place and evaluation reads. State is not a gradient: the exchange
//   decides how replicas keep it consistent.
//
// Parameters live in one flat buffer laid out by layout() (model_params.h:
// PyTorch state_dict names, layer order); each layer's tensors are one
// contiguous range, reported through the gradient-ready callback in reverse
// layer order as soon as the layer's backward pass has queued them.
//
// Activations and workspaces are allocated when the batch capacity grows
// (first call, or a larger batch than ever before), never per step.
//
// Thread safety: one thread at a time (it owns activations and workspaces).
#ifndef FERRY_MODEL_SEQUENTIAL_MODEL_H_
#define FERRY_MODEL_SEQUENTIAL_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "compute/compute_backend.h"
#include "model/layer.h"
#include "model/layer_stack.h"
#include "model/model_def.h"
#include "model/parameter_layout.h"
#include "model/shape_inference.h"

namespace ferry {

// Which dropout masks a training pass draws.
struct StepContext {
  uint64_t seed = 0;         // the job's seed
  int64_t step = 0;          // the mask's step key (ferry's trainers pass
                             // the epoch: EpochPositionContext)
  int64_t first_sample = 0;  // position of this batch's row 0 (trainers:
                             // in the epoch's order)
};

// The context ferry's trainers pass: `step` is the epoch and `first_sample`
// the epoch-order position of row 0 (a batch's rows are consecutive
// positions). A sync step's global batch is consecutive positions split
// across the ranks in rank order, so a worker's rows get the masks the same
// rows get in a single process with the same global batch, however the batch
// is split, and a sample keeps its masks when an aborted step is re-formed.
inline StepContext EpochPositionContext(uint64_t seed, int64_t epoch,
                                        int64_t first_position) {
  return StepContext{seed, epoch, first_position};
}

class SequentialModel {
 public:
  // Called when the gradient of a flat range [offset, offset + length) is
  // final, in reverse layer order (only for layers with parameters). The
  // gradient is queued on the backend's stream; a consumer that reads it on
  // the host must synchronize first.
  using GradReadyFn = std::function<void(int64_t offset, int64_t length)>;

  // Validates `def` and builds its layers. The state buffer starts at
  // InitialState(). `backend` must outlive the model. INVALID_ARGUMENT for a
  // bad def; RESOURCE_EXHAUSTED when buffers cannot be allocated.
  static absl::StatusOr<SequentialModel> Create(const ModelDef& def,
                                                ComputeBackend* backend);

  SequentialModel(SequentialModel&&) = default;
  SequentialModel& operator=(SequentialModel&&) = default;

  const ModelDef& def() const { return def_; }
  const ParameterLayout& layout() const { return layout_; }
  const ParameterLayout& state_layout() const { return state_layout_; }
  // Per-sample output shape of every layer.
  const std::vector<SampleShape>& shapes() const { return shapes_; }
  // Elements per input sample (e.g. 784 for [1, 28, 28]).
  int input_dim() const { return input_dim_; }
  int num_classes() const { return static_cast<int>(def_.classes); }

  // ModelInitialParameters / ModelInitialState (model_params.h).
  std::vector<float> InitialParameters(uint64_t seed) const;
  std::vector<float> InitialState() const;

  // The state buffer in backend memory (state_layout().total_elements()
  // floats; null when the model has no state). Training passes update it.
  float* state() { return state_.data(); }
  const float* state() const { return state_.data(); }
  // Copies host values in / out. INVALID_ARGUMENT on a size mismatch.
  absl::Status SetState(const std::vector<float>& host);
  absl::StatusOr<std::vector<float>> GetState();

  // Training pass (dropout on, BatchNorm on batch statistics, running stats
  // updated) over `batch` rows. `params`, `inputs` [batch, input_dim()] and
  // `grads` are backend buffers; labels are on the host. Gradients are
  // grad_scale * d(sum of losses)/d(params), written over `grads`.
  // INVALID_ARGUMENT for batch <= 0 or a label out of range (BatchNorm:
  // fewer than 2 values per channel).
  absl::StatusOr<LossStats> ForwardBackward(const float* params,
                                            const float* inputs,
                                            const int32_t* labels, int batch,
                                            float grad_scale, float* grads,
                                            const GradReadyFn& on_ready = {},
                                            const StepContext& context = {});

  // Wall time per layer of training passes, for benchmarks
  // (bench/model_step.cc). While set (not owned; null to stop), every
  // layer's Forward and Backward in ForwardBackward is bracketed by backend
  // synchronizations and its seconds added here, indexed by layer (the
  // vectors grow to the layer count; the loss is not counted). The
  // synchronizations cost time: leave it unset in training.
  struct LayerTimes {
    std::vector<double> forward_seconds;
    std::vector<double> backward_seconds;
  };
  void set_layer_times(LayerTimes* times) { layer_times_ = times; }
  // Whether ForwardBackward computes layer i's input gradient (no layer
  // before it has parameters: it does not).
  bool ComputesInputGradient(int i) const { return i > first_param_layer_; }

  // Evaluation pass (dropout off, BatchNorm on running statistics); loss sum
  // and correct count over the batch. Does not change the state.
  absl::StatusOr<LossStats> Evaluate(const float* params, const float* inputs,
                                     const int32_t* labels, int batch);

 private:
  SequentialModel(ComputeBackend* backend) : backend_(backend) {}

  absl::Status EnsureWorkspace(int batch);
  absl::Status Forward(const LayerContext& ctx, const float* params,
                       const float* inputs);

  ModelDef def_;
  ParameterLayout layout_;
  ParameterLayout state_layout_;
  std::vector<SampleShape> shapes_;
  int input_dim_ = 0;
  ComputeBackend* backend_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<LayerSlot> slots_;
  DeviceBuffer state_;
  int first_param_layer_ = 0;  // no input gradient is needed before it
  LayerTimes* layer_times_ = nullptr;
  int workspace_batch_ = 0;
  std::vector<DeviceBuffer> activations_;  // [i]: layer i's output (not views)
  std::vector<const float*> outputs_;      // [i]: where layer i's output is
  DeviceBuffer delta_a_, delta_b_;  // backward ping-pong, [batch, widest]
};

}  // namespace ferry

#endif  // FERRY_MODEL_SEQUENTIAL_MODEL_H_
