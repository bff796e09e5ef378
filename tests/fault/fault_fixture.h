// Fault tests run the user's path: `ferry local` with `--chaos`, real
// processes, real signals, the real Fashion-MNIST data. This fixture runs one
// job and returns its summary; undisturbed reference runs are cached per
// test binary so that each mode trains its reference once.
#ifndef FERRY_TESTS_FAULT_FAULT_FIXTURE_H_
#define FERRY_TESTS_FAULT_FAULT_FIXTURE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace ferry::testing {

struct LocalRun {
  int exit_code = -1;
  nlohmann::json summary;  // null when none was written
  std::string log_dir;
  double seconds = 0;
};

// The fault tests' job: `mode` ("ps" or "ring"), 3 workers (2 shards in PS
// mode), kEpochs epochs of Fashion-MNIST at batch 256 (469 steps: half the
// steps of batch 128 for the same samples, which halves the suite's time
// under ASan), checkpoints every 50 steps, a 3 s heartbeat timeout; plus
// `extra` flags (e.g. --chaos, with events at steps so that they land
// mid-training on any machine: all within the first epoch's 235 steps).
std::vector<std::string> FaultJobArgs(
    const std::string& mode, const std::vector<std::string>& extra = {});
inline constexpr int kEpochs = 2;
inline constexpr int64_t kTrainSamples = 60000;

// Runs `ferry local` with `args` (plus --summary-json, --log-dir and
// --timeout) and waits for it; a run past `timeout` is killed (exit code
// 137) so that no test hangs.
absl::StatusOr<LocalRun> RunLocal(const std::string& name,
                                  const std::vector<std::string>& args,
                                  absl::Duration timeout = absl::Minutes(4));

// The undisturbed run of `mode`, computed at first use.
const LocalRun& Reference(const std::string& mode);

// The undisturbed run of the job `args` (RunLocal's), computed at first use
// and kept as the build tree's fault-reference/NAME.json: reused while it is
// newer than the binaries (ferry, ferry-server, ferry-worker) and was run
// with the same `args`. `exit_code` is not 0 when the run failed.
const LocalRun& Reference(const std::string& name,
                          const std::vector<std::string>& args,
                          absl::Duration timeout = absl::Minutes(4));

// Asserts what every fault test asserts: the job finished (exit 0), every
// epoch applied every sample exactly once, accuracy within one point of the
// undisturbed run, and `min_workers_seen` workers took part.
void ExpectHealthyRun(const LocalRun& run, const std::string& mode,
                      int min_workers_seen);
// The same against `reference` (an undisturbed run of the same job).
void ExpectHealthyRun(const LocalRun& run, const LocalRun& reference,
                      const std::string& mode, int min_workers_seen);

// The usual churn: a worker joins at step 50, worker1 is SIGKILLed at step
// 125 and worker0 SIGTERMed at step 225 (--chaos).
inline constexpr char kChurn[] =
    "join:1@step50,kill:worker1@step125,term:worker0@step225";

// Runs the job `job` (FaultJobArgs(mode, job)) undisturbed (the reference
// NAME, cached) and under kChurn, and checks the churned run against it
// (ExpectHealthyRun, 4 workers seen).
void ExpectHealthyUnderChurn(const std::string& name, const std::string& mode,
                             const std::vector<std::string>& job);

// Writes a model with BatchNorm (Linear 784-64, BatchNorm1d, ReLU, Linear
// 64-10) under the test's temporary directory; returns its path.
std::string BatchNormMlpFile();

// Counts the summary's job events of `kind` (events from the coordinator).
int CountEvents(const nlohmann::json& summary, const std::string& kind);

// The run's ring went back to one ring checkpoint, undoing steps once: a
// resumed ring whose first step aborts (a member lost, a collective
// failed) before any member applied a step resumes from the same
// checkpoint again, after that failure
// (CoordinatorRingCheckpointTest.ResumeWhoseFirstStepAbortsResumesAgain).
void ExpectResumedFromOneCheckpoint(const nlohmann::json& summary);

}  // namespace ferry::testing

#endif  // FERRY_TESTS_FAULT_FAULT_FIXTURE_H_
