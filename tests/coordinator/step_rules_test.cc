// StepRules over every combination of the settings it reads: each valid
// job's answers as a row of a table, each invalid one refused.
#include "coordinator/step_rules.h"

#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

struct Settings {
  v1::Mode mode;
  v1::Consistency consistency;
  int quorum;
  int stages;
  bool sum_on_arrival;
  bool finalize_on_push;
  bool memory_budget;
};

std::string Name(const Settings& s) {
  return absl::StrCat(v1::Mode_Name(s.mode), " ",
                      v1::Consistency_Name(s.consistency), " quorum ", s.quorum,
                      " stages ", s.stages, " arrival ", s.sum_on_arrival,
                      " fop ", s.finalize_on_push, " budget ", s.memory_budget);
}

v1::JobSpec JobOf(const Settings& s) {
  v1::JobSpec job;
  job.set_mode(s.mode);
  job.set_consistency(s.consistency);
  job.set_sync_quorum(s.quorum);
  job.set_pipeline_stages(s.stages);
  job.set_sum_on_arrival(s.sum_on_arrival);
  if (s.memory_budget) job.set_worker_memory_budget_bytes(1 << 20);
  return job;
}

std::vector<Settings> EveryCombination() {
  std::vector<Settings> all;
  for (v1::Mode mode : {v1::MODE_PS, v1::MODE_RING, v1::MODE_HYBRID})
    for (v1::Consistency c :
         {v1::CONSISTENCY_SYNC, v1::CONSISTENCY_ASYNC, v1::CONSISTENCY_SSP})
      for (int quorum : {0, 1})
        for (int stages : {1, 2})
          for (bool arrival : {false, true})
            for (bool fop : {false, true})
              for (bool budget : {false, true})
                all.push_back({mode, c, quorum, stages, arrival, fop, budget});
  return all;
}

// Why a combination is refused, or "" when it runs.
std::string Refusal(const Settings& s) {
  const bool ring = s.mode != v1::MODE_PS;
  const bool sync = s.consistency == v1::CONSISTENCY_SYNC;
  if (ring && (!sync || s.quorum > 0)) return "mode is synchronous";
  if (s.stages > 1 && s.mode == v1::MODE_HYBRID) return "hybrid mode trains";
  if (s.stages > 1 && !sync) return "needs --consistency sync";
  if (s.stages > 1 && s.quorum > 0) return "cannot take --sync-quorum";
  return "";
}

TEST(StepRulesTest, InvalidCombinationsAreRefusedWithTheirReason) {
  int refused = 0;
  for (const Settings& s : EveryCombination()) {
    SCOPED_TRACE(Name(s));
    const absl::StatusOr<StepRules> rules =
        StepRules::For(JobOf(s), s.finalize_on_push);
    const std::string why = Refusal(s);
    if (why.empty()) {
      EXPECT_TRUE(rules.ok()) << rules.status();
      continue;
    }
    ++refused;
    ASSERT_FALSE(rules.ok());
    EXPECT_TRUE(absl::IsInvalidArgument(rules.status()));
    EXPECT_NE(rules.status().message().find(why), std::string::npos)
        << rules.status();
  }
  EXPECT_GT(refused, 0);
}

// The answers of every valid combination, each from its definition.
TEST(StepRulesTest, EveryValidCombinationAnswersAsItsModeDefines) {
  int valid = 0;
  for (const Settings& s : EveryCombination()) {
    if (!Refusal(s).empty()) continue;
    ++valid;
    SCOPED_TRACE(Name(s));
    const absl::StatusOr<StepRules> r =
        StepRules::For(JobOf(s), s.finalize_on_push);
    ASSERT_TRUE(r.ok()) << r.status();
    const bool ps = s.mode == v1::MODE_PS;
    const bool ring = s.mode == v1::MODE_RING;
    const bool hybrid = s.mode == v1::MODE_HYBRID;
    const bool sync = s.consistency == v1::CONSISTENCY_SYNC;
    const bool pipeline = s.stages > 1;
    EXPECT_EQ(r->sync(), sync);
    EXPECT_EQ(r->bounded_staleness(), s.consistency == v1::CONSISTENCY_SSP);
    EXPECT_EQ(r->has_shards(), !ring);
    EXPECT_EQ(r->shards_apply_finalized_steps(), !ring && sync);
    EXPECT_EQ(r->members_hold_weights(), !ps);
    EXPECT_EQ(r->leases_name_members(), !ps || pipeline);
    EXPECT_EQ(r->members_carry_their_tasks(), pipeline);
    const bool aborts = !ps || pipeline || s.sum_on_arrival;
    EXPECT_EQ(r->lost_member_aborts_step(), aborts);
    EXPECT_EQ(r->steps_recoverable_from_shards(), ps && aborts);
    EXPECT_EQ(r->pushes_without_samples(), ps && pipeline);
    const bool fop = !ring && sync && s.quorum == 0 && s.finalize_on_push;
    EXPECT_EQ(r->finalize_on_push(), fop);
    EXPECT_EQ(r->ring_beside_shards(), hybrid);
    EXPECT_EQ(r->fence_shards_per_generation(), fop && !hybrid);
    // 5 members of 2-stage replicas: a PS pipeline under a memory budget
    // trains the 2 whole replicas only; every other job all 5.
    const bool whole_replicas = ps && pipeline && s.memory_budget;
    EXPECT_EQ(r->TrainedMembers(5), whole_replicas ? 4 : 5);
    // Of 4 trained members, a PS pipeline keeps its 2 whole replicas in
    // a step even without samples; a ring keeps everyone; PS no one.
    const int64_t kept = r->MembersKeptWithoutSamples(4);
    EXPECT_EQ(kept, ps && pipeline ? 4 : 0);
    EXPECT_EQ(r->KeepsMemberWithoutSamples(3, kept), !ps || pipeline);
    EXPECT_EQ(r->KeepsMemberWithoutSamples(4, kept), !ps);
  }
  // PS: 24 sync (no quorum with a pipeline) + 32 async/ssp (no pipeline);
  // ring: 16 (sync, no quorum); hybrid: 8 (and no pipeline).
  EXPECT_EQ(valid, 80);
}

}  // namespace
}  // namespace ferry
