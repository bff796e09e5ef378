#include "client/chaos_plan.h"

#include <signal.h>

#include <algorithm>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace ferry {
namespace {

constexpr int kMaxIndex = 999999;
constexpr int kMaxJoin = 1000;
constexpr int64_t kMaxNanos = int64_t{24} * 3600 * 1000000000;

bool AllDigits(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(),
                                   [](char c) { return c >= '0' && c <= '9'; });
}

// A decimal number without sign or leading zeros, <= `max`; -1 otherwise.
int ParseIndex(absl::string_view s, int max) {
  if (!AllDigits(s) || (s.size() > 1 && s[0] == '0') || s.size() > 7) return -1;
  int64_t v = 0;
  for (char c : s) v = v * 10 + (c - '0');
  return v <= max ? static_cast<int>(v) : -1;
}

// "3s" / "1500ms" / "1.25s": the shortest exact form ParseChaosTime reads back.
std::string TimeText(absl::Duration d) {
  const int64_t ns = absl::ToInt64Nanoseconds(d);
  if (ns % 1000000000 == 0) return absl::StrCat(ns / 1000000000, "s");
  if (ns % 1000000 == 0) return absl::StrCat(ns / 1000000, "ms");
  std::string frac = absl::StrFormat("%09d", ns % 1000000000);
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  return absl::StrCat(ns / 1000000000, ".", frac, "s");
}

absl::Status EventError(int number, absl::string_view event,
                        absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("--chaos event ", number, " \"", event, "\": ", why));
}

}  // namespace

std::string ProcessName::ToString() const {
  switch (role) {
    case Role::kCoordinator:
      return "coordinator";
    case Role::kPs:
      return absl::StrCat("ps", index);
    case Role::kWorker:
      return absl::StrCat("worker", index);
  }
  return "?";
}

const char* ChaosActionName(ChaosAction action) {
  switch (action) {
    case ChaosAction::kJoin:
      return "join";
    case ChaosAction::kKill:
      return "kill";
    case ChaosAction::kTerm:
      return "term";
    case ChaosAction::kStop:
      return "stop";
    case ChaosAction::kCont:
      return "cont";
  }
  return "?";
}

int ChaosSignal(ChaosAction action) {
  switch (action) {
    case ChaosAction::kJoin:
      return 0;
    case ChaosAction::kKill:
      return SIGKILL;
    case ChaosAction::kTerm:
      return SIGTERM;
    case ChaosAction::kStop:
      return SIGSTOP;
    case ChaosAction::kCont:
      return SIGCONT;
  }
  return 0;
}

std::string ChaosEvent::ToString() const {
  const std::string what =
      action == ChaosAction::kJoin ? absl::StrCat(count) : target.ToString();
  return absl::StrCat(
      ChaosActionName(action), ":", what, "@",
      at_step >= 0 ? absl::StrCat("step", at_step) : TimeText(at));
}

absl::StatusOr<ProcessName> ParseProcessName(absl::string_view text) {
  ProcessName name;
  if (text == "coordinator") return name;
  absl::string_view digits = text;
  if (absl::ConsumePrefix(&digits, "worker")) {
    name.role = ProcessName::Role::kWorker;
  } else if (absl::ConsumePrefix(&digits, "ps")) {
    name.role = ProcessName::Role::kPs;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad target \"", text, "\" (want coordinator, psK or workerK)"));
  }
  name.index = ParseIndex(digits, kMaxIndex);
  if (name.index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad target \"", text, "\": K in ",
                     text.substr(0, text.size() - digits.size()),
                     "K must be a whole number 0..", kMaxIndex,
                     " without sign or leading zeros"));
  }
  return name;
}

absl::StatusOr<absl::Duration> ParseChaosTime(absl::string_view text) {
  absl::string_view number = text;
  int64_t unit_ns = 0;
  int64_t max_whole = 0;
  if (absl::ConsumeSuffix(&number, "ms")) {
    unit_ns = 1000000;
    max_whole = kMaxNanos / unit_ns;
  } else if (absl::ConsumeSuffix(&number, "s")) {
    unit_ns = 1000000000;
    max_whole = kMaxNanos / unit_ns;
  } else if (absl::ConsumeSuffix(&number, "m")) {
    unit_ns = int64_t{60} * 1000000000;
    max_whole = kMaxNanos / unit_ns;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad time \"", text, "\": needs a unit (500ms, 1.5s, 30s, 2m)"));
  }
  if (absl::StartsWith(number, "-")) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad time \"", text, "\": negative"));
  }
  const std::vector<absl::string_view> parts =
      absl::StrSplit(number, absl::MaxSplits('.', 1));
  const absl::string_view whole = parts[0];
  const absl::string_view frac =
      parts.size() > 1 ? parts[1] : absl::string_view();
  if (!AllDigits(whole) || (parts.size() > 1 && !AllDigits(frac))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad time \"", text,
        "\": want digits, an optional fraction and a unit (1.5s)"));
  }
  if (frac.size() > 9) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad time \"", text, "\": more than 9 decimals"));
  }
  int64_t w = 0;
  for (char c : whole) {
    w = w * 10 + (c - '0');
    if (w > max_whole) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad time \"", text, "\": above 24h"));
    }
  }
  int64_t f = 0, scale = 1;
  for (char c : frac) {
    f = f * 10 + (c - '0');
    scale *= 10;
  }
  // f < 1e9 and unit_ns <= 6e10: the product needs 128 bits.
  const int64_t ns =
      w * unit_ns +
      static_cast<int64_t>(static_cast<__int128>(f) * unit_ns / scale);
  if (ns > kMaxNanos) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad time \"", text, "\": above 24h"));
  }
  return absl::Nanoseconds(ns);
}

