// Times one training step (forward + backward, no optimizer) of a model spec
// on a compute backend, like PyTorch's loss.backward() in
// bench/torch_convnet.py:
//   ferry-model-step --model convnet --batch 128 --steps 20 --device cpu
// Prints samples/s (single BLAS thread unless --threads). Timing only; the
// correctness of the model is the tests' job.
//   --per-layer: a second timed run with the backend synchronized around
//     every layer, printing each layer's forward and backward milliseconds
//     and, for Conv2d and Linear, the GFLOP/s they reach (2 FLOPs per
//     multiply-add; backward counts the weight gradient and, where the
//     model computes it, the input gradient);
//   --gemm: the backend's own GEMM rate on a 1024x1024x1024 product and on
//     the shape of each Conv2d's per-sample forward GEMM, the ceiling the
//     layers are compared with.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_format.h"
#include "compute/compute_backend.h"
#include "model/model_presets.h"
#include "model/pipeline_split.h"
#include "model/sequential_model.h"

namespace {

// Multiply-adds x 2 of one sample's forward pass of layer i (Conv2d and
// Linear; 0 for the rest).
double ForwardFlops(const ferry::SequentialModel& m, size_t i) {
  return ferry::LayerForwardFlops(m.def().layers[i], m.shapes()[i]);
}

void PrintLayerTable(const ferry::SequentialModel& m,
                     const ferry::SequentialModel::LayerTimes& times, int batch,
                     int steps, double share) {
  std::printf("%-3s %-12s %10s %10s %10s %10s %7s\n", "#", "layer", "fwd ms",
              "bwd ms", "fwd GF/s", "bwd GF/s", "share");
  double total = 0.0;
  const size_t n = m.def().layers.size();
  std::vector<double> fwd(n, 0.0), bwd(n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    if (i < times.forward_seconds.size())
      fwd[i] = times.forward_seconds[i] * share / steps;
    if (i < times.backward_seconds.size())
      bwd[i] = times.backward_seconds[i] * share / steps;
    total += fwd[i] + bwd[i];
  }
  double flops = 0.0, flop_seconds = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double f = ForwardFlops(m, i) * batch;
    const double backward_f =
        f * (m.ComputesInputGradient(static_cast<int>(i)) ? 2.0 : 1.0);
    const auto rate = [](double fl, double s) {
      return fl > 0 && s > 0 ? absl::StrFormat("%10.2f", fl / s / 1e9)
                             : absl::StrFormat("%10s", "-");
    };
    std::printf("%-3zu %-12s %10.2f %10.2f %s %s %6.1f%%\n", i,
                ferry::LayerTypeName(m.def().layers[i].type), 1e3 * fwd[i],
                1e3 * bwd[i], rate(f, fwd[i]).c_str(),
                rate(backward_f, bwd[i]).c_str(),
                total > 0 ? 100.0 * (fwd[i] + bwd[i]) / total : 0.0);
    if (f > 0) {
      flops += f + backward_f;
      flop_seconds += fwd[i] + bwd[i];
    }
  }
  std::printf(
      "layers total %.2f ms/step (synchronized per layer); Conv2d+Linear "
      "%.2f GFLOP in %.2f ms: %.2f GFLOP/s\n",
      1e3 * total, flops / 1e9, 1e3 * flop_seconds,
      flop_seconds > 0 ? flops / flop_seconds / 1e9 : 0.0);
}

// GFLOP/s of C[m,n] = A[m,k] B[k,n] on the backend, best of 5 runs.
double GemmRate(ferry::ComputeBackend* b, int m, int n, int k) {
  auto a = b->Allocate(static_cast<size_t>(m) * k);
  auto bb = b->Allocate(static_cast<size_t>(k) * n);
  auto c = b->Allocate(static_cast<size_t>(m) * n);
  if (!a.ok() || !bb.ok() || !c.ok()) return 0.0;
  b->Fill(0.5f, static_cast<size_t>(m) * k, a->data()).IgnoreError();
  b->Fill(0.25f, static_cast<size_t>(k) * n, bb->data()).IgnoreError();
  const int reps = std::max(1, static_cast<int>(2e9 / (2.0 * m * n * k)));
  double best = 0.0;
  for (int run = 0; run < 5; ++run) {
    const auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) {
      b->Gemm(ferry::Transpose::kNo, ferry::Transpose::kNo, m, n, k, 1.0f,
              a->data(), k, bb->data(), n, 0.0f, c->data(), n)
          .IgnoreError();
    }
    b->Synchronize().IgnoreError();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    best = std::max(best, 2.0 * m * n * k * reps / s / 1e9);
  }
  return best;
}

void PrintGemmRates(const ferry::SequentialModel& m, ferry::ComputeBackend* b) {
  std::printf("gemm 1024x1024x1024: %.2f GFLOP/s\n",
              GemmRate(b, 1024, 1024, 1024));
  for (size_t i = 0; i < m.def().layers.size(); ++i) {
    const ferry::LayerDef& d = m.def().layers[i];
    if (d.type != ferry::LayerType::kConv2d) continue;
    const std::vector<int64_t>& out = m.shapes()[i];
    const int rows = static_cast<int>(d.out_channels);
    const int cols = static_cast<int>(out[1] * out[2]);
    const int inner =
        static_cast<int>(d.in_channels * d.kernel_size.h * d.kernel_size.w);
    std::printf("gemm %dx%dx%d (layer %zu Conv2d, one sample): %.2f GFLOP/s\n",
                rows, cols, inner, i, GemmRate(b, rows, cols, inner));
  }
}

}  // namespace

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
  bool per_layer = false, gemm = false;
  app.add_flag("--per-layer", per_layer,
               "also time every layer's forward and backward");
  app.add_flag("--gemm", gemm, "also time the backend's GEMM");
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
  const auto run = [&](int count, double* seconds) {
    *seconds = 0.0;
    for (int step = 0; step < warmup + count; ++step) {
      const auto start = std::chrono::steady_clock::now();
      auto stats =
          m->ForwardBackward(p->data(), in->data(), labels.data(), batch,
                             1.0f / batch, g->data(), {}, {1, step, 0});
      if (!stats.ok() || !b->Synchronize().ok()) {
        std::fprintf(stderr, "step failed: %s\n",
                     stats.status().ToString().c_str());
        return false;
      }
      if (step >= warmup) {
        *seconds += std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - start)
                        .count();
      }
    }
    return true;
  };
  double seconds = 0.0;
  if (!run(steps, &seconds)) return 1;
  std::printf(
      "model=%s backend=\"%s\" batch=%d steps=%d ms/step=%.2f "
      "samples/s=%.1f\n",
      model.c_str(), b->Name().c_str(), batch, steps, 1e3 * seconds / steps,
      steps * batch / seconds);
  if (per_layer) {
    ferry::SequentialModel::LayerTimes times;
    m->set_layer_times(&times);
    double synced = 0.0;
    if (!run(steps, &synced)) return 1;
    m->set_layer_times(nullptr);
    // Warm-up steps were timed too: scale by the timed share.
    const double share = static_cast<double>(steps) / (warmup + steps);
    PrintLayerTable(*m, times, batch, steps, share);
  }
  if (gemm) PrintGemmRates(*m, b);
  return 0;
}
