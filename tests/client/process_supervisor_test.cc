// ProcessSupervisor with tiny real processes (/bin/sh, /bin/sleep) standing
// in for shards, the coordinator and workers: chaos signals, restarts with
// the same command line, the restart bound, joins, stop/cont, the cluster
// file, and children dying with their parent (PR_SET_PDEATHSIG).
#include "client/process_supervisor.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/wait_until.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;
using Role = ProcessName::Role;

class ProcessSupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(
        ::testing::TempDir(), "/supervisor-",
        ::testing::UnitTest::GetInstance()->current_test_info()->name(), "-",
        getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  SupervisorOptions Options() {
    SupervisorOptions o;
    o.restart_delay = absl::Milliseconds(50);
    o.max_restarts = 2;
    o.cluster_file = dir_ + "/cluster.json";
    o.log_dir = dir_;
    o.worker_argv = {"/bin/sleep", "30"};
    o.print = [this](const std::string& line) { printed_ += line + "\n"; };
    return o;
  }

  nlohmann::json Cluster() {
    std::ifstream in(dir_ + "/cluster.json");
    return nlohmann::json::parse(in);
  }
  nlohmann::json Entry(const std::string& name) {
    for (const auto& p : Cluster()) {
      if (p["name"] == name) return p;
    }
    return nullptr;
  }
  static std::string Slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  // Ticks until `done` (at most 10 s) or a Tick fails; the last Tick
  // status.
  static absl::Status TickUntil(ProcessSupervisor& s,
                                const std::function<bool()>& done) {
    absl::Status last;
    const absl::Status waited = testutil::WaitUntil(
        "the supervised processes to reach the expected state",
        [&] {
          if (done()) return true;
          last = s.Tick(absl::Now());
          return !last.ok();
        },
        absl::Seconds(10));
    if (!last.ok()) return last;
    EXPECT_TRUE(waited.ok()) << waited;
    return last;
  }

  static ChaosEvent Event(const std::string& spec) {
    auto plan = ParseChaosPlan(spec);
    EXPECT_TRUE(plan.ok() && plan->size() == 1) << spec;
    return plan.ok() && !plan->empty() ? (*plan)[0] : ChaosEvent();
  }

  std::string dir_;
  std::string printed_;
};

TEST_F(ProcessSupervisorTest, ChaosKilledShardRestartsWithTheSameCommandLine) {
  ProcessSupervisor s(Options(), absl::Now());
  ASSERT_TRUE(s.StartServer({Role::kPs, 0}, "127.0.0.1:1234",
                            {"/bin/sh", "-c",
                             "echo up $0 $1; exec /bin/sleep 30", "a", "b"})
                  .ok());
  const int first_pid = Entry("ps0")["pid"];
  EXPECT_EQ(Entry("ps0")["status"], "running");
  EXPECT_EQ(Entry("ps0")["address"], "127.0.0.1:1234");
  EXPECT_EQ(Entry("ps0")["role"], "ps");
  EXPECT_EQ(Entry("ps0")["index"], 0);
  EXPECT_TRUE(Entry("ps0")["exit_code"].is_null());

  // Let it print before it is killed.
  ASSERT_TRUE(TickUntil(s, [&] {
                return Slurp(dir_ + "/ps0.log") == "up a b\n";
              }).ok());
  ASSERT_TRUE(s.Apply(Event("kill:ps0@0s"), absl::Now()).ok());
  ASSERT_TRUE(TickUntil(s, [&] {
                return Entry("ps0")["status"] == "restarting";
              }).ok());
  EXPECT_EQ(Entry("ps0")["exit_code"], 128 + SIGKILL);
  EXPECT_NE(s.NextRestart(), absl::InfiniteFuture());
  ASSERT_TRUE(
      TickUntil(s, [&] { return Entry("ps0")["status"] == "running"; }).ok());
  EXPECT_NE(Entry("ps0")["pid"], first_pid);
  EXPECT_EQ(Entry("ps0")["restarts"], 1);
  EXPECT_EQ(s.RestartsJson(), nlohmann::json({{"ps0", 1}}));
  EXPECT_EQ(s.NextRestart(), absl::InfiniteFuture());

  const nlohmann::json events = s.ChaosEventsJson();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["action"], "kill");
  EXPECT_EQ(events[0]["target"], "ps0");
  EXPECT_EQ(events[0]["pid"], first_pid);
  EXPECT_EQ(events[0]["result"], "signalled");
  EXPECT_THAT(printed_, HasSubstr("ps0 (pid"));
  EXPECT_THAT(printed_,
              HasSubstr("killed by SIGKILL (chaos); restarting in 50ms"));
  EXPECT_THAT(printed_, HasSubstr("ps0 restarted (restart 1)"));

  // Same command line, same log (appended, with a marker between).
  ASSERT_TRUE(TickUntil(s, [&] {
                const std::string log = Slurp(dir_ + "/ps0.log");
                return log.find("up a b") != log.rfind("up a b");  // twice
              }).ok());
  const std::string log = Slurp(dir_ + "/ps0.log");
  EXPECT_THAT(log,
              HasSubstr("up a b\n\n==== ferry local: restart 1 of ps0 at"));
  EXPECT_EQ(log.rfind("up a b"), log.size() - std::string("up a b\n").size())
      << log;
}

