// Runs a real program to its end for integration tests: its exit status and
// everything it wrote (stdout and stderr, through a log file), killed when
// it outlives `timeout`; waits for a started program's exit or for the
// ports it reports. Also the CTR data set and small DLRM the sparse tests
// share.
#ifndef FERRY_TESTS_TESTING_PROCESS_RUN_H_
#define FERRY_TESTS_TESTING_PROCESS_RUN_H_

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/child_process.h"
#include "common/ops_flags.h"
#include "nlohmann/json.hpp"
#include "tests/testing/wait_until.h"

namespace ferry::testing {

struct ProcessRun {
  int rc = -1;  // -1: it could not be started
  std::string output;
};

// The exit code of `child` once it exits by itself within `timeout`;
// otherwise (the wait's failure printed) the code of stopping it (SIGTERM,
// SIGKILL after 5 s).
inline int AwaitExit(ChildProcess& child, absl::Duration timeout) {
  const absl::Status exited = testutil::WaitUntil(
      absl::StrCat(child.log_path(), "'s process to exit"),
      [&child] { return child.Poll().has_value(); }, timeout);
  return exited.ok() ? *child.Poll() : child.Stop(absl::Seconds(5));
}

// The service port `child` bound and wrote to its --port-file `path`.
inline absl::StatusOr<int> AwaitPort(
    ChildProcess& child, const std::string& path,
    absl::Duration timeout = absl::Seconds(60)) {
  absl::StatusOr<std::string> text = AwaitFileOf(child, path, timeout);
  if (!text.ok()) return text.status();
  absl::StatusOr<std::vector<int>> ports = ParsePortFile(*text);
  if (!ports.ok()) return ports.status();
  return ports->front();
}

// The health and metrics ports `child` bound and wrote to its
// --ops-port-file `path`.
inline absl::StatusOr<OpsPorts> AwaitOpsPorts(
    ChildProcess& child, const std::string& path,
    absl::Duration timeout = absl::Seconds(60)) {
  absl::StatusOr<std::string> text = AwaitFileOf(child, path, timeout);
  if (!text.ok()) return text.status();
  return ParseOpsPortFile(*text);
}

inline ProcessRun RunToEnd(const std::vector<std::string>& argv,
                           const std::string& log,
                           absl::Duration timeout = absl::Seconds(120)) {
  ProcessRun run;
  auto child = ChildProcess::Spawn(argv, log);
  if (!child.ok()) {
    run.output = std::string(child.status().message());
    return run;
  }
  run.rc = AwaitExit(*child, timeout);
  std::ifstream in(log);
  run.output.assign(std::istreambuf_iterator<char>(in),
                    std::istreambuf_iterator<char>());
  return run;
}

// A program of this build (FERRY_BIN_DIR).
inline std::string FerryBin(const std::string& name) {
  return absl::StrCat(FERRY_BIN_DIR, "/", name);
}

// `ferry data ctr` into `dir`: `rows` training and `test_rows` test rows of
// seed `seed`, small vocabularies (`large` ids for every third field, 10 to
// 260 for the others) so that a slice learns in one epoch.
inline ProcessRun WriteCtrData(const std::string& dir, int rows, int test_rows,
                               int seed, int large, const std::string& log) {
  std::string vocab;
  for (int f = 0; f < 26; ++f) {
    absl::StrAppend(&vocab, f == 0 ? "" : ",",
                    f % 3 == 0 ? large : 10 * (f + 1));
  }
  return RunToEnd(
      {FerryBin("ferry"), "data", "ctr", "--out", dir, "--rows",
       std::to_string(rows), "--test-rows", std::to_string(test_rows), "--seed",
       std::to_string(seed), "--vocab-sizes", vocab, "--quiet"},
      log);
}

// The JSON file at `path` (a run's summary); discarded (is_discarded())
// when it is missing or does not parse.
inline nlohmann::json ReadJsonFile(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in, nullptr, false);
}

// The small DLRM the distributed CTR tests train (embedding dim 8, bottom
// 13-16-8, top 44-16-1: 6,137 dense parameters).
inline constexpr char kSmallDlrmJson[] =
    R"({"format": "ferry.model.v1", "kind": "dlrm", "embedding_dim": 8,
        "bottom": [16], "top": [16]})";

// A fresh `dir` holding dir/data (WriteCtrData: `rows` training and
// `test_rows` test rows, seed 13, 3,000 ids in every third field) and
// dir/small.json (kSmallDlrmJson). Returns the generator's run.
inline ProcessRun WriteSmallCtrJob(const std::string& dir, int rows,
                                   int test_rows) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  ProcessRun gen = WriteCtrData(dir + "/data", rows, test_rows, /*seed=*/13,
                                /*large=*/3000, dir + "/gen.log");
  std::ofstream(dir + "/small.json") << kSmallDlrmJson;
  return gen;
}

// The training flags the CTR tests share: `model` on criteo:`data_dir` on
// the CPU, `epochs` epochs of `batch`, seed 5, dense Adam lr 0.003 constant
// without weight decay (the embeddings take the row-wise Adagrad default).
inline std::vector<std::string> CtrTrainFlags(const std::string& model,
                                              const std::string& data_dir,
                                              int epochs, int batch) {
  return {"--model",        model,
          "--dataset",      "criteo:" + data_dir,
          "--device",       "cpu",
          "--epochs",       std::to_string(epochs),
          "--batch",        std::to_string(batch),
          "--seed",         "5",
          "--optimizer",    "adam",
          "--lr",           "0.003",
          "--lr-schedule",  "constant",
          "--warmup-steps", "0",
          "--weight-decay", "0"};
}

}  // namespace ferry::testing

#endif  // FERRY_TESTS_TESTING_PROCESS_RUN_H_
