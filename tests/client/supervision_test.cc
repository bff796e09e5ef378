// The supervisor's decisions: every role x (chaos or not) x exit code x
// restart budget x shutdown, and when a job without workers is given up.
#include "client/supervision.h"

#include <signal.h>

#include "common/exit_codes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;
using Kind = ExitDecision::Kind;
using Role = ProcessName::Role;

ChildExit Exit(Role role, int code, bool chaos = false, int restarts = 0,
               int max = 5) {
  ChildExit e;
  e.role = role;
  e.exit_code = code;
  e.chaos_signalled = chaos;
  e.unexpected_restarts = restarts;
  e.max_restarts = max;
  return e;
}

TEST(DescribeExitCodeTest, CodesAndSignals) {
  EXPECT_EQ(DescribeExitCode(0), "exited with code 0");
  EXPECT_EQ(DescribeExitCode(3), "exited with code 3");
  EXPECT_EQ(DescribeExitCode(128), "exited with code 128");
  EXPECT_EQ(DescribeExitCode(128 + SIGKILL), "killed by SIGKILL");
  EXPECT_EQ(DescribeExitCode(128 + SIGTERM), "killed by SIGTERM");
  EXPECT_EQ(DescribeExitCode(128 + SIGSEGV), "killed by SIGSEGV");
  EXPECT_EQ(DescribeExitCode(128 + 200), "killed by signal 200");
}

TEST(DecideOnExitTest, WorkersAreNeverRestarted) {
  for (int code : {0, 1, 3, 127, 128 + SIGKILL, 128 + SIGTERM, 128 + SIGSEGV}) {
    for (bool chaos : {false, true}) {
      const ExitDecision d = DecideOnExit(Exit(Role::kWorker, code, chaos));
      EXPECT_NE(d.kind, Kind::kRestart) << code << " " << chaos;
      EXPECT_NE(d.kind, Kind::kFail) << code << " " << chaos;
      EXPECT_FALSE(d.unexpected);
      // Reported only when it died on its own with a failure.
      EXPECT_EQ(d.kind, code != 0 && !chaos ? Kind::kReport : Kind::kIgnore)
          << code << chaos;
    }
  }
  EXPECT_THAT(DecideOnExit(Exit(Role::kWorker, 1)).reason,
              HasSubstr("exited with code 1; workers are not restarted"));
  EXPECT_EQ(DecideOnExit(Exit(Role::kWorker, 128 + SIGKILL, true)).reason,
            "killed by SIGKILL (chaos)");
}

TEST(DecideOnExitTest, ChaosDeathsOfServersRestartWithoutUsingTheBudget) {
  for (Role role : {Role::kPs, Role::kCoordinator}) {
    for (int code : {0, 1, 128 + SIGKILL, 128 + SIGTERM}) {
      for (int restarts : {0, 4, 5, 100}) {
        const ExitDecision d =
            DecideOnExit(Exit(role, code, /*chaos=*/true, restarts, 5));
        EXPECT_EQ(d.kind, Kind::kRestart) << code << " " << restarts;
        EXPECT_FALSE(d.unexpected);
        EXPECT_THAT(d.reason, HasSubstr("(chaos)"));
      }
    }
  }
}

TEST(DecideOnExitTest, UnexpectedServerDeathsRestartUpToTheBound) {
  for (Role role : {Role::kPs, Role::kCoordinator}) {
    // Any exit code but kExitConfig, 0 included (a StatefulSet restarts
    // whatever the code).
    for (int code : {0, 1, 3, 128 + SIGKILL, 128 + SIGSEGV}) {
      for (int max : {0, 1, 5}) {
        for (int restarts = 0; restarts <= max + 1; ++restarts) {
          const ExitDecision d =
              DecideOnExit(Exit(role, code, false, restarts, max));
          EXPECT_TRUE(d.unexpected);
          EXPECT_EQ(d.kind, restarts < max ? Kind::kRestart : Kind::kFail)
              << code << " " << restarts << "/" << max;
        }
      }
    }
  }
  EXPECT_THAT(
      DecideOnExit(Exit(Role::kPs, 128 + SIGSEGV, false, 1, 5)).reason,
      HasSubstr("killed by SIGSEGV unexpectedly (restart 2 of at most 5)"));
  EXPECT_THAT(DecideOnExit(Exit(Role::kCoordinator, 1, false, 5, 5)).reason,
              HasSubstr("exited with code 1 unexpectedly after 5 restarts "
                        "(--max-restarts 5)"));
}

// A process that refused its configuration would refuse it again: the job
// fails at once, whatever the role, with no restart counted.
TEST(DecideOnExitTest, ConfigErrorsAreNeverRestarted) {
  for (Role role : {Role::kWorker, Role::kPs, Role::kCoordinator}) {
    for (int restarts : {0, 4}) {
      const ExitDecision d =
          DecideOnExit(Exit(role, kExitConfig, false, restarts, 5));
      EXPECT_EQ(d.kind, Kind::kConfigError);
      EXPECT_FALSE(d.unexpected);
      EXPECT_THAT(d.reason, HasSubstr("invalid configuration, not restarted"));
    }
    // Chaos killed it: not a configuration error.
    EXPECT_NE(DecideOnExit(Exit(role, kExitConfig, true)).kind,
              Kind::kConfigError);
  }
}

TEST(DecideOnExitTest, EverythingIsExpectedWhileStopping) {
  for (Role role : {Role::kWorker, Role::kPs, Role::kCoordinator}) {
    for (int code : {0, 1, 128 + SIGKILL}) {
      ChildExit e = Exit(role, code, false, 5, 5);
      e.stopping = true;
      const ExitDecision d = DecideOnExit(e);
      EXPECT_EQ(d.kind, Kind::kIgnore);
      EXPECT_FALSE(d.unexpected);
    }
  }
}

TEST(JobHasNoWorkersLeftTest, OnlyAfterTheGraceWithNothingToCome) {
  WorkerPresence p;
  p.grace = absl::Seconds(10);
  p.without_workers = absl::Seconds(11);
  EXPECT_TRUE(JobHasNoWorkersLeft(p));
  WorkerPresence q = p;
  q.without_workers = absl::Seconds(10);
  EXPECT_FALSE(JobHasNoWorkersLeft(q));  // not past the grace yet
  q = p;
  q.live_workers = 1;
  EXPECT_FALSE(JobHasNoWorkersLeft(q));
  q = p;
  q.join_pending = true;
  EXPECT_FALSE(JobHasNoWorkersLeft(q));
  q = p;
  q.job_finished = true;
  EXPECT_FALSE(JobHasNoWorkersLeft(q));
  q = p;
  q.training_done = true;  // a long final evaluation needs no worker
  EXPECT_FALSE(JobHasNoWorkersLeft(q));
  q = p;
  q.grace = absl::ZeroDuration();
  q.without_workers = absl::Milliseconds(1);
  EXPECT_TRUE(JobHasNoWorkersLeft(q));
}

}  // namespace
}  // namespace ferry