TEST_F(ProcessSupervisorTest, UnexpectedDeathsRestartUpToTheBoundThenFail) {
  ProcessSupervisor s(Options(), absl::Now());  // max_restarts 2
  ASSERT_TRUE(s.StartServer({Role::kCoordinator, 0}, "127.0.0.1:1",
                            {"/bin/sh", "-c", "exit 3"})
                  .ok());
  EXPECT_EQ(s.coordinator_starts(), 1);
  absl::Status failure = TickUntil(s, [] { return false; });
  EXPECT_EQ(failure.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(
      failure.message(),
      HasSubstr(
          "coordinator exited with code 3 unexpectedly after 2 restarts"));
  EXPECT_EQ(s.coordinator_starts(), 3);
  EXPECT_EQ(s.RestartsJson(), nlohmann::json({{"coordinator", 2}}));
  EXPECT_EQ(Entry("coordinator")["status"], "exited");
  EXPECT_EQ(Entry("coordinator")["exit_code"], 3);
}

TEST_F(ProcessSupervisorTest, ConfigErrorFailsAtOnceWithTheLogTail) {
  ProcessSupervisor s(Options(), absl::Now());
  ASSERT_TRUE(s.StartServer({Role::kCoordinator, 0}, "127.0.0.1:1",
                            {"/bin/sh", "-c",
                             "echo starting; echo model spec is bad; exit 2"})
                  .ok());
  absl::Status failure = TickUntil(s, [] { return false; });
  EXPECT_EQ(failure.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(failure.message(),
              HasSubstr("coordinator refused its configuration"));
  EXPECT_THAT(failure.message(), HasSubstr("model spec is bad"));
  EXPECT_EQ(s.coordinator_starts(), 1);  // never restarted
  EXPECT_EQ(s.RestartsJson(), nlohmann::json({{"coordinator", 0}}));
}

TEST_F(ProcessSupervisorTest, WorkersAreReportedNotRestarted) {
  SupervisorOptions o = Options();
  o.worker_argv = {"/bin/sh", "-c", "exit 1"};
  ProcessSupervisor s(std::move(o), absl::Now());
  ASSERT_TRUE(s.StartWorker().ok());
  EXPECT_EQ(Entry("worker0")["address"], "");
  ASSERT_TRUE(TickUntil(s, [&] { return s.LiveWorkers() == 0; }).ok());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(s.Tick(absl::Now()).ok());
  EXPECT_EQ(Entry("worker0")["status"], "exited");
  EXPECT_EQ(Entry("worker0")["exit_code"], 1);
  EXPECT_EQ(Entry("worker0")["restarts"], 0);
  EXPECT_EQ(s.NextRestart(), absl::InfiniteFuture());
  EXPECT_EQ(s.RestartsJson(), nlohmann::json::object());
  EXPECT_THAT(printed_,
              HasSubstr("exited with code 1; workers are not restarted"));
}

// Colocated shards: a shard process that trains counts as a live worker
// (so the job is not "without workers") and is restarted like a shard.
TEST_F(ProcessSupervisorTest, ShardsThatTrainCountAsLiveWorkers) {
  SupervisorOptions o = Options();
  o.shards_train = true;
  ProcessSupervisor s(std::move(o), absl::Now());
  ASSERT_TRUE(
      s.StartServer({Role::kPs, 0}, "127.0.0.1:1", {"/bin/sleep", "30"}).ok());
  EXPECT_EQ(s.LiveWorkers(), 1);
  ASSERT_TRUE(
      s.Apply({absl::ZeroDuration(), -1, ChaosAction::kKill, {Role::kPs, 0}, 0},
              absl::Now())
          .ok());
  ASSERT_TRUE(TickUntil(s, [&] { return s.LiveWorkers() == 0; }).ok());
  ASSERT_TRUE(TickUntil(s, [&] { return s.LiveWorkers() == 1; }).ok());
  EXPECT_EQ(Entry("ps0")["restarts"], 1);
}

TEST_F(ProcessSupervisorTest, JoinStopContTermAndStopAll) {
  ProcessSupervisor s(Options(), absl::Now());
  ASSERT_TRUE(s.StartWorker().ok());
  ASSERT_TRUE(s.Apply(Event("join:2@1s"), absl::Now()).ok());
  EXPECT_EQ(s.workers_started(), 3);
  EXPECT_EQ(s.LiveWorkers(), 3);
  ASSERT_EQ(Cluster().size(), 3u);
  EXPECT_EQ(Cluster()[2]["name"], "worker2");
  nlohmann::json events = s.ChaosEventsJson();
  ASSERT_EQ(events.size(), 2u);  // one per started worker
  EXPECT_EQ(events[0]["target"], "worker1");
  EXPECT_EQ(events[1]["target"], "worker2");
  EXPECT_EQ(events[1]["result"], "started");
  EXPECT_EQ(events[1]["pid"], Entry("worker2")["pid"]);
  EXPECT_EQ(events[1]["planned_seconds"], 1.0);

  ASSERT_TRUE(s.Apply(Event("stop:worker1@2s"), absl::Now()).ok());
  EXPECT_EQ(Entry("worker1")["status"], "stopped");
  EXPECT_EQ(s.LiveWorkers(), 3);  // a stopped worker still counts
  ASSERT_TRUE(s.Apply(Event("cont:worker1@3s"), absl::Now()).ok());
  EXPECT_EQ(Entry("worker1")["status"], "running");

  ASSERT_TRUE(s.Apply(Event("term:worker0@4s"), absl::Now()).ok());
  ASSERT_TRUE(TickUntil(s, [&] { return s.LiveWorkers() == 2; }).ok());
  EXPECT_EQ(Entry("worker0")["status"], "killed");  // sleep dies of SIGTERM
  EXPECT_EQ(Entry("worker0")["exit_code"], 128 + SIGTERM);
  // A target that is gone: recorded, nothing sent.
  ASSERT_TRUE(s.Apply(Event("kill:worker0@5s"), absl::Now()).ok());
  events = s.ChaosEventsJson();
  EXPECT_EQ(events.back()["result"], "not running");
  EXPECT_TRUE(events.back()["pid"].is_null());

  ASSERT_TRUE(s.Apply(Event("stop:worker2@6s"), absl::Now()).ok());
  s.StopAll();  // a stopped process is continued so that it gets SIGTERM
  for (const auto& p : Cluster()) {
    EXPECT_EQ(p["status"], "killed") << p.dump();
    EXPECT_EQ(p["exit_code"], 128 + SIGTERM) << p.dump();
  }
  EXPECT_EQ(s.LiveWorkers(), 0);
  EXPECT_TRUE(s.Tick(absl::Now()).ok());
}

bool ProcessIsGone(pid_t pid) {
  // Dead and reaped, or a zombie waiting for its new parent to reap it.
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(stat, line)) return true;
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() &&
         line[paren + 2] == 'Z';
}

TEST(ChildProcessTest, ChildrenDieWithTheirParent) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t parent = fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {
    auto child = ChildProcess::Spawn({"/bin/sleep", "30"}, "/dev/null");
    const pid_t pid = child.ok() ? child->pid() : -1;
    (void)!write(fds[1], &pid, sizeof(pid));
    pause();
    _exit(0);
  }
  pid_t grandchild = -1;
  ASSERT_EQ(read(fds[0], &grandchild, sizeof(grandchild)), sizeof(grandchild));
  close(fds[0]);
  close(fds[1]);
  ASSERT_GT(grandchild, 0);
  EXPECT_FALSE(ProcessIsGone(grandchild));
  kill(parent, SIGKILL);
  waitpid(parent, nullptr, 0);
  const absl::Status gone = testutil::WaitUntil(
      "the grandchild to die with its parent",
      [&] { return ProcessIsGone(grandchild); }, absl::Seconds(5));
  EXPECT_TRUE(gone.ok()) << gone;
  if (!ProcessIsGone(grandchild)) kill(grandchild, SIGKILL);
}

