#include "worker/pipeline_trainer.h"

#include <algorithm>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/status_macros.h"
#include "compute/cpu_backend.h"
#include "compute/optimizer.h"
#include "data/batch_stager.h"
#include "data/ctr_dataset.h"
#include "data/data_source.h"
#include "data/sampler.h"
#include "model/model_export.h"
#include "model/model_params.h"
#include "model/model_presets.h"
#include "model/pipeline_stage.h"
#include "pipeline/in_memory_stage_link.h"
#include "pipeline/stage_memory.h"
#include "pipeline/stage_runner.h"

namespace ferry {
namespace {

// One stage's everything, touched only by its thread while a task runs and
// by the trainer between tasks.
struct StageState {
  std::unique_ptr<ComputeBackend> backend;
  std::optional<PipelineStage> stage;
  DeviceBuffer params, grads;
  std::optional<Optimizer> optimizer;
  // Training figures, summed over steps.
  double busy_seconds = 0.0;
  double wait_seconds = 0.0;
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  int64_t peak_activation_bytes = 0;
  // The last task's.
  StageStepResult step;
  LossStats eval;
};

// What every stage thread runs next.
struct StageTask {
  enum Kind { kTrain, kEval, kStop };
  Kind kind = kTrain;
  int64_t key = 0;  // training: the step; evaluation: a negative key
  StageStepInput in;
};

// P threads that each run one stage's part of every task the trainer
// posts, and report back. RunAll blocks until every stage is done.
class StageCrew {
 public:
  using Work = std::function<absl::Status(int stage, const StageTask& task)>;

  StageCrew(int stages, Work work) : work_(std::move(work)) {
    done_.assign(stages, 0);
    status_.assign(stages, absl::OkStatus());
    for (int s = 0; s < stages; ++s) {
      threads_.emplace_back([this, s] { Loop(s); });
    }
  }
  ~StageCrew() {
    StageTask stop;
    stop.kind = StageTask::kStop;
    Post(stop);
    for (std::thread& t : threads_) t.join();
  }

  // Runs `task` on every stage; their statuses by stage.
  std::vector<absl::Status> RunAll(const StageTask& task) {
    const int64_t id = Post(task);
    absl::MutexLock lock(&mu_);
    const auto all_done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return std::all_of(done_.begin(), done_.end(),
                         [&](int64_t d) { return d >= id; });
    };
    mu_.Await(absl::Condition(&all_done));
    return status_;
  }

 private:
  int64_t Post(const StageTask& task) {
    absl::MutexLock lock(&mu_);
    task_ = task;
    return ++task_id_;
  }
  void Loop(int s) {
    int64_t seen = 0;
    while (true) {
      StageTask task;
      {
        absl::MutexLock lock(&mu_);
        const auto posted = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return task_id_ > seen;
        };
        mu_.Await(absl::Condition(&posted));
        seen = task_id_;
        task = task_;
      }
      if (task.kind == StageTask::kStop) return;
      absl::Status status = work_(s, task);
      absl::MutexLock lock(&mu_);
      status_[s] = std::move(status);
      done_[s] = seen;
    }
  }

