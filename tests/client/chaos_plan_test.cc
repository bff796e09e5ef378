// The --chaos parser and its check against the cluster: every action,
// target and unit, the sort, and each kind of malformed event.
#include "client/chaos_plan.h"

#include <signal.h>

#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;
using Role = ProcessName::Role;

std::vector<std::string> Texts(const std::vector<ChaosEvent>& plan) {
  std::vector<std::string> out;
  for (const ChaosEvent& e : plan) out.push_back(e.ToString());
  return out;
}

TEST(ChaosTimeTest, Units) {
  EXPECT_EQ(*ParseChaosTime("0s"), absl::ZeroDuration());
  EXPECT_EQ(*ParseChaosTime("0ms"), absl::ZeroDuration());
  EXPECT_EQ(*ParseChaosTime("30s"), absl::Seconds(30));
  EXPECT_EQ(*ParseChaosTime("1.5s"), absl::Milliseconds(1500));
  EXPECT_EQ(*ParseChaosTime("500ms"), absl::Milliseconds(500));
  EXPECT_EQ(*ParseChaosTime("2.5ms"), absl::Microseconds(2500));
  EXPECT_EQ(*ParseChaosTime("2m"), absl::Minutes(2));
  EXPECT_EQ(*ParseChaosTime("0.25m"), absl::Seconds(15));
  EXPECT_EQ(*ParseChaosTime("0.1s"),
            absl::Milliseconds(100));  // exact, no float rounding
  EXPECT_EQ(*ParseChaosTime("1.000000001s"), absl::Nanoseconds(1000000001));
  EXPECT_EQ(*ParseChaosTime("007s"), absl::Seconds(7));
  EXPECT_EQ(*ParseChaosTime("1440m"), absl::Hours(24));
  EXPECT_EQ(*ParseChaosTime("86400s"), absl::Hours(24));
  EXPECT_EQ(*ParseChaosTime("86400000ms"), absl::Hours(24));
  EXPECT_EQ(*ParseChaosTime("0.999999999m"), absl::Nanoseconds(59999999940));
}

TEST(ChaosTimeTest, Rejects) {
  for (const char* bad : {"",
                          "s",
                          "ms",
                          "m",
                          "30",
                          "1.5",
                          "30h",
                          "30sec",
                          "30S",
                          "-1s",
                          "-0s",
                          "+1s",
                          "1.s",
                          ".5s",
                          "1..5s",
                          "1.5.5s",
                          "1e3s",
                          " 1s",
                          "1 s",
                          "x1s",
                          "1,5s",
                          "1.0000000001s",
                          "86401s",
                          "1441m",
                          "1440.1m",
                          "86400000.5ms",
                          "99999999999999999999s"}) {
    auto t = ParseChaosTime(bad);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument)
        << "\"" << bad << "\"";
  }
  EXPECT_THAT(ParseChaosTime("30").status().message(),
              HasSubstr("needs a unit"));
  EXPECT_THAT(ParseChaosTime("-1s").status().message(), HasSubstr("negative"));
  EXPECT_THAT(ParseChaosTime("25h").status().message(),
              HasSubstr("needs a unit"));
  EXPECT_THAT(ParseChaosTime("90000s").status().message(),
              HasSubstr("above 24h"));
}

TEST(ProcessNameTest, ParsesAndPrints) {
  struct Case {
    const char* text;
    Role role;
    int index;
  };
  for (const Case& c :
       {Case{"coordinator", Role::kCoordinator, 0}, Case{"ps0", Role::kPs, 0},
        Case{"ps7", Role::kPs, 7}, Case{"ps13", Role::kPs, 13},
        Case{"worker0", Role::kWorker, 0}, Case{"worker1", Role::kWorker, 1},
        Case{"worker999999", Role::kWorker, 999999}}) {
    auto name = ParseProcessName(c.text);
    ASSERT_TRUE(name.ok()) << c.text << ": " << name.status();
    EXPECT_EQ(name->role, c.role) << c.text;
    EXPECT_EQ(name->index, c.index) << c.text;
    EXPECT_EQ(name->ToString(), c.text);
  }
}

TEST(ProcessNameTest, Rejects) {
  for (const char* bad :
       {"", "worker", "ps", "worker-1", "worker+1", "worker01", "ps00",
        "worker1000000", "worker1.5", "Worker1", "PS1", "coordinator0", "coord",
        "shard0", "w1", "worker 1", "1", "worker1x"}) {
    auto name = ParseProcessName(bad);
    EXPECT_EQ(name.status().code(), absl::StatusCode::kInvalidArgument)
        << "\"" << bad << "\"";
  }
  EXPECT_THAT(ParseProcessName("shard0").status().message(),
              HasSubstr("want coordinator, psK or workerK"));
  EXPECT_THAT(ParseProcessName("worker01").status().message(),
              HasSubstr("leading zeros"));
}