absl::StatusOr<std::vector<ChaosEvent>> ParseChaosPlan(absl::string_view spec) {
  std::vector<ChaosEvent> plan;
  if (absl::StripAsciiWhitespace(spec).empty()) return plan;
  int number = 0;
  for (absl::string_view raw : absl::StrSplit(spec, ',')) {
    ++number;
    const absl::string_view event = absl::StripAsciiWhitespace(raw);
    if (event.empty())
      return EventError(number, event, "empty event (stray comma?)");
    const size_t at = event.find('@');
    if (at == absl::string_view::npos) {
      return EventError(number, event,
                        "missing @TIME (want ACTION:TARGET@TIME)");
    }
    if (event.find('@', at + 1) != absl::string_view::npos) {
      return EventError(number, event, "more than one '@'");
    }
    const absl::string_view head = event.substr(0, at);
    const size_t colon = head.find(':');
    if (colon == absl::string_view::npos) {
      return EventError(number, event, "missing ':' (want ACTION:TARGET@TIME)");
    }
    const absl::string_view action =
        absl::StripAsciiWhitespace(head.substr(0, colon));
    const absl::string_view what =
        absl::StripAsciiWhitespace(head.substr(colon + 1));
    ChaosEvent e;
    if (action == "join") {
      e.action = ChaosAction::kJoin;
    } else if (action == "kill") {
      e.action = ChaosAction::kKill;
    } else if (action == "term") {
      e.action = ChaosAction::kTerm;
    } else if (action == "stop") {
      e.action = ChaosAction::kStop;
    } else if (action == "cont") {
      e.action = ChaosAction::kCont;
    } else {
      return EventError(
          number, event,
          absl::StrCat("unknown action \"", action,
                       "\" (want join, kill, term, stop or cont)"));
    }
    if (e.action == ChaosAction::kJoin) {
      if (!AllDigits(what)) {
        return EventError(
            number, event,
            absl::StrCat(
                "join takes a count of workers to start (join:N), not \"", what,
                "\""));
      }
      e.count = ParseIndex(what, kMaxJoin);
      if (e.count < 1) {
        return EventError(number, event,
                          absl::StrCat("join count must be 1..", kMaxJoin,
                                       " without leading zeros"));
      }
    } else {
      auto target = ParseProcessName(what);
      if (!target.ok())
        return EventError(number, event, target.status().message());
      e.target = *target;
    }
    const absl::string_view when =
        absl::StripAsciiWhitespace(event.substr(at + 1));
    if (absl::StartsWith(when, "step")) {
      const absl::string_view digits = when.substr(4);
      if (digits.empty() || digits.size() > 12 || !AllDigits(digits) ||
          !absl::SimpleAtoi(digits, &e.at_step)) {
        return EventError(number, event, "a step needs a count: step300");
      }
    } else {
      auto time = ParseChaosTime(when);
      if (!time.ok()) return EventError(number, event, time.status().message());
      e.at = *time;
    }
    if (!plan.empty() && (plan.front().at_step >= 0) != (e.at_step >= 0)) {
      return EventError(number, event,
                        "times and steps cannot be mixed in one plan");
    }
    plan.push_back(e);
  }
  std::stable_sort(
      plan.begin(), plan.end(), [](const ChaosEvent& a, const ChaosEvent& b) {
        return a.at_step != b.at_step ? a.at_step < b.at_step : a.at < b.at;
      });
  return plan;
}

absl::Status ValidateChaosPlan(const std::vector<ChaosEvent>& plan,
                               int initial_workers, int shards) {
  int64_t workers = initial_workers;
  for (size_t i = 0; i < plan.size(); ++i) {
    const ChaosEvent& e = plan[i];
    const std::string where =
        absl::StrCat("--chaos event \"", e.ToString(), "\": ");
    if (e.action == ChaosAction::kJoin) {
      workers += e.count;
      continue;
    }
    if (e.target.role == ProcessName::Role::kPs && e.target.index >= shards) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, shards == 0
                     ? "this job has no PS shards (ring mode)"
                     : absl::StrCat("there are only ", shards,
                                    " shards (ps0..ps", shards - 1, ")")));
    }
    if (e.target.role == ProcessName::Role::kWorker &&
        e.target.index >= workers) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "only ", workers, " workers (worker0..worker", workers - 1,
          ") have been started by then; join more earlier"));
    }
  }
  return absl::OkStatus();
}

}  // namespace ferry