  Work work_;
  absl::Mutex mu_;
  StageTask task_ ABSL_GUARDED_BY(mu_);
  int64_t task_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int64_t> done_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Status> status_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

// The root cause among the stages' statuses: a stage's own failure rather
// than the ABORTED its neighbours got when the link was aborted for it.
absl::Status FirstFailure(const std::vector<absl::Status>& statuses,
                          const absl::Status& abort_reason) {
  for (const absl::Status& s : statuses) {
    if (!s.ok() && s != abort_reason) return s;
  }
  for (const absl::Status& s : statuses) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TrainSummary> RunPipelineStandalone(
    const TrainOptions& options, const PipelineOptions& pipeline,
    int64_t memory_budget_bytes, ProgressPrinter& progress) {
  const absl::Time start = absl::Now();
  if (options.batch <= 0 || options.epochs <= 0) {
    return absl::InvalidArgumentError("batch and epochs must be > 0");
  }
  if (pipeline.micro_batches < 1 || pipeline.micro_batches > options.batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("--micro-batches must be in [1, --batch = ", options.batch,
                     "], got ", pipeline.micro_batches));
  }
  if (IsCtrDatasetSpec(options.dataset)) {
    return absl::InvalidArgumentError(
        "pipeline parallelism takes sequential models, not a CTR dataset");
  }
  ASSIGN_OR_RETURN(ModelDef def, ResolveModelSpec(options.model));
  ASSIGN_OR_RETURN(
      std::vector<StageRange> split,
      SplitModel(def, pipeline.stages, pipeline.split, pipeline.balance));
  const int p = static_cast<int>(split.size());
  RETURN_IF_ERROR(CheckPipelineMemory(
      def, split, options.batch, pipeline.micro_batches, pipeline.schedule,
      OptimizerStateBuffers(options.optimizer.kind), memory_budget_bytes));
  ASSIGN_OR_RETURN(ParameterLayout layout, ModelParameterLayout(def));
  ASSIGN_OR_RETURN(ParameterLayout state_layout, ModelStateLayout(def));
  ModelValues initial{def, ModelInitialParameters(def, layout, options.seed),
                      ModelInitialState(def, state_layout)};
  if (!options.init_from.empty()) {
    ASSIGN_OR_RETURN(ModelValues imported, ImportModel(options.init_from));
    if (absl::Status same = CheckSameModel(def, imported.def); !same.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--init-from ", options.init_from, ": ", same.message()));
    }
    initial.params = std::move(imported.params);
    if (!imported.state.empty()) initial.state = std::move(imported.state);
  }
  ASSIGN_OR_RETURN(
      TrainTestData data,
      LoadTrainTest(options.dataset, options.data_dir, def, options.seed));
  const int64_t n = data.train.num_samples;
  const int64_t steps_per_epoch = (n + options.batch - 1) / options.batch;
  OptimizerConfig opt_config = options.optimizer;
  ResolveScheduleLength(opt_config, steps_per_epoch, options.epochs);

  // Batches are staged on the host; stage 0 copies its inputs in.
  std::unique_ptr<ComputeBackend> host = MakeCpuBackend(1);
  const int input_dim = static_cast<int>(ShapeElements(def.input.shape));
  ASSIGN_OR_RETURN(BatchStager stager,
                   BatchStager::Create(host.get(), input_dim, options.batch));

  std::vector<StageState> states(p);
  InMemoryStageHub hub(p);
  absl::Mutex abort_mu;
  absl::Status abort_reason;
  const auto work = [&](int s, const StageTask& task) -> absl::Status {
    StageState& st = states[s];
    if (task.kind == StageTask::kEval) {
      absl::StatusOr<LossStats> loss = RunStageEval(
          *st.stage, hub.Link(s), st.params.data(), task.key, task.in);
      if (loss.ok()) st.eval = *loss;
      return loss.status();
    }
    absl::StatusOr<StageStepResult> r =
        RunStageStep(*st.stage, s, p, hub.Link(s), st.params.data(),
                     st.grads.data(), task.in, *RealClock());
    if (!r.ok()) {
      absl::MutexLock lock(&abort_mu);
      if (abort_reason.ok()) {
        abort_reason = absl::AbortedError(absl::StrCat(
            "pipeline stage ", s, " failed: ", r.status().message()));
        hub.Abort(abort_reason);
      }
      return r.status();
    }
    st.step = *r;
    st.busy_seconds += r->busy_seconds;
    st.wait_seconds += r->wait_seconds;
    st.bytes_sent += r->bytes_sent;
    st.bytes_received += r->bytes_received;
    st.peak_activation_bytes =
        std::max(st.peak_activation_bytes, r->activation_bytes);
    return st.optimizer->Apply(st.grads.data(), st.params.data());
  };
  std::string device_names;
  {
    // Each stage's backend and buffers are made on its own thread (a CUDA
    // backend belongs to the thread's device).
    StageCrew setup(p, [&](int s, const StageTask&) -> absl::Status {
      StageState& st = states[s];
      ASSIGN_OR_RETURN(st.backend,
                       MakeBackend(options.device, options.threads, s));
      ASSIGN_OR_RETURN(PipelineStage stage,
                       PipelineStage::Create(def, split[s], st.backend.get()));
      st.stage.emplace(std::move(stage));
      const size_t count = st.stage->param_count();
      ASSIGN_OR_RETURN(st.params, st.backend->Allocate(count));
      ASSIGN_OR_RETURN(st.grads, st.backend->Allocate(count));
      RETURN_IF_ERROR(st.backend->CopyToDevice(
          initial.params.data() + st.stage->param_offset(), count,
          st.params.data()));
      RETURN_IF_ERROR(st.stage->SetState(
          absl::MakeConstSpan(initial.state)
              .subspan(st.stage->state_offset(), st.stage->state_count())));
      ASSIGN_OR_RETURN(Optimizer optimizer,
                       Optimizer::Create(opt_config, st.backend.get(), count));
      st.optimizer.emplace(std::move(optimizer));
      return absl::OkStatus();
    });
    RETURN_IF_ERROR(FirstFailure(setup.RunAll({}), absl::OkStatus()));
  }
  for (int s = 0; s < p; ++s) {
    absl::StrAppend(&device_names, s > 0 ? ", " : "",
                    states[s].backend->Name());
  }
  StageCrew crew(p, work);

  TrainSummary summary;
  summary.device = device_names;
  progress.Line(absl::StrFormat(
      "pipeline: model %s (%d parameters) in %d stages %s (by %s), %d "
      "micro-batches, %s; %s, %d train / %d test samples, batch %d, %s lr %g; "
      "devices %s",
      options.model, layout.total_elements(), p, StageRangesString(split),
      pipeline.split.empty() ? StageBalanceName(pipeline.balance)
                             : "--pipeline-split",
      pipeline.micro_batches, PipelineScheduleName(pipeline.schedule),
      options.dataset, n, data.test.num_samples, options.batch,
      OptimizerKindName(opt_config.kind), opt_config.lr, device_names));

  int64_t eval_key = 0;
  const auto evaluate = [&]() -> absl::StatusOr<std::pair<double, double>> {
    double loss = 0.0;
    int64_t correct = 0;
    std::vector<int64_t> indices;
    for (int64_t begin = 0; begin < data.test.num_samples;
         begin += options.batch) {
      const int b = static_cast<int>(
          std::min<int64_t>(options.batch, data.test.num_samples - begin));
      indices.resize(b);
      for (int i = 0; i < b; ++i) indices[i] = begin + i;
      RETURN_IF_ERROR(stager.Stage(data.test, indices));
      StageTask task;
      task.kind = StageTask::kEval;
      task.key = -1 - eval_key++;
      task.in.batch = b;
      task.in.inputs = absl::MakeConstSpan(stager.inputs(),
                                           static_cast<size_t>(b) * input_dim);
      task.in.labels = absl::MakeConstSpan(stager.labels(), b);
      RETURN_IF_ERROR(FirstFailure(crew.RunAll(task), abort_reason));
      loss += states[p - 1].eval.loss_sum;
      correct += states[p - 1].eval.correct;
    }
    const double count = std::max<int64_t>(1, data.test.num_samples);
    return std::make_pair(static_cast<double>(correct) / count, loss / count);
  };
  if (options.evaluate_only) {
    ASSIGN_OR_RETURN(auto eval, evaluate());
    summary.test_accuracy = eval.first;
    summary.final_loss = eval.second;
    summary.final_parameters = initial.params;
    summary.wall_seconds = absl::ToDoubleSeconds(absl::Now() - start);
    return summary;
  }
  double train_seconds = 0;
  double step_wall = 0;  // per step, the slowest stage's time, summed
  int64_t trained_samples = 0;
  for (int epoch = 0; epoch < options.epochs; ++epoch) {
    const absl::Time epoch_start = absl::Now();
    const std::vector<int64_t> order =
        EpochPermutation(n, options.seed, epoch, options.shuffle);
    double loss_sum = 0;
    int64_t correct = 0, seen = 0;
    for (int64_t begin = 0; begin < n; begin += options.batch) {
      if (options.max_steps > 0 && summary.steps >= options.max_steps) break;
      const int b =
          static_cast<int>(std::min<int64_t>(options.batch, n - begin));
      RETURN_IF_ERROR(stager.Stage(
          data.train, absl::MakeConstSpan(order).subspan(begin, b)));
      StageTask task;
      task.key = summary.steps;
      task.in.step = summary.steps;
      task.in.context = EpochPositionContext(options.seed, epoch, begin);
      task.in.batch = b;
      task.in.micro_batches = std::min(pipeline.micro_batches, b);
      task.in.schedule = pipeline.schedule;
      task.in.inputs = absl::MakeConstSpan(stager.inputs(),
                                           static_cast<size_t>(b) * input_dim);
      task.in.labels = absl::MakeConstSpan(stager.labels(), b);
      task.in.grad_scale = 1.0f / b;
      RETURN_IF_ERROR(FirstFailure(crew.RunAll(task), abort_reason));
      double slowest = 0.0;
      for (const StageState& st : states) {
        slowest = std::max(slowest, st.step.step_seconds);
      }
      step_wall += slowest;
      loss_sum += states[p - 1].step.loss.loss_sum;
      correct += states[p - 1].step.loss.correct;
      seen += b;
      ++summary.steps;
      if (summary.steps % 50 == 0) {
        progress.Update(static_cast<double>(begin + b) / n,
                        absl::StrFormat("epoch %d/%d loss %.4f", epoch + 1,
                                        options.epochs, loss_sum / seen));
      }
    }
    const double epoch_train_seconds =
        absl::ToDoubleSeconds(absl::Now() - epoch_start);
    train_seconds += epoch_train_seconds;
    trained_samples += seen;
    ASSIGN_OR_RETURN(auto eval, evaluate());
    RecordEpoch(summary, epoch, options.epochs, loss_sum, correct, seen,
                eval.first, epoch_train_seconds,
                absl::ToDoubleSeconds(absl::Now() - epoch_start), progress);
    if (options.max_steps > 0 && summary.steps >= options.max_steps) break;
  }
  CloseSummary(summary, trained_samples, train_seconds);

  // The trained values, stage by stage, on the host.
  ModelValues trained{def, std::vector<float>(layout.total_elements()),
                      initial.state};
  nlohmann::json stages_json = nlohmann::json::array();
  {
    StageCrew collect(p, [&](int s, const StageTask&) -> absl::Status {
      StageState& st = states[s];
      RETURN_IF_ERROR(st.backend->CopyToHost(
          st.params.data(), st.stage->param_count(),
          trained.params.data() + st.stage->param_offset()));
      ASSIGN_OR_RETURN(std::vector<float> state, st.stage->GetState());
      std::copy(state.begin(), state.end(),
                trained.state.begin() + st.stage->state_offset());
      return absl::OkStatus();
    });
    RETURN_IF_ERROR(FirstFailure(collect.RunAll({}), absl::OkStatus()));
  }
  std::vector<double> forward, backward;
  for (int s = 0; s < p; ++s) {
    const StageState& st = states[s];
    const double idle =
        step_wall > 0 ? std::max(0.0, 1.0 - st.busy_seconds / step_wall) : 0.0;
    stages_json.push_back({{"stage", s},
                           {"layers", StageRangesString({&split[s], 1})},
                           {"parameters", st.stage->param_count()},
                           {"busy_seconds", st.busy_seconds},
                           {"wait_seconds", st.wait_seconds},
                           {"idle_share", idle},
                           {"peak_activation_bytes", st.peak_activation_bytes},
                           {"bytes_sent", st.bytes_sent},
                           {"bytes_received", st.bytes_received}});
    // The timeline's inputs: a stage's busy time per micro-batch, a third
    // of it forward and two thirds backward (a backward pass computes two
    // GEMMs per forward one).
    const double per_micro =
        st.busy_seconds /
        std::max<double>(1.0, double(summary.steps) * pipeline.micro_batches);
    forward.push_back(per_micro / 3.0);
    backward.push_back(2.0 * per_micro / 3.0);
  }
  double measured_bubble = 0.0;
  for (const auto& s : stages_json)
    measured_bubble += s["idle_share"].get<double>();
  // Stages on one GPU share it (one kernel stream at a time); CPU stages
  // run on their own threads.
  std::vector<int> devices;
  std::vector<std::string> gpus;
  for (int s = 0; s < p; ++s) {
    const ComputeBackend& backend = *states[s].backend;
    if (backend.IsHostMemory()) {
      devices.push_back(-1 - s);
      continue;
    }
    auto it = std::find(gpus.begin(), gpus.end(), backend.Name());
    if (it == gpus.end()) it = gpus.insert(gpus.end(), backend.Name());
    devices.push_back(static_cast<int>(it - gpus.begin()));
  }
  absl::StatusOr<PipelineTimeline> predicted =
      SimulatePipeline(pipeline.schedule, pipeline.micro_batches, forward,
                       backward, 0.0, devices);
  summary.pipeline = {
      {"stages", p},
      {"split", StageRangesString(split)},
      {"micro_batches", pipeline.micro_batches},
      {"schedule", PipelineScheduleName(pipeline.schedule)},
      {"textbook_bubble", PredictedBubble(p, pipeline.micro_batches)},
      {"predicted_bubble", predicted.ok() ? predicted->bubble : 0.0},
      {"measured_bubble", measured_bubble / p},
      {"per_stage", stages_json}};
  summary.final_parameters = trained.params;
  if (!options.export_dir.empty()) {
    RETURN_IF_ERROR(ExportModel(options.export_dir, trained));
    progress.Line(absl::StrFormat(
        "exported the model to %s (model.json, model.safetensors)",
        options.export_dir));
  }
  summary.wall_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return summary;
}

}  // namespace ferry
