// ferry-pipeline-bubble: the pipeline bubble of a model split into stages,
// measured and predicted, in one process (one thread and one CPU backend
// per stage, stages linked in memory or over loopback gRPC).
//
// For every micro-batch count M:
//  - calibration: each stage alone times the forward and the backward pass
//    of one micro-batch (batch / M rows), median of --calibration runs;
//  - prediction: SimulatePipeline over those times (the cost model's
//    timeline), and the textbook (P-1)/(M+P-1) for equal stages;
//  - measurement: --steps pipelined steps (after --warmup), every stage
//    starting each step together; a stage's bubble is 1 - busy / step,
//    the step being the slowest stage's; the bubble is the stages' mean.
// Prints a table and, with --json, writes it. Speed is a benchmark, never a
// test: docs/benchmarks.md records the figures.
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/clock.h"
#include "compute/cpu_backend.h"
#include "model/model_presets.h"
#include "model/pipeline_split.h"
#include "model/pipeline_stage.h"
#include "model/sequential_model.h"
#include "nlohmann/json.hpp"
#include "pipeline/in_memory_stage_link.h"
#include "pipeline/pipeline_schedule.h"
#include "pipeline/stage_runner.h"

namespace {

using ferry::PipelineStage;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

double Now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Median forward and backward seconds of one micro-batch of `rows` on each
// stage, run alone.
absl::Status Calibrate(const ferry::ModelDef& def,
                       const std::vector<ferry::StageRange>& split,
                       const std::vector<float>& params, int rows, int runs,
                       std::vector<double>& forward,
                       std::vector<double>& backward) {
  auto backend = ferry::MakeCpuBackend(1);
  forward.clear();
  backward.clear();
  for (const ferry::StageRange& r : split) {
    auto stage = PipelineStage::Create(def, r, backend.get());
    if (!stage.ok()) return stage.status();
    const std::vector<float> x(
        static_cast<size_t>(rows) * stage->input_elements(), 0.5f);
    const std::vector<float> dy(
        static_cast<size_t>(rows) * stage->output_elements(), 1e-3f);
    const std::vector<int32_t> labels(rows, 1);
    std::vector<float> grads(stage->param_count());
    std::vector<double> f, b;
    for (int i = 0; i < runs + 1; ++i) {
      if (absl::Status s = stage->SetInput(0, rows, x); !s.ok()) return s;
      double t = Now();
      const float* p = params.data() + stage->param_offset();
      if (absl::Status s = stage->Forward(0, p, {}); !s.ok()) return s;
      const double ft = Now() - t;
      absl::Status s = stage->is_last()
                           ? stage->Loss(0, labels.data(), 1.0f).status()
                           : stage->SetOutputGradient(0, dy);
      if (!s.ok()) return s;
      t = Now();
      if (s = stage->Backward(0, p, grads.data(), false); !s.ok()) return s;
      if (i > 0) {  // the first run allocates
        f.push_back(ft);
        b.push_back(Now() - t);
      }
    }
    forward.push_back(Median(f));
    backward.push_back(Median(b));
  }
  return absl::OkStatus();
}

struct Measured {
  double step_seconds = 0.0;  // median over steps
  double bubble = 0.0;        // median over steps of the stages' mean
};

absl::StatusOr<Measured> Measure(const ferry::ModelDef& def,
                                 const std::vector<ferry::StageRange>& split,
                                 const std::vector<float>& params,
                                 const std::vector<float>& inputs,
                                 const std::vector<int32_t>& labels, int batch,
                                 int micro, ferry::PipelineSchedule schedule,
                                 int steps, int warmup) {
  const int p = static_cast<int>(split.size());
  ferry::InMemoryStageHub hub(p);
  std::barrier sync(p);
  std::vector<std::vector<ferry::StageStepResult>> results(p);
  std::vector<absl::Status> status(p);
  std::vector<std::thread> threads;
  for (int s = 0; s < p; ++s) {
    threads.emplace_back([&, s] {
      auto backend = ferry::MakeCpuBackend(1);
      auto stage = PipelineStage::Create(def, split[s], backend.get());
      std::vector<float> grads(stage.ok() ? stage->param_count() : 0);
      for (int step = 0; step < warmup + steps; ++step) {
        sync.arrive_and_wait();
        if (!stage.ok() || !status[s].ok()) continue;
        ferry::StageStepInput in;
        in.step = step;
        in.batch = batch;
        in.micro_batches = micro;
        in.schedule = schedule;
        if (s == 0) in.inputs = inputs;
        if (s == p - 1) in.labels = labels;
        auto r = ferry::RunStageStep(*stage, s, p, hub.Link(s),
                                     params.data() + stage->param_offset(),
                                     grads.data(), in, *ferry::RealClock());
        if (!r.ok()) {
          status[s] = r.status();
          hub.Abort(r.status());
        } else if (step >= warmup) {
          results[s].push_back(*r);
        }
      }
      if (!stage.ok()) status[s] = stage.status();
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : status) {
    if (!s.ok()) return s;
  }
  std::vector<double> step_times, bubbles;
  for (int i = 0; i < steps; ++i) {
    double step = 0.0;
    for (int s = 0; s < p; ++s) {
      step = std::max(step, results[s][i].step_seconds);
    }
    double idle = 0.0;
    for (int s = 0; s < p; ++s) {
      idle += 1.0 - results[s][i].busy_seconds / step;
    }
    step_times.push_back(step);
    bubbles.push_back(idle / p);
  }
  return Measured{Median(step_times), Median(bubbles)};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "ferry-pipeline-bubble: measured vs predicted pipeline bubble of a "
      "model split into stages (one thread per stage, in one process)"};
  std::string model = "convnet", schedule_name = "1f1b",
              balance_name = "compute";
  std::string micro_list = "1,2,4,8", json_path;
  int stages = 2, batch = 64, steps = 10, warmup = 2, calibration = 5;
  app.add_option("--model", model, "preset, JSON path or MLP string");
  app.add_option("--stages", stages, "pipeline stages P (threads)");
  app.add_option("--micro-batches", micro_list,
                 "comma-separated micro-batch counts M");
  app.add_option("--batch", batch, "rows per step (cut into M parts)");
  app.add_option("--schedule", schedule_name, "gpipe or 1f1b");
  app.add_option("--balance", balance_name,
                 "what the split evens out: compute or params");
  app.add_option("--steps", steps, "timed steps per M");
  app.add_option("--warmup", warmup, "untimed steps first");
  app.add_option("--calibration", calibration,
                 "runs per stage and pass for the prediction");
  app.add_option("--json", json_path, "also write the table as JSON");
  CLI11_PARSE(app, argc, argv);

  auto def = ferry::ResolveModelSpec(model);
  auto schedule = ferry::ParsePipelineSchedule(schedule_name);
  auto balance = ferry::ParseStageBalance(balance_name);
  absl::StatusOr<std::vector<int>> micros = std::vector<int>{};
  for (absl::string_view part : absl::StrSplit(micro_list, ',')) {
    int m = 0;
    if (!absl::SimpleAtoi(part, &m)) {
      micros = absl::InvalidArgumentError(absl::StrCat(
          "--micro-batches: \"", part, "\" is not a count (e.g. 1,2,4,8)"));
      break;
    }
    micros->push_back(m);
  }
  for (const absl::Status& s :
       {def.status(), schedule.status(), balance.status(), micros.status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "ferry-pipeline-bubble: %s\n",
                   std::string(s.message()).c_str());
      return 2;
    }
  }
  auto split = ferry::SplitModel(*def, stages, {}, *balance);
  if (!split.ok()) {
    std::fprintf(stderr, "ferry-pipeline-bubble: %s\n",
                 std::string(split.status().message()).c_str());
    return 2;
  }
  auto backend = ferry::MakeCpuBackend(1);
  auto whole = ferry::SequentialModel::Create(*def, backend.get());
  const std::vector<float> params = whole->InitialParameters(1);
  std::vector<float> inputs(static_cast<size_t>(batch) * whole->input_dim(),
                            0.5f);
  std::vector<int32_t> labels(batch);
  for (int i = 0; i < batch; ++i) labels[i] = i % whole->num_classes();

  std::printf("model %s, %d stages split %s (by %s), %s, batch %d\n",
              model.c_str(), stages, ferry::StageRangesString(*split).c_str(),
              balance_name.c_str(), schedule_name.c_str(), batch);
  std::printf("%4s %10s %10s %10s %8s %12s %12s\n", "M", "textbook",
              "predicted", "measured", "ratio", "step pred s", "step meas s");
  nlohmann::json rows = nlohmann::json::array();
  for (int m : *micros) {
    if (m < 1 || m > batch) {
      std::fprintf(stderr, "ferry-pipeline-bubble: M=%d outside [1, %d]\n", m,
                   batch);
      return 2;
    }
    std::vector<double> fwd, bwd;
    if (absl::Status s =
            Calibrate(*def, *split, params, batch / m, calibration, fwd, bwd);
        !s.ok()) {
      std::fprintf(stderr, "ferry-pipeline-bubble: %s\n",
                   std::string(s.message()).c_str());
      return 1;
    }
    auto predicted = ferry::SimulatePipeline(*schedule, m, fwd, bwd, 0.0);
    auto measured = Measure(*def, *split, params, inputs, labels, batch, m,
                            *schedule, steps, warmup);
    if (!predicted.ok() || !measured.ok()) {
      std::fprintf(stderr, "ferry-pipeline-bubble: %s\n",
                   std::string(!predicted.ok() ? predicted.status().message()
                                               : measured.status().message())
                       .c_str());
      return 1;
    }
    const double textbook = ferry::PredictedBubble(stages, m);
    std::printf(
        "%4d %10.3f %10.3f %10.3f %8.2f %12.4f %12.4f\n", m, textbook,
        predicted->bubble, measured->bubble,
        predicted->bubble > 0 ? measured->bubble / predicted->bubble : 0.0,
        predicted->step_seconds, measured->step_seconds);
    std::fflush(stdout);
    rows.push_back({{"micro_batches", m},
                    {"textbook_bubble", textbook},
                    {"predicted_bubble", predicted->bubble},
                    {"measured_bubble", measured->bubble},
                    {"predicted_step_seconds", predicted->step_seconds},
                    {"measured_step_seconds", measured->step_seconds},
                    {"stage_forward_seconds", fwd},
                    {"stage_backward_seconds", bwd}});
  }
  if (!json_path.empty()) {
    nlohmann::json out = {{"model", model},
                          {"stages", stages},
                          {"split", ferry::StageRangesString(*split)},
                          {"schedule", schedule_name},
                          {"batch", batch},
                          {"rows", rows}};
    std::ofstream(json_path) << out.dump(2) << "\n";
  }
  return 0;
}
