#include "pipeline/ring_pipeline_roles.h"

namespace ferry {

PipelineRole PipelineRoleOf(int rank, int size, int stages) {
  const int whole = stages > 0 ? size / stages * stages : 0;
  if (stages <= 1 || rank >= whole) return {rank, 0, 1};
  return {rank / stages * stages, rank % stages, stages};
}

std::vector<std::vector<int>> StageHoldersOf(int size, int stages,
                                             bool state_ring) {
  std::vector<std::vector<int>> holders;
  for (int s = 0; s < stages + (state_ring ? 1 : 0); ++s) {
    std::vector<int>& ranks = holders.emplace_back();
    for (int r = 0; r < size; ++r) {
      const PipelineRole role = PipelineRoleOf(r, size, stages);
      // Without stage rings (one replica at most) every member applies the
      // whole buffer.
      if (size <= stages || s == stages || role.stages == 1 || role.stage == s)
        ranks.push_back(r);
    }
  }
  return holders;
}

}  // namespace ferry
