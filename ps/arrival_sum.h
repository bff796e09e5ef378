// The open sync step's gradient, summed as pushes arrive
// (PsShardConfig.sum_on_arrival): one buffer of the slice's size for the
// whole step instead of one per contributor.
//
// Contract:
//  - Each owned chunk is summed in the order its contributions arrive: the
//    first one is copied, later ones added. With three or more contributors
//    that order changes the rounding, so two runs of a job may differ in the
//    last bits (a sum in a fixed order needs the per-contributor buffers,
//    which is what the shard does without sum_on_arrival).
//  - Per worker it remembers which chunks it has summed and with how many
//    samples: a retried push skips them (Add returns false), a push of the
//    same worker with another sample count is refused, and the step can only
//    be applied over exactly the workers it summed (CheckSummedExactly): a
//    contribution cannot be taken out again.
//  - Reset() forgets every contribution and starts another step; the buffer
//    is kept (its contents are unspecified until a chunk's first Add).
//
// Not thread-safe: the shard guards it with its own mutex.
#ifndef FERRY_PS_ARRIVAL_SUM_H_
#define FERRY_PS_ARRIVAL_SUM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/sharding.h"
#include "ps/step_contributors.h"

namespace ferry {

class ArrivalSum {
 public:
  // `owned`: the shard's chunks in flat order (consecutive ids);
  // `slice_begin`: the flat offset of the shard's first element;
  // `slice_size`: elements in the slice.
  ArrivalSum(std::vector<Chunk> owned, int64_t slice_begin, int64_t slice_size);

  // Forgets every contribution and sums step `step` from now on.
  void Reset(int64_t step);
  int64_t step() const { return step_; }

  // Sums `values` (the chunk's length, finite: the caller checked them) as
  // `worker`'s owned chunk `index`. Returns true when summed, false when
  // this worker's chunk was summed already (a retried push: nothing
  // changes). FAILED_PRECONDITION when `worker` summed chunks of this step
  // with another `num_samples`; INVALID_ARGUMENT for an index outside the
  // owned chunks or a wrong length. Nothing changes on error.
  absl::StatusOr<bool> Add(absl::string_view worker, int64_t num_samples,
                           size_t index, absl::Span<const float> values);

  // OK when the workers summed are exactly `set` (with their num_samples)
  // and each summed every owned chunk once; else FAILED_PRECONDITION naming
  // the first difference (`what` prefixes the message).
  absl::Status CheckSummedExactly(absl::string_view what,
                                  absl::Span<const PsContributor> set) const;

  // The sum of this step's contributions (valid for the chunks summed; the
  // buffer is allocated on the first Add and kept across Reset).
  std::vector<float>& sum() { return sum_; }

 private:
  struct Worker {
    int64_t num_samples = 0;
    std::vector<bool> summed;  // by owned chunk index
    int64_t chunks = 0;        // true entries of `summed`
  };

  const std::vector<Chunk> owned_;
  const int64_t slice_begin_;
  const int64_t slice_size_;
  int64_t step_ = 0;
  std::vector<float> sum_;
  std::vector<int32_t> contributions_;  // by owned chunk index
  absl::flat_hash_map<std::string, Worker> workers_;
};

}  // namespace ferry

#endif  // FERRY_PS_ARRIVAL_SUM_H_
