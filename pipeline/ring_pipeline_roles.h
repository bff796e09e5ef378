// Who does what in a ring pipeline: each member's place among the replicas
// and stages, and which members hold each flat range current after a step.
// The workers use them to train and exchange (worker/pipeline_lease_trainer),
// the coordinator to know whether a lost member took a stage's only current
// copies with it.
//
// Pure functions. Thread safety: stateless.
#ifndef FERRY_PIPELINE_RING_PIPELINE_ROLES_H_
#define FERRY_PIPELINE_RING_PIPELINE_ROLES_H_

#include <vector>

namespace ferry {

// Where rank `rank` of a ring of `size` members sits in a job of `stages`
// stages: its replica's first rank, its stage, and the replica's stage
// count (1 for a member after the last whole replica). Pure.
struct PipelineRole {
  int first_rank = 0;
  int stage = 0;
  int stages = 1;
  bool operator==(const PipelineRole&) const = default;
};
PipelineRole PipelineRoleOf(int rank, int size, int stages);

// The ranks that hold each of a ring pipeline's ranges current after a
// step (ExchangeStep.stage_holders): with stage rings (more members than
// stages), stage s's members and the members training alone, and every
// member for the state range (`state_ring`: a model with BatchNorm);
// without, every member for every range (the whole buffer is all-reduced).
// `stages` + `state_ring` lists, ranks ascending. Pure.
std::vector<std::vector<int>> StageHoldersOf(int size, int stages,
                                             bool state_ring = false);

}  // namespace ferry

#endif  // FERRY_PIPELINE_RING_PIPELINE_ROLES_H_