TEST(ChaosPlanTest, EmptySpecIsEmptyPlan) {
  EXPECT_TRUE(ParseChaosPlan("")->empty());
  EXPECT_TRUE(ParseChaosPlan("  \t ")->empty());
}

TEST(ChaosPlanTest, TheExampleFromTheHelp) {
  auto plan = ParseChaosPlan(
      "join:2@30s,kill:worker1@45s,term:worker0@60s,kill:ps1@80s,kill:"
      "coordinator@90s");
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->size(), 5u);
  EXPECT_EQ((*plan)[0].action, ChaosAction::kJoin);
  EXPECT_EQ((*plan)[0].count, 2);
  EXPECT_EQ((*plan)[0].at, absl::Seconds(30));
  EXPECT_EQ((*plan)[1].action, ChaosAction::kKill);
  EXPECT_EQ((*plan)[1].target, (ProcessName{Role::kWorker, 1}));
  EXPECT_EQ((*plan)[2].action, ChaosAction::kTerm);
  EXPECT_EQ((*plan)[2].target, (ProcessName{Role::kWorker, 0}));
  EXPECT_EQ((*plan)[3].target, (ProcessName{Role::kPs, 1}));
  EXPECT_EQ((*plan)[4].target, (ProcessName{Role::kCoordinator, 0}));
  EXPECT_EQ((*plan)[4].at, absl::Seconds(90));
  EXPECT_THAT(Texts(*plan),
              ::testing::ElementsAre("join:2@30s", "kill:worker1@45s",
                                     "term:worker0@60s", "kill:ps1@80s",
                                     "kill:coordinator@90s"));
}

TEST(ChaosPlanTest, EveryActionAndItsSignal) {
  auto plan = ParseChaosPlan(
      "kill:ps0@1s,term:ps0@2s,stop:ps0@3s,cont:ps0@4s,join:1@5s");
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::vector<std::pair<ChaosAction, int>> want = {
      {ChaosAction::kKill, SIGKILL},
      {ChaosAction::kTerm, SIGTERM},
      {ChaosAction::kStop, SIGSTOP},
      {ChaosAction::kCont, SIGCONT},
      {ChaosAction::kJoin, 0}};
  ASSERT_EQ(plan->size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ((*plan)[i].action, want[i].first) << i;
    EXPECT_EQ(ChaosSignal((*plan)[i].action), want[i].second) << i;
  }
}

TEST(ChaosPlanTest, SortedByTimeStableForTies) {
  auto plan = ParseChaosPlan(
      "kill:worker3@2m,join:2@500ms,term:worker0@1.5s,"
      "kill:worker2@500ms,stop:coordinator@0s,cont:coordinator@1.5s");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(
      Texts(*plan),
      ::testing::ElementsAre("stop:coordinator@0s", "join:2@500ms",
                             "kill:worker2@500ms", "term:worker0@1500ms",
                             "cont:coordinator@1500ms", "kill:worker3@120s"));
}

TEST(ChaosPlanTest, WhitespaceAroundEventsAndParts) {
  auto plan = ParseChaosPlan("  join : 1 @ 1s ,\tkill:worker0@ 2s ");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(Texts(*plan),
              ::testing::ElementsAre("join:1@1s", "kill:worker0@2s"));
}

TEST(ChaosPlanTest, ToStringRoundTrips) {
  auto plan = ParseChaosPlan(
      "join:1000@0s,kill:worker12@1.000000001s,term:ps3@2.5ms,stop:coordinator@"
      "0.1s,"
      "cont:coordinator@1440m");
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<std::string> texts = Texts(*plan);
  const std::string joined = absl::StrJoin(texts, ",");
  auto again = ParseChaosPlan(joined);
  ASSERT_TRUE(again.ok()) << joined << ": " << again.status();
  ASSERT_EQ(again->size(), plan->size());
  for (size_t i = 0; i < plan->size(); ++i) {
    EXPECT_EQ((*again)[i].at, (*plan)[i].at) << joined;
    EXPECT_EQ((*again)[i].action, (*plan)[i].action) << joined;
    EXPECT_EQ((*again)[i].target, (*plan)[i].target) << joined;
    EXPECT_EQ((*again)[i].count, (*plan)[i].count) << joined;
  }
}

struct BadSpec {
  const char* spec;
  const char* message;  // a substring of the error
};

TEST(ChaosPlanTest, StepsSortByStepAndPrintBack) {
  auto plan =
      ParseChaosPlan("kill:ps1@step300,join:1@step20,term:worker0@ step20");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(Texts(*plan),
              ::testing::ElementsAre("join:1@step20", "term:worker0@step20",
                                     "kill:ps1@step300"));
  EXPECT_EQ((*plan)[2].at_step, 300);
}

