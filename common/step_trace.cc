#include "common/step_trace.h"

#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"

namespace ferry {
namespace {

struct Event {
  int64_t ns;
  int64_t step;
  int32_t arg;
  StepEvent event;
};

struct Recorder {
  absl::Mutex mu;
  std::string dir ABSL_GUARDED_BY(mu);
  std::string names ABSL_GUARDED_BY(mu);
  std::vector<Event> events ABSL_GUARDED_BY(mu);
  int64_t dropped ABSL_GUARDED_BY(mu) = 0;
  bool flush_at_exit ABSL_GUARDED_BY(mu) = false;
};

// Never destroyed: the write at exit runs after static destructors may have.
Recorder& TheRecorder() {
  static Recorder* const recorder = new Recorder;
  return *recorder;
}

int64_t MonotonicNanos() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec;
}

void FlushAtExit() { (void)StepTrace::Flush(); }

// Starts recording into `dir` (registers the write at exit once).
void Start(const std::string& dir) {
  Recorder& r = TheRecorder();
  absl::MutexLock lock(&r.mu);
  r.dir = dir;
  r.events.reserve(4096);
  if (!r.flush_at_exit) {
    r.flush_at_exit = true;
    std::atexit(FlushAtExit);
  }
}

}  // namespace

std::atomic<int> StepTrace::state_{StepTrace::kUnknown};

absl::string_view StepEventName(StepEvent event) {
  switch (event) {
    case StepEvent::kBegun:
      return "begun";
    case StepEvent::kComputed:
      return "computed";
    case StepEvent::kFinished:
      return "finished";
    case StepEvent::kPushAcked:
      return "push_acked";
    case StepEvent::kPullLanded:
      return "pull_landed";
    case StepEvent::kPushCommitted:
      return "push_committed";
    case StepEvent::kStepApplied:
      return "step_applied";
  }
  return "unknown";
}

int StepTrace::Initialize() {
  const char* dir = std::getenv("FERRY_STEP_TRACE");
  const bool on = dir != nullptr && dir[0] != '\0';
  if (on) Start(dir);
  int expected = kUnknown;
  state_.compare_exchange_strong(expected, on ? kOn : kOff);
  return state_.load();
}

void StepTrace::EnableForTest(const std::string& dir) {
  Start(dir);
  state_.store(kOn);
}

void StepTrace::RecordSlow(StepEvent event, int64_t step, int64_t arg) {
  const int64_t now = MonotonicNanos();
  Recorder& r = TheRecorder();
  absl::MutexLock lock(&r.mu);
  if (static_cast<int64_t>(r.events.size()) >= kMaxEvents) {
    ++r.dropped;
    return;
  }
  r.events.push_back({now, step, static_cast<int32_t>(arg), event});
}

void StepTrace::AddName(absl::string_view name) {
  if (State() == kOff) return;
  Recorder& r = TheRecorder();
  absl::MutexLock lock(&r.mu);
  absl::StrAppend(&r.names, r.names.empty() ? "" : "+",
                  absl::StrReplaceAll(name, {{" ", "_"}}));
}

absl::Status StepTrace::Flush() {
  if (State() == kOff) return absl::OkStatus();
  Recorder& r = TheRecorder();
  absl::MutexLock lock(&r.mu);
  const std::string path = absl::StrCat(r.dir, "/steptrace-", getpid(), ".txt");
  const std::string temp = path + ".tmp";
  std::FILE* f = std::fopen(temp.c_str(), "w");
  if (f == nullptr) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write the step trace ", temp));
  }
  std::fprintf(f, "# ferry step trace: pid %d names %s dropped %lld\n",
               static_cast<int>(getpid()),
               r.names.empty() ? "-" : r.names.c_str(),
               static_cast<long long>(r.dropped));
  for (const Event& e : r.events) {
    const absl::string_view name = StepEventName(e.event);
    const std::string step =
        e.step == kUnknownStep ? "?" : absl::StrCat(e.step);
    std::fprintf(f, "%lld %.*s %s %d\n", static_cast<long long>(e.ns),
                 static_cast<int>(name.size()), name.data(), step.c_str(),
                 static_cast<int>(e.arg));
  }
  const bool ok = std::fclose(f) == 0;
  if (!ok || std::rename(temp.c_str(), path.c_str()) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write the step trace ", path));
  }
  return absl::OkStatus();
}

}  // namespace ferry
