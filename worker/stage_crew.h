// StageCrew: P threads, one per pipeline stage of a model trained in one
// process (worker/local_pipeline_trainer.h), each running its stage's part of
// every task posted, so that the stages exchange activations and gradients
// through their in-memory links concurrently. RunAll blocks until every
// stage has run the task.
//
// Thread safety: RunAll is called by one thread at a time.
#ifndef FERRY_WORKER_STAGE_CREW_H_
#define FERRY_WORKER_STAGE_CREW_H_

#include <cstdint>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace ferry {

class StageCrew {
 public:
  // Runs `work(stage)` on the stage's thread for every RunAll.
  using Work = std::function<absl::Status(int stage)>;

  StageCrew(int stages, Work work) : work_(std::move(work)) {
    done_.assign(stages, 0);
    status_.assign(stages, absl::OkStatus());
    for (int s = 0; s < stages; ++s) {
      threads_.emplace_back([this, s] { Loop(s); });
    }
  }
  ~StageCrew() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
      ++task_id_;
    }
    for (std::thread& t : threads_) t.join();
  }
  StageCrew(const StageCrew&) = delete;
  StageCrew& operator=(const StageCrew&) = delete;

  // Runs the work on every stage; their statuses by stage.
  std::vector<absl::Status> RunAll() {
    absl::MutexLock lock(&mu_);
    const int64_t id = ++task_id_;
    const auto all_done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (int64_t d : done_) {
        if (d < id) return false;
      }
      return true;
    };
    mu_.Await(absl::Condition(&all_done));
    return status_;
  }

 private:
  void Loop(int s) {
    int64_t seen = 0;
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        const auto posted = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return task_id_ > seen;
        };
        mu_.Await(absl::Condition(&posted));
        seen = task_id_;
        if (stop_) return;
      }
      absl::Status status = work_(s);
      absl::MutexLock lock(&mu_);
      status_[s] = std::move(status);
      done_[s] = seen;
    }
  }

  const Work work_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t task_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int64_t> done_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Status> status_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

// The root cause among the stages' statuses: a stage's own failure rather
// than the `abort_reason` its neighbours got when the links were aborted.
inline absl::Status FirstFailure(const std::vector<absl::Status>& statuses,
                                 const absl::Status& abort_reason) {
  for (const absl::Status& s : statuses) {
    if (!s.ok() && s != abort_reason) return s;
  }
  for (const absl::Status& s : statuses) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace ferry

#endif  // FERRY_WORKER_STAGE_CREW_H_
