// One pipeline stage of a model: layers [first, end) of a ModelDef computed on
// a backend over micro-batches, each in its own activation slot, so that a
// schedule (pipeline/pipeline_schedule.h) can hold several micro-batches'
// activations between their forward and backward passes.
//
// Per micro-batch, in a slot:
//   SetInput(slot, ...)      the stage's input (first stage: the model's input
//                            rows; later stages: the previous stage's output);
//   Forward(slot, ...)       runs the layers, keeping every activation;
//   last stage: Loss(slot, ...)  softmax cross-entropy over the output,
//                            leaving d loss / d output in the slot;
//   others: SetOutputGradient(slot, ...)  the next stage's input gradient;
//   Backward(slot, ...)      parameter gradients into (or added to) `grads`,
//                            and the input gradient for the previous stage
//                            (InputGradient(slot); none on the first stage).
// A slot's buffers (and its own instances of the layers) are allocated the
// first time it is used (for the largest batch seen: a larger batch
// reallocates that slot), never per step.
//
// Parameters, gradients and state are the stage's own: `params` and `grads`
// point at param_count() floats laid out as the model's flat parameters
// [param_offset(), param_offset() + param_count()); the stage owns its
// layers' state (BatchNorm running statistics, updated per micro-batch).
// Dropout masks are the whole model's (layer indices are the model's, rows
// are keyed by StepContext.first_sample), so a micro-batch of rows
// [r, r + b) of a batch draws the masks those rows draw in SequentialModel.
//
// Thread safety: one thread at a time.
#ifndef FERRY_MODEL_PIPELINE_STAGE_H_
#define FERRY_MODEL_PIPELINE_STAGE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "compute/compute_backend.h"
#include "model/layer_stack.h"
#include "model/model_def.h"
#include "model/pipeline_split.h"
#include "model/sequential_model.h"

namespace ferry {

class PipelineStage {
 public:
  // INVALID_ARGUMENT for an invalid def or a range that is not a non-empty
  // part of it. `backend` must outlive the stage.
  static absl::StatusOr<PipelineStage> Create(const ModelDef& def,
                                              StageRange range,
                                              ComputeBackend* backend);

  PipelineStage(PipelineStage&&) = default;
  PipelineStage& operator=(PipelineStage&&) = default;

  StageRange range() const { return range_; }
  bool is_first() const { return range_.first_layer == 0; }
  bool is_last() const { return is_last_; }
  // Elements per sample of the stage's input and output.
  int64_t input_elements() const { return input_elements_; }
  int64_t output_elements() const { return output_elements_; }
  // The stage's parameters and state within the model's layouts.
  int64_t param_offset() const { return stack_.param_offset; }
  int64_t param_count() const { return stack_.param_count; }
  int64_t state_offset() const { return stack_.state_offset; }
  int64_t state_count() const { return stack_.state_count; }

  // The stage's state in backend memory (state_count() floats).
  float* state() { return state_.data(); }
  // Copies host state in / out; INVALID_ARGUMENT on a size mismatch.
  absl::Status SetState(absl::Span<const float> host);
  absl::StatusOr<std::vector<float>> GetState();

  // Copies `host` ([batch, input_elements()]) into slot `slot`'s input.
  // INVALID_ARGUMENT for batch <= 0, a negative slot or a size mismatch.
  absl::Status SetInput(int slot, int batch, absl::Span<const float> host);
  // Training forward pass of the slot's input. Its output stays in the slot
  // (CopyOutput) until the slot is reused.
  absl::Status Forward(int slot, const float* params,
                       const StepContext& context);
  // Evaluation forward pass (dropout off, BatchNorm on running statistics;
  // the state is not changed). No Backward may follow it.
  absl::Status ForwardEval(int slot, const float* params);
  // Copies the slot's output ([batch, output_elements()]) to the host.
  absl::Status CopyOutput(int slot, std::vector<float>& host);
  // Last stage: the loss of the slot's output against `labels` (batch of
  // them), its gradient (grad_scale x d sum of losses / d output) kept for
  // Backward. FAILED_PRECONDITION on another stage.
  absl::StatusOr<LossStats> Loss(int slot, const int32_t* labels,
                                 float grad_scale);
  // Last stage, after ForwardEval: loss sum and correct count, no gradient.
  absl::StatusOr<LossStats> EvalLoss(int slot, const int32_t* labels);
  // Other stages: the gradient of the slot's output, from the next stage.
  // INVALID_ARGUMENT for a size other than batch x output_elements().
  absl::Status SetOutputGradient(int slot, absl::Span<const float> host);
  // Backward pass of the slot: parameter gradients written over `grads`
  // (accumulate false) or added to them (true), and, except on the first
  // stage, the input gradient kept for CopyInputGradient.
  absl::Status Backward(int slot, const float* params, float* grads,
                        bool accumulate);
  absl::Status CopyInputGradient(int slot, std::vector<float>& host);

  // Bytes of activation buffers the stage holds now (every slot allocated).
  int64_t activation_bytes() const;

 private:
  struct Slot {
    int capacity = 0;  // batch the buffers were allocated for
    int batch = 0;
    StepContext context;
    // The slot's own layers: a layer may keep what its backward pass needs
    // from its forward pass (BatchNorm's batch statistics).
    std::vector<std::unique_ptr<Layer>> layers;
    DeviceBuffer input;
    std::vector<DeviceBuffer> activations;  // [i]: layer i's output
    std::vector<const float*> outputs;      // [i]: where layer i's output is
    DeviceBuffer output_grad;               // [batch, output_elements]
    DeviceBuffer input_grad;                // [batch, input_elements]
  };

  explicit PipelineStage(ComputeBackend* backend) : backend_(backend) {}
  absl::StatusOr<Slot*> UsedSlot(int slot);
  absl::Status EnsureSlot(int slot, int batch);
  LayerContext Context(const Slot& s, bool training) const;
  absl::Status RunForward(Slot& s, const float* params, bool training);

  ComputeBackend* backend_;
  StageRange range_;
  bool is_last_ = false;
  int64_t classes_ = 0;
  int64_t input_elements_ = 0;
  int64_t output_elements_ = 0;
  int64_t widest_ = 0;  // elements per sample of the widest activation
  ModelDef def_;
  std::vector<SampleShape> shapes_;  // the model's layers' output shapes
  ParameterLayout layout_;
  ParameterLayout state_layout_;
  LayerStack stack_;  // offsets; its layers go to the first slot made
  DeviceBuffer state_;
  std::vector<Slot> slots_;
  int delta_capacity_ = 0;
  DeviceBuffer delta_a_, delta_b_;  // backward ping-pong, [batch, widest]
  DeviceBuffer scratch_grads_;  // accumulating backward: the largest layer's
};

}  // namespace ferry

#endif  // FERRY_MODEL_PIPELINE_STAGE_H_
