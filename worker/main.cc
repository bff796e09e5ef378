// ferry-worker: trains alone (--standalone) or as a stateless member of a
// job run by a coordinator (--coordinator HOST:PORT).
#include <cstdio>
#include <fstream>
#include <iostream>

#include "CLI/CLI.hpp"
#include "common/cli_flags.h"
#include "common/progress.h"
#include "worker/standalone_trainer.h"

namespace {

int RunStandaloneMain(ferry::TrainOptions options,
                      const ferry::OptimizerFlags& opt_flags,
                      const std::string& device, const std::string& summary_path) {
  auto config = opt_flags.ToConfig();
  if (!config.ok()) {
    std::cerr << "ferry-worker: " << config.status().message() << "\n";
    return 2;
  }
  options.optimizer = *config;
  auto choice = ferry::ParseDeviceChoice(device);
  if (!choice.ok()) {
    std::cerr << "ferry-worker: " << choice.status().message() << "\n";
    return 2;
  }
  options.device = *choice;
  ferry::ProgressPrinter progress(stderr);
  auto summary = ferry::RunStandalone(options, progress);
  if (!summary.ok()) {
    std::cerr << "ferry-worker: " << summary.status() << "\n";
    return 1;
  }
  nlohmann::json json = summary->ToJson();
  std::printf("done: %d epochs, %lld steps, test accuracy %.4f, %.0f samples/s, %.1f s\n",
              summary->epochs, static_cast<long long>(summary->steps),
              summary->test_accuracy, summary->samples_per_second,
              summary->wall_seconds);
  if (!summary_path.empty()) {
    std::ofstream out(summary_path);
    out << json.dump(2) << "\n";
    if (!out) {
      std::cerr << "ferry-worker: cannot write " << summary_path << "\n";
      return 1;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ferry-worker: a stateless training worker"};
  bool standalone = false;
  ferry::TrainOptions options;
  ferry::OptimizerFlags opt_flags;
  std::string device = "auto";
  std::string summary_path;

  app.add_flag("--standalone", standalone, "train in this process alone");
  app.add_option("--model", options.model, "MLP layer sizes")->capture_default_str();
  app.add_option("--dataset", options.dataset, "fashion-mnist, mnist or synthetic:N")
      ->capture_default_str();
  app.add_option("--data-dir", options.data_dir,
                 "directory of the IDX files (default /usr/share/datasets/fashion-mnist)");
  app.add_option("--batch", options.batch, "batch size")->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--epochs", options.epochs, "epochs")->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-steps", options.max_steps, "stop after this many steps (0: no limit)")
      ->capture_default_str();
  app.add_option("--seed", options.seed, "seed for init and sampling")->capture_default_str();
  app.add_option("--device", device, "auto, cpu or cuda")->capture_default_str();
  app.add_option("--threads", options.threads, "BLAS threads (CPU backend)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--summary-json", summary_path, "write a JSON summary here");
  ferry::AddOptimizerFlags(app, opt_flags);
  ferry::BindEnvironment(app);
  CLI11_PARSE(app, argc, argv);

  if (standalone) return RunStandaloneMain(options, opt_flags, device, summary_path);
  std::cerr << "ferry-worker: pass --standalone (the distributed mode needs "
               "--coordinator HOST:PORT)\n";
  return 2;
}
