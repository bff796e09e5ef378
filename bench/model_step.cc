// Times one training step (forward + backward, no optimizer) of a model spec
// on a compute backend, like PyTorch's loss.backward() in
// bench/torch_convnet.py:
//   ferry-model-step --model convnet --batch 128 --steps 20 --device cpu
// Prints samples/s (single BLAS thread unless --threads). Timing only; the
// correctness of the model is the tests' job.
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "compute/compute_backend.h"
#include "model/model_presets.h"
#include "model/sequential_model.h"

int main(int argc, char** argv) {
  CLI::App app{"ferry-model-step: time training steps of a model spec"};
  std::string model = "convnet", device = "cpu";
  int batch = 128, steps = 20, warmup = 2, threads = 1;
  app.add_option("--model", model, "preset, JSON path or MLP string");
  app.add_option("--batch", batch, "samples per step");
  app.add_option("--steps", steps, "timed steps");
  app.add_option("--warmup", warmup, "untimed steps first");
  app.add_option("--threads", threads, "BLAS threads (CPU)");
  app.add_option("--device", device, "cpu, cuda or auto");
  CLI11_PARSE(app, argc, argv);

  auto def = ferry::ResolveModelSpec(model);
  auto choice = ferry::ParseDeviceChoice(device);
  if (!def.ok() || !choice.ok()) {
    std::fprintf(
        stderr, "%s\n",
        (!def.ok() ? def.status() : choice.status()).ToString().c_str());
    return 2;
  }
  auto backend = ferry::MakeBackend(*choice, threads);
  if (!backend.ok()) {
    std::fprintf(stderr, "%s\n", backend.status().ToString().c_str());
    return 2;
  }
  ferry::ComputeBackend* b = backend->get();
  auto m = ferry::SequentialModel::Create(*def, b);
  if (!m.ok()) {
    std::fprintf(stderr, "%s\n", m.status().ToString().c_str());
    return 2;
  }
  const std::vector<float> params = m->InitialParameters(1);
  std::vector<float> x(static_cast<size_t>(batch) * m->input_dim());
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : x) v = dist(rng);
  std::vector<int32_t> labels(batch);
  for (int i = 0; i < batch; ++i) labels[i] = i % m->num_classes();
  auto p = b->Allocate(params.size());
  auto in = b->Allocate(x.size());
  auto g = b->Allocate(params.size());
  if (!p.ok() || !in.ok() || !g.ok() ||
      !b->CopyToDevice(params.data(), params.size(), p->data()).ok() ||
      !b->CopyToDevice(x.data(), x.size(), in->data()).ok()) {
    std::fprintf(stderr, "allocation or copy failed\n");
    return 2;
  }
  double seconds = 0.0;
  for (int step = 0; step < warmup + steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    auto stats = m->ForwardBackward(p->data(), in->data(), labels.data(), batch,
                                    1.0f / batch, g->data(), {}, {1, step, 0});
    if (!stats.ok() || !b->Synchronize().ok()) {
      std::fprintf(stderr, "step failed: %s\n",
                   stats.status().ToString().c_str());
      return 1;
    }
    if (step >= warmup) {
      seconds += std::chrono::duration<double>(
                     std::chrono::steady_clock::now() - start)
                     .count();
    }
  }
  std::printf(
      "model=%s backend=\"%s\" batch=%d steps=%d ms/step=%.2f "
      "samples/s=%.1f\n",
      model.c_str(), b->Name().c_str(), batch, steps, 1e3 * seconds / steps,
      steps * batch / seconds);
  return 0;
}
