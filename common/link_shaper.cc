#include "common/link_shaper.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <queue>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace ferry {
namespace {

constexpr char kBandwidthHelp[] =
    "write a number and a unit that says bits or bytes, e.g. 1Gbit, 10Gbit, "
    "25Gbit, 100Mbit, 800Mbps (bits/s) or 1.5GB/s, 100MiB/s (bytes/s); 0 = "
    "unlimited";

// The multiplier of an SI (k, M, G, T) or binary (Ki, Mi, Gi, Ti) prefix,
// case-insensitive; 0 for an unknown one. "" is 1.
double PrefixMultiplier(absl::string_view prefix) {
  const std::string p = absl::AsciiStrToLower(prefix);
  if (p.empty()) return 1;
  static constexpr struct {
    const char* name;
    double value;
  } kPrefixes[] = {{"k", 1e3},           {"m", 1e6},
                   {"g", 1e9},           {"t", 1e12},
                   {"ki", 1024.0},       {"mi", 1048576.0},
                   {"gi", 1073741824.0}, {"ti", 1099511627776.0}};
  for (const auto& entry : kPrefixes) {
    if (p == entry.name) return entry.value;
  }
  return 0;
}

}  // namespace

std::string LinkLimit::ToString() const {
  if (!enabled()) return "unlimited";
  std::string rate = "unlimited rate";
  if (bytes_per_second > 0) {
    const double bits = bytes_per_second * 8;
    if (bits >= 1e9) {
      rate = absl::StrFormat("%g Gbit/s", bits / 1e9);
    } else if (bits >= 1e6) {
      rate = absl::StrFormat("%g Mbit/s", bits / 1e6);
    } else {
      rate = absl::StrFormat("%g kbit/s", bits / 1e3);
    }
    absl::StrAppendFormat(&rate, " (%g B/s)", bytes_per_second);
  }
  return absl::StrCat(rate, ", latency ", absl::FormatDuration(latency));
}

absl::StatusOr<double> ParseBandwidth(absl::string_view text) {
  const absl::string_view t = absl::StripAsciiWhitespace(text);
  if (t.empty() || t == "0") return 0.0;
  // The number: digits, '.', exponent; the unit is what follows.
  size_t i = 0;
  while (i < t.size() &&
         (std::isdigit(static_cast<unsigned char>(t[i])) || t[i] == '.' ||
          t[i] == '-' || t[i] == '+' ||
          ((t[i] == 'e' || t[i] == 'E') && i > 0 && i + 1 < t.size() &&
           (std::isdigit(static_cast<unsigned char>(t[i + 1])) ||
            t[i + 1] == '-' || t[i + 1] == '+')))) {
    ++i;
  }
  double number = 0;
  if (i == 0 || !absl::SimpleAtod(t.substr(0, i), &number) ||
      !std::isfinite(number) || number < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bandwidth '", text, "' does not start with a ",
                     "non-negative number; ", kBandwidthHelp));
  }
  const absl::string_view unit = absl::StripAsciiWhitespace(t.substr(i));
  if (unit.empty()) {
    if (number == 0) return 0.0;
    return absl::InvalidArgumentError(
        absl::StrCat("bandwidth '", text, "' has no unit; ", kBandwidthHelp));
  }
  // Bits: ...bit, ...bit/s, ...bps (any case). Bytes: ...B/s (upper B).
  const std::string lower = absl::AsciiStrToLower(unit);
  double bits_or_bytes = 0;  // bytes per unit
  absl::string_view prefix;
  for (absl::string_view suffix : {"bit/s", "bits/s", "bit", "bits", "bps"}) {
    if (absl::EndsWith(lower, suffix)) {
      prefix = unit.substr(0, unit.size() - suffix.size());
      bits_or_bytes = 1.0 / 8;
      break;
    }
  }
  if (bits_or_bytes == 0 && absl::EndsWith(unit, "B/s")) {
    prefix = unit.substr(0, unit.size() - 3);
    bits_or_bytes = 1.0;
  }
  const double multiplier = PrefixMultiplier(prefix);
  if (bits_or_bytes == 0 || multiplier == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bandwidth '", text, "' has an unknown unit '", unit,
                     "'; ", kBandwidthHelp));
  }
  return number * multiplier * bits_or_bytes;
}

absl::StatusOr<absl::Duration> ParseLatency(absl::string_view text) {
  const absl::string_view t = absl::StripAsciiWhitespace(text);
  if (t.empty()) return absl::ZeroDuration();
  absl::Duration latency;
  if (!absl::ParseDuration(t, &latency) || latency < absl::ZeroDuration() ||
      latency == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "latency '", text,
        "' is not a non-negative duration; write e.g. 50us, 1ms or 0"));
  }
  return latency;
}