TEST(ChaosPlanTest, RejectsWithAClearMessage) {
  const BadSpec cases[] = {
      {"kill:worker0@step", "a step needs a count"},
      {"kill:worker0@step-1", "a step needs a count"},
      {"kill:worker0@step1x", "a step needs a count"},
      {"kill:worker0@step5,kill:worker1@2s", "times and steps cannot be mixed"},
      {",", "event 1 \"\": empty event"},
      {"kill:worker0@1s,", "event 2 \"\": empty event"},
      {"kill:worker0@1s,,kill:worker1@2s", "event 2"},
      {"kill:worker0", "missing @TIME"},
      {"kill:worker0@", "needs a unit"},
      {"kill:worker0@1s@2s", "more than one '@'"},
      {"killworker0@1s", "missing ':'"},
      {"@1s", "missing ':'"},
      {"explode:worker0@1s", "unknown action \"explode\""},
      {"KILL:worker0@1s", "unknown action \"KILL\""},
      {":worker0@1s", "unknown action \"\""},
      {"join:worker1@1s",
       "join takes a count of workers to start (join:N), not \"worker1\""},
      {"join:@1s", "join takes a count"},
      {"join:-1@1s", "join takes a count"},
      {"join:1.5@1s", "join takes a count"},
      {"join:0@1s", "join count must be 1..1000"},
      {"join:1001@1s", "join count must be 1..1000"},
      {"join:01@1s", "join count must be 1..1000"},
      {"kill:3@1s", "bad target \"3\""},
      {"kill:@1s", "bad target \"\""},
      {"kill:worker@1s", "bad target \"worker\""},
      {"kill:worker-1@1s", "bad target \"worker-1\""},
      {"term:ps@1s", "bad target \"ps\""},
      {"stop:shard1@1s", "want coordinator, psK or workerK"},
      {"kill:worker0:ps1@1s", "bad target \"worker0:ps1\""},
      {"kill:worker0@-5s", "negative"},
      {"kill:worker0@5", "needs a unit"},
      {"kill:worker0@5h", "needs a unit"},
      {"kill:worker0@abc", "needs a unit"},
      {"kill:worker0@xs", "want digits"},
      {"kill:worker0@1s,explode:ps0@2s", "event 2 \"explode:ps0@2s\""},
  };
  for (const BadSpec& c : cases) {
    auto plan = ParseChaosPlan(c.spec);
    ASSERT_FALSE(plan.ok()) << c.spec;
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument)
        << c.spec;
    EXPECT_THAT(plan.status().message(), HasSubstr(c.message)) << c.spec;
    EXPECT_THAT(plan.status().message(), HasSubstr("--chaos event")) << c.spec;
  }
}

TEST(ValidateChaosPlanTest, TargetsMustExistWhenTheEventFires) {
  auto check = [](const char* spec, int workers, int shards) {
    auto plan = ParseChaosPlan(spec);
    EXPECT_TRUE(plan.ok()) << spec << ": " << plan.status();
    return plan.ok() ? ValidateChaosPlan(*plan, workers, shards)
                     : plan.status();
  };
  EXPECT_TRUE(check("", 1, 0).ok());
  EXPECT_TRUE(
      check("kill:worker1@1s,kill:ps1@2s,kill:coordinator@3s", 2, 2).ok());
  EXPECT_TRUE(
      check("kill:coordinator@1s", 1, 0).ok());  // ring mode has a coordinator
  // Joined workers continue the numbering, in time order.
  EXPECT_TRUE(check("join:2@10s,kill:worker3@11s", 2, 1).ok());
  EXPECT_TRUE(check("kill:worker3@11s,join:2@10s", 2, 1).ok());  // sorted first
  EXPECT_TRUE(check("join:1@10s,kill:worker2@10s", 2, 1)
                  .ok());  // same time, spec order
  EXPECT_TRUE(check("join:1@1s,join:1@2s,term:worker3@3s", 2, 1).ok());

  const BadSpec bad[] = {
      {"kill:ps2@1s", "only 2 shards (ps0..ps1)"},
      {"kill:worker2@1s",
       "only 2 workers (worker0..worker1) have been started by then"},
      {"join:2@10s,kill:worker4@11s", "only 4 workers"},
      {"kill:worker2@9s,join:1@10s", "join more earlier"},
      {"kill:worker2@10s,join:1@10s",
       "only 2 workers"},  // same time, kill first
  };
  for (const BadSpec& c : bad) {
    absl::Status s = check(c.spec, 2, 2);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.spec;
    EXPECT_THAT(s.message(), HasSubstr(c.message)) << c.spec;
  }
  absl::Status ring = check("stop:ps0@1s", 2, 0);
  EXPECT_EQ(ring.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ring.message(), HasSubstr("no PS shards (ring mode)"));
  EXPECT_THAT(ring.message(), HasSubstr("stop:ps0@1s"));
}

}  // namespace
}  // namespace ferry
