// Pipeline stages on CUDA (one backend per stage thread, linked in memory)
// against the same step in one process on the CPU: loss and gradients within
// fp32 tolerance, dropout masks included. Skips without CUDA support or
// device.
#include "gtest/gtest.h"

#if FERRY_HAVE_CUDA

#include <cmath>
#include <thread>
#include <vector>

#include "compute/cuda_entry.h"
#include "model/model_def.h"
#include "model/pipeline_stage.h"
#include "pipeline/in_memory_stage_link.h"
#include "tests/pipeline/pipeline_fixture.h"

namespace ferry {
namespace {

TEST(PipelineStageCudaTest, TwoStagesOnCudaMatchOneCpuProcess) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible";
  auto def = ParseModelJson(R"({
    "format": "ferry.model.v1", "input": {"shape": [2, 10, 10]}, "classes": 4,
    "layers": [
      {"type": "Conv2d", "args": {"in_channels": 2, "out_channels": 6,
                                  "kernel_size": 3, "padding": 1}},
      {"type": "ReLU"}, {"type": "MaxPool2d", "args": {"kernel_size": 2}},
      {"type": "Dropout", "args": {"p": 0.25}}, {"type": "Flatten"},
      {"type": "Linear", "args": {"in_features": 150, "out_features": 8}},
      {"type": "ReLU"}, {"type": "Dropout", "args": {"p": 0.5}},
      {"type": "Linear", "args": {"in_features": 8, "out_features": 4}}]})");
  ASSERT_TRUE(def.ok()) << def.status();
  for (PipelineSchedule schedule :
       {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B}) {
    const PipelineCase c = MakeCase(*def, 2, 12, 4, schedule);
    const OneProcessStep want = RunOneProcess(c);
    InMemoryStageHub hub(2);
    std::vector<float> grads(c.params.size(), 0.0f);
    std::vector<absl::Status> status(2);
    LossStats loss;
    std::vector<std::thread> threads;
    for (int s = 0; s < 2; ++s) {
      threads.emplace_back([&, s] {
        status[s] = [&]() -> absl::Status {
          auto cuda = MakeCudaBackend(0);
          if (!cuda.ok()) return cuda.status();
          ComputeBackend* b = cuda->get();
          auto stage = PipelineStage::Create(c.def, c.split[s], b);
          if (!stage.ok()) return stage.status();
          const size_t n = stage->param_count();
          auto params = b->Allocate(n);
          auto device_grads = b->Allocate(n);
          if (!params.ok()) return params.status();
          if (!device_grads.ok()) return device_grads.status();
          absl::Status copied = b->CopyToDevice(
              c.params.data() + stage->param_offset(), n, params->data());
          if (!copied.ok()) return copied;
          StageStepInput in;
          in.context = c.context;
          in.batch = c.batch;
          in.micro_batches = c.micro_batches;
          in.schedule = c.schedule;
          if (s == 0) in.inputs = c.inputs;
          if (s == 1) in.labels = c.labels;
          auto result = RunStageStep(*stage, s, 2, hub.Link(s), params->data(),
                                     device_grads->data(), in, *RealClock());
          if (!result.ok()) {
            hub.Abort(result.status());
            return result.status();
          }
          if (s == 1) loss = result->loss;
          return b->CopyToHost(device_grads->data(), n,
                               grads.data() + stage->param_offset());
        }();
      });
    }
    for (std::thread& t : threads) t.join();
    for (const absl::Status& st : status) ASSERT_TRUE(st.ok()) << st;
    EXPECT_NEAR(loss.loss_sum, want.loss.loss_sum,
                1e-4 * std::fabs(want.loss.loss_sum));
    for (size_t i = 0; i < grads.size(); ++i) {
      EXPECT_NEAR(grads[i], want.grads[i],
                  1e-4 + 1e-3 * std::fabs(want.grads[i]))
          << PipelineScheduleName(schedule) << " " << i;
    }
  }
}

}  // namespace
}  // namespace ferry

#else

TEST(PipelineStageCudaTest, TwoStagesOnCudaMatchOneCpuProcess) {
  GTEST_SKIP() << "built without CUDA";
}

#endif
