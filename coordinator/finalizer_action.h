// What the coordinator's finalizer thread does next: chosen under the
// coordinator's lock, run without it (Coordinator::FinalizerLoop).
#ifndef FERRY_COORDINATOR_FINALIZER_ACTION_H_
#define FERRY_COORDINATOR_FINALIZER_ACTION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ferry/v1/coordinator.pb.h"

namespace ferry {

struct FinalizerAction {
  enum class Kind {
    kStop,          // the coordinator stops: end the thread
    kWatchShards,   // idle: look for a shard that restarted behind the job
    kFence,         // send `generation` to the shards as their fence
    kRecover,       // bring the shards back to one consistent step (`why`)
    kFinalizeStep,  // apply step `number` on the shards
  };
  Kind kind = Kind::kStop;
  // kFence: the membership generation; kFinalizeStep: the generation the
  // step's pushes carry.
  int64_t generation = 0;
  std::string why;  // kRecover
  // kFinalizeStep: the step, whether a forced checkpoint precedes it (the
  // shards are still at version `number`), and who contributed.
  int64_t number = 0;
  bool forced_checkpoint = false;
  std::vector<v1::Contributor> contributors;
};

}  // namespace ferry

#endif  // FERRY_COORDINATOR_FINALIZER_ACTION_H_
