// A whole SequentialModel on CUDA against the same model on the CPU: the
// small conv net with every layer type, loss and gradients within fp32
// tolerance, identical dropout masks. Skips without CUDA support or device.
#include "gtest/gtest.h"

#if FERRY_HAVE_CUDA

#include <cmath>
#include <random>
#include <vector>

#include "compute/cpu_backend.h"
#include "compute/cuda_entry.h"
#include "model/model_def.h"
#include "model/sequential_model.h"

namespace ferry {
namespace {

TEST(SequentialModelCudaTest, MatchesTheCpuModel) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible";
  auto def = ParseModelJson(R"({
    "format": "ferry.model.v1", "input": {"shape": [2, 10, 10]}, "classes": 4,
    "layers": [
      {"type": "Conv2d", "args": {"in_channels": 2, "out_channels": 6,
                                  "kernel_size": 3, "padding": 1}},
      {"type": "BatchNorm2d", "args": {"num_features": 6}},
      {"type": "ReLU"}, {"type": "MaxPool2d", "args": {"kernel_size": 2}},
      {"type": "Dropout", "args": {"p": 0.25}},
      {"type": "AvgPool2d", "args": {"kernel_size": 2, "stride": 1}},
      {"type": "Flatten"},
      {"type": "Linear", "args": {"in_features": 96, "out_features": 8}},
      {"type": "BatchNorm1d", "args": {"num_features": 8}},
      {"type": "ReLU"}, {"type": "Dropout", "args": {"p": 0.5}},
      {"type": "Linear", "args": {"in_features": 8, "out_features": 4}}]})");
  ASSERT_TRUE(def.ok()) << def.status();
  auto cpu = MakeCpuBackend(1);
  auto cuda = MakeCudaBackend(0);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  auto cm = SequentialModel::Create(*def, cpu.get());
  auto gm = SequentialModel::Create(*def, cuda->get());
  ASSERT_TRUE(cm.ok() && gm.ok());
  const std::vector<float> params = cm->InitialParameters(3);
  const int batch = 12;
  std::vector<float> x(batch * cm->input_dim());
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (float& v : x) v = dist(rng);
  std::vector<int32_t> labels(batch);
  for (int i = 0; i < batch; ++i) labels[i] = i % 4;

  auto upload = [&](const std::vector<float>& h) {
    DeviceBuffer b = *(*cuda)->Allocate(h.size());
    EXPECT_TRUE((*cuda)->CopyToDevice(h.data(), h.size(), b.data()).ok());
    return b;
  };
  DeviceBuffer gp = upload(params), gx = upload(x);
  DeviceBuffer gg = *(*cuda)->Allocate(params.size());
  std::vector<float> cg(params.size()), gg_host(params.size());
  const StepContext ctx{9, 2, 100};
  auto cs = cm->ForwardBackward(params.data(), x.data(), labels.data(), batch,
                                1.0f, cg.data(), {}, ctx);
  auto gs = gm->ForwardBackward(gp.data(), gx.data(), labels.data(), batch,
                                1.0f, gg.data(), {}, ctx);
  ASSERT_TRUE(cs.ok() && gs.ok()) << gs.status();
  EXPECT_NEAR(gs->loss_sum, cs->loss_sum, 1e-4 * std::fabs(cs->loss_sum));
  ASSERT_TRUE(
      (*cuda)->CopyToHost(gg.data(), gg_host.size(), gg_host.data()).ok());
  for (size_t i = 0; i < cg.size(); ++i) {
    EXPECT_NEAR(gg_host[i], cg[i], 1e-4 + 1e-3 * std::fabs(cg[i])) << i;
  }
  const std::vector<float> cstate = *cm->GetState(), gstate = *gm->GetState();
  for (size_t i = 0; i < cstate.size(); ++i) {
    EXPECT_NEAR(gstate[i], cstate[i], 1e-5 + 1e-5 * std::fabs(cstate[i]));
  }
  auto ce = cm->Evaluate(params.data(), x.data(), labels.data(), batch);
  auto ge = gm->Evaluate(gp.data(), gx.data(), labels.data(), batch);
  ASSERT_TRUE(ce.ok() && ge.ok());
  EXPECT_NEAR(ge->loss_sum, ce->loss_sum, 1e-4 * std::fabs(ce->loss_sum));
  EXPECT_EQ(ge->correct, ce->correct);
}

}  // namespace
}  // namespace ferry

#else  // !FERRY_HAVE_CUDA

TEST(SequentialModelCudaTest, NotBuiltWithCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#endif  // FERRY_HAVE_CUDA
