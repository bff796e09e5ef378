// The links of one pipeline replica's stages inside one process: stage s's
// link delivers to stage s-1's and s+1's mailboxes. For tests and the
// in-process pipeline benchmark.
//
// Thread safety: the hub and its links may be used from any threads (one
// runner per link).
#ifndef FERRY_PIPELINE_IN_MEMORY_STAGE_LINK_H_
#define FERRY_PIPELINE_IN_MEMORY_STAGE_LINK_H_

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "pipeline/stage_link.h"

namespace ferry {

class InMemoryStageHub {
 public:
  // REQUIRES: stages >= 1.
  explicit InMemoryStageHub(int stages);
  ~InMemoryStageHub();

  int stages() const { return stages_; }
  // Stage `stage`'s link, owned by the hub. REQUIRES: 0 <= stage < stages().
  StageLink& Link(int stage);

  // Ends every wait, now and later, with `status` (a stage was lost).
  void Abort(absl::Status status);

 private:
  class HubLink;
  enum Direction { kForward, kBackward };
  // (direction, receiving stage, step, micro-batch)
  using Key = std::tuple<int, int, int64_t, int>;

  absl::Status Deliver(Key key, std::vector<float> values);
  absl::StatusOr<std::vector<float>> Take(Key key, absl::Duration timeout);

  const int stages_;
  std::vector<std::unique_ptr<HubLink>> links_;
  absl::Mutex mu_;
  std::map<Key, std::vector<float>> mail_ ABSL_GUARDED_BY(mu_);
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_PIPELINE_IN_MEMORY_STAGE_LINK_H_