// Stop after the caller's own SIGTERM sends no second one (a second SIGTERM
// ends a ferry-worker at once, a colocated one before its shard's last
// checkpoint): a process that outlives the grace is killed, not terminated.
TEST(ChildProcessTest, StopAfterTheCallersSigtermSendsNoSecond) {
  auto told = ChildProcess::Spawn({"/bin/sleep", "30"}, "/dev/null");
  ASSERT_TRUE(told.ok()) << told.status();
  EXPECT_EQ(told->Stop(absl::Milliseconds(100), /*terminated=*/true),
            128 + SIGKILL);
  auto asked = ChildProcess::Spawn({"/bin/sleep", "30"}, "/dev/null");
  ASSERT_TRUE(asked.ok()) << asked.status();
  EXPECT_EQ(asked->Stop(absl::Seconds(5)), 128 + SIGTERM);
}

// Peak memory: VmHWM while a child runs, the kernel's ru_maxrss once it
// is reaped (dd touches its whole 64 MiB block while copying it).
TEST(ChildProcessTest, PeakMemoryWhileRunningAndAtExit) {
  auto sleeper = ChildProcess::Spawn({"/bin/sleep", "30"}, "/dev/null");
  ASSERT_TRUE(sleeper.ok()) << sleeper.status();
  const absl::Status read = testutil::WaitUntil(
      "the sleeper's VmHWM",
      [&] { return sleeper->PeakRssKib().value_or(0) > 0; }, absl::Seconds(5));
  EXPECT_TRUE(read.ok()) << read;
  EXPECT_LT(*sleeper->PeakRssKib(), 32 * 1024);
  sleeper->Stop(absl::Seconds(5));
  auto dd = ChildProcess::Spawn(
      {"/bin/dd", "if=/dev/zero", "of=/dev/null", "bs=64M", "count=1"},
      "/dev/null");
  ASSERT_TRUE(dd.ok()) << dd.status();
  const absl::Status exited = testutil::WaitUntil(
      "dd to exit", [&] { return dd->Poll().has_value(); }, absl::Seconds(10));
  ASSERT_TRUE(exited.ok()) << exited;
  EXPECT_EQ(*dd->Poll(), 0);
  EXPECT_GE(dd->PeakRssKib().value_or(0), 64 * 1024);
}

TEST(ChildProcessTest, ExecFailureIsAnError) {
  auto child = ChildProcess::Spawn({"/nonexistent/ferry-nothing"}, "/dev/null");
  EXPECT_EQ(child.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(child.status().message(), HasSubstr("No such file or directory"));
  auto no_log = ChildProcess::Spawn({"/bin/true"}, "/nonexistent/dir/x.log");
  EXPECT_EQ(no_log.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(no_log.status().message(), HasSubstr("cannot open the log"));
}

}  // namespace
}  // namespace ferry
