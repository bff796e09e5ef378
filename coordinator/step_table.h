// StepTable: the synchronous steps the coordinator has formed and not yet
// applied, their contributor slots, the quorum rule that closes a step, and
// the queue of steps (and async checkpoints) waiting for the finalizer.
// Steps are numbered densely from 0; `formed()` is the next number.
//
// Ownership: plain value type; owns its steps.
// Thread safety: not thread-safe. The Coordinator holds it as a field
// guarded by its mutex (ABSL_GUARDED_BY(mu_)); every call happens under
// that mutex.
#ifndef FERRY_COORDINATOR_STEP_TABLE_H_
#define FERRY_COORDINATOR_STEP_TABLE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "ferry/v1/coordinator.pb.h"

namespace ferry {

// One contributor's part of a step.
struct StepSlot {
  std::string worker_id;
  std::vector<v1::DataTask> tasks;
  int64_t samples = 0;
  bool pushed = false;  // reported its push
  // Ring checkpoints: its part of the step's checkpoint is written.
  bool checkpoint_written = false;
};

struct OpenStep {
  int64_t step = 0;
  int64_t epoch = 0;
  std::vector<StepSlot> slots;  // rank order
  bool finalizing = false;      // closed: queued for or in the finalizer
  int64_t ring_generation = 0;  // ring mode: generation of its ring
  int64_t fence = 0;            // the fence it was formed under
  // Hybrid: the shards will be checkpointed at this step's version; its
  // leases tell the ring members to keep their dense state before it.
  bool keep_state = false;
  // Ring checkpoints: its members write the checkpoint at version step + 1
  // after applying it (NextTaskResponse.checkpoint).
  bool checkpoint = false;
  // Ring: its ring resumes from the ring checkpoint at this version (==
  // step): none of its members held the job's state.
  std::optional<int64_t> restore;
  std::optional<uint64_t> digest;  // ring mode: first digest reported
  // Ring pipelines: the first digest reported per stage range [begin, end).
  std::map<std::pair<int64_t, int64_t>, uint64_t> range_digests;
  // Training curves: the step's reports summed (coordinator_metrics.cc).
  // The earliest beginning and the latest exchange end of its reports, on
  // the workers' clocks (StepReport.began/exchanged_unix_seconds).
  std::optional<absl::Time> began, ended;
  double loss_sum = 0, compute_seconds = 0, comm_seconds = 0;
  int64_t correct = 0, reported_samples = 0, reports = 0;
  // Each reporter's cumulative counts as of its report of this step:
  // a worker may already have reported the next step by the time this
  // one commits, so its latest counts would run ahead.
  std::map<std::string, std::pair<v1::ByteCounts, v1::ByteCounts>>
      reported_bytes;
};

class StepTable {
 public:
  std::map<int64_t, OpenStep>& open() { return open_; }
  const std::map<int64_t, OpenStep>& open() const { return open_; }
  // Null when `step` is not open.
  OpenStep* Find(int64_t step);
  const OpenStep* Find(int64_t step) const;
  // The next step's number.
  int64_t formed() const { return formed_; }
  void set_formed(int64_t formed) { formed_ = formed; }
  // Open steps still collecting reports (not finalizing).
  int Collecting() const;
  // Opens `step` under number formed() (overwriting step.step) and bumps
  // formed(). Returns it.
  OpenStep& Add(OpenStep step);
  // Closes `step` and queues it for the finalizer once enough slots
  // pushed: all of them, or min(quorum, slots) when quorum > 0. False when
  // it stays open (or was closed already, or has no slots).
  bool QueueIfReady(OpenStep& step, int64_t quorum);
  // Removes and returns (in step order) the open steps >= `from` that
  // are collecting, and the closed ones too when `include_finalizing`
  // (their queue entries as well).
  std::vector<OpenStep> RemoveFrom(int64_t from, bool include_finalizing);

  // The finalizer's queue of closed steps.
  bool queue_empty() const { return queue_.empty(); }
  // The lowest queued step. REQUIRES: !queue_empty().
  int64_t NextQueued();
  // Removes one `entry` from the queue, if there.
  void Dequeue(int64_t entry);

 private:
  std::map<int64_t, OpenStep> open_;
  int64_t formed_ = 0;
  std::vector<int64_t> queue_;
};

}  // namespace ferry

#endif  // FERRY_COORDINATOR_STEP_TABLE_H_