absl::StatusOr<LinkLimit> ParseLinkLimit(absl::string_view bandwidth_text,
                                         absl::string_view latency_text) {
  LinkLimit limit;
  absl::StatusOr<double> rate = ParseBandwidth(bandwidth_text);
  if (!rate.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--link-bandwidth: ", rate.status().message()));
  }
  absl::StatusOr<absl::Duration> latency = ParseLatency(latency_text);
  if (!latency.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--link-latency: ", latency.status().message()));
  }
  limit.bytes_per_second = *rate;
  limit.latency = *latency;
  return limit;
}

// One thread running continuations in time order.
class LinkShaper::Timer {
 public:
  ~Timer() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      cv_.Signal();
    }
    if (thread_.joinable()) thread_.join();
  }

  void RunAt(absl::Time when, std::function<void()> fn) {
    absl::MutexLock lock(&mu_);
    if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
    queue_.push(Entry{when, next_seq_++, std::move(fn)});
    cv_.Signal();
  }

 private:
  struct Entry {
    absl::Time when;
    int64_t seq;  // FIFO among equal times
    std::function<void()> fn;
    bool operator>(const Entry& other) const {
      return when != other.when ? when > other.when : seq > other.seq;
    }
  };

  void Loop() {
    absl::MutexLock lock(&mu_);
    while (true) {
      if (queue_.empty()) {
        if (stopping_) return;
        cv_.Wait(&mu_);
        continue;
      }
      // Stopping: run everything left at once, then leave.
      if (!stopping_ && queue_.top().when > absl::Now()) {
        // Wakes at the deadline, or early for a new (maybe earlier) entry.
        cv_.WaitWithDeadline(&mu_, queue_.top().when);
        continue;
      }
      std::function<void()> fn = std::move(const_cast<Entry&>(queue_.top()).fn);
      queue_.pop();
      mu_.Unlock();
      fn();
      mu_.Lock();
    }
  }

  absl::Mutex mu_;
  absl::CondVar cv_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue_
      ABSL_GUARDED_BY(mu_);
  int64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // started by the first RunAt, under mu_
};

LinkShaper::LinkShaper(LinkLimit limit, int64_t burst_bytes)
    : limit_(limit),
      burst_bytes_(
          burst_bytes >= 0
              ? burst_bytes
              : std::max<int64_t>(
                    kMinBurstBytes,
                    static_cast<int64_t>(limit.bytes_per_second *
                                         absl::ToDoubleSeconds(kBurstTime)))),
      tolerance_(limit.bytes_per_second > 0
                     ? absl::Seconds(burst_bytes_ / limit.bytes_per_second)
                     : absl::ZeroDuration()),
      timer_(std::make_unique<Timer>()) {}

LinkShaper::~LinkShaper() = default;

absl::Time LinkShaper::Reserve(Direction& d, int64_t bytes, absl::Time now,
                               absl::Time queued, absl::Time fresh,
                               absl::Duration latency) {
  absl::Time release = fresh;
  if (limit_.bytes_per_second > 0) {
    // A message queued no later than the tolerance after the link's last
    // one continues that transmission: it starts when the link is free or
    // when it was ready, whichever is later (a late wake-up or a slow write
    // of a message that was ready costs no rate, and a message that became
    // ready while the link was idle takes its full time from then: the idle
    // gap is never credited); otherwise the link was idle and starts
    // afresh.
    const bool continuing = queued <= d.free + tolerance_;
    const absl::Time start = continuing ? std::max(d.free, queued) : fresh;
    d.free = start + Transmission(bytes);
    release = std::max(continuing ? queued : fresh, d.free);
  }
  release = std::max(now, release + latency);
  d.bytes += bytes;
  d.delay += release - now;
  return release;
}

absl::Time LinkShaper::ReserveSend(int64_t bytes, absl::Time now,
                                   absl::Time ready) {
  absl::MutexLock lock(&mu_);
  const absl::Time queued =
      std::clamp(ready, now - limit_.latency - tolerance_, now);
  const absl::Time fresh = std::clamp(ready, now - limit_.latency, now);
  return Reserve(send_, bytes, now, queued, fresh, limit_.latency);
}

absl::Time LinkShaper::ReserveReceive(int64_t bytes, absl::Time now) {
  absl::MutexLock lock(&mu_);
  const absl::Time first_byte = now - Transmission(bytes);
  return Reserve(receive_, bytes, now, first_byte, first_byte,
                 absl::ZeroDuration());
}

void LinkShaper::RunAt(absl::Time when, std::function<void()> fn) {
  timer_->RunAt(when, std::move(fn));
}

LinkShaperStats LinkShaper::stats() const {
  absl::MutexLock lock(&mu_);
  return {send_.bytes, receive_.bytes, send_.delay, receive_.delay};
}

}  // namespace ferry
