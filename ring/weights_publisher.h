// Hands a ring worker's current weights to readers outside its training
// loop (the coordinator's evaluation via RingPeer.GetWeights) without
// stopping the loop: a reader that finds the snapshot too old marks it
// wanted and retries; the training loop refreshes the snapshot between two
// steps only when it is wanted.
//
// Thread safety: all methods are thread-safe.
#ifndef FERRY_RING_WEIGHTS_PUBLISHER_H_
#define FERRY_RING_WEIGHTS_PUBLISHER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/sharding.h"

namespace ferry {

struct WeightsSnapshot {
  int64_t steps_applied = 0;
  // The elements of the flat parameter buffer (of total_elements) that
  // `ranges` name, back to back; with no ranges, the whole buffer.
  std::vector<float> values;
  int64_t total_elements = 0;
  // The parts of the flat buffer published, ascending and disjoint (a ring
  // pipeline stage's layers, a sharded ring member's slice); empty: all of
  // it. GetWeights sends only these.
  std::vector<FlatRange> ranges;
  // A model with embedding tables: the member's tables as one blob
  // (ps/sparse_store.h EncodeSparseStore); empty otherwise.
  std::string tables;

  // `n` of the values from `at` on (in `values`' order) as bytes into
  // `data`: from `values`, or, while the snapshot is lent
  // (WeightsPublisher::Lend), from the lender's buffer.
  void ReadValues(int64_t at, int64_t n, std::string* data) const;

  // The lender's whole flat buffer while lent (ranges empty, `values`
  // empty); WeightsPublisher::TakeBack copies it into `values` and clears
  // it, under mu, so a reader goes on from the copy.
  mutable absl::Mutex mu;
  const float* lent ABSL_GUARDED_BY(mu) = nullptr;
};

// The elements of `ranges` of the host buffer `flat`, back to back (a
// snapshot's values).
std::vector<float> PackRanges(const float* flat,
                              const std::vector<FlatRange>& ranges);

// In the message of Get's UNAVAILABLE: this member will publish the
// weights between two of its steps (a reader may wait for it rather than
// ask other members, each of which would copy the model too).
inline constexpr char kWeightsNotPublishedYet[] = "are not published yet";

class WeightsPublisher {
 public:
  // The newest snapshot if it has >= min_step steps applied. Otherwise
  // marks a refresh wanted and returns UNAVAILABLE (retry shortly), its
  // message holding kWeightsNotPublishedYet.
  absl::StatusOr<std::shared_ptr<const WeightsSnapshot>> Get(int64_t min_step);

  // True when a reader waits for a fresher snapshot than the newest.
  bool wanted() const { return wanted_.load(std::memory_order_acquire); }
  // The largest min_step a reader has asked for (0: none).
  int64_t wanted_step() const {
    return wanted_step_.load(std::memory_order_acquire);
  }

  // Replaces the snapshot (a lent one stops reading the lender's buffer
  // first) and clears `wanted`. `values`: as
  // WeightsSnapshot's, the elements of `ranges` of a flat buffer of
  // `total_elements` (-1: values.size(), for a whole buffer). A snapshot
  // whose values are not the ranges' size is refused (logged; the old one
  // stays).
  void Publish(int64_t steps_applied, std::vector<float> values,
               std::string tables = {}, std::vector<FlatRange> ranges = {},
               int64_t total_elements = -1);

  // Publishes the whole flat buffer `flat` (total_elements floats of host
  // memory, not owned) as it is, without a copy. The lender calls
  // TakeBack() before it changes or frees `flat`.
  void Lend(int64_t steps_applied, const float* flat, int64_t total_elements,
            std::string tables = {});
  // The lender is about to change the lent buffer. A lent snapshot that a
  // reader has taken and let go is dropped (a later reader marks a newer
  // one wanted); otherwise its values are copied first, and a reader in
  // the middle of it goes on from the copy. No-op without a lent snapshot.
  void TakeBack();
  // Whether the snapshot is lent now.
  bool lent() const;

 private:
  std::atomic<bool> wanted_{false};
  std::atomic<int64_t> wanted_step_{0};
  mutable absl::Mutex mu_;
  // A lent `snapshot` stops reading the lender's buffer: its values are
  // copied, unless nobody can read it any more (no reader holds it, and a
  // reader took it or it is being replaced): then false (drop it).
  bool Unlend(const std::shared_ptr<WeightsSnapshot>& snapshot, bool replaced)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::shared_ptr<WeightsSnapshot> snapshot_ ABSL_GUARDED_BY(mu_);
  // A reader got the lent snapshot (Get).
  bool lent_taken_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ferry

#endif  // FERRY_RING_WEIGHTS_PUBLISHER_H_
