// Link emulation: an optional per-process rate and latency limit applied in
// ferry's transport (PS client and shard, ring sender and receiver), so that
// loopback can stand in for a 1/10/25 Gbit network.
//
// The model is a full-duplex link: one token bucket for the bytes this
// process sends and one for the bytes it receives, each at the full rate,
// plus a one-way latency charged once, on the send side. A message is
// delayed, never dropped or split: the transport asks the shaper when the
// message may go (send) or be taken in (receive) and holds it until then,
// without blocking a gRPC thread (RunAt() runs the continuation on the
// shaper's own timer thread).
//
// Arithmetic (per direction, rate r bytes/s, tolerance tau = b / r for a
// burst of b bytes): a message of n bytes, ready at time t, is serialized in
// [start, end) with start = max(free, t) when t <= free + tau (the link is
// busy, or was a moment ago: the message continues its transmission, and
// an idle gap before t is not credited) and start = t otherwise (the link
// was idle), end = start + n / r, free = end (messages
// never overlap on the link, whichever thread reserves them); it is
// released at max(t, end) + latency. On the receive side t is the arrival
// of the message's first byte (ReserveReceive). Latency is pipelined: it does
// not delay the serialization of the next message. The tolerance absorbs the
// slack of the timer thread (a one-message-at-a-time stream that reserves a
// message late passes the time it was ready, and loses no rate as long as
// the lateness stays under tau) without giving an idle link a head start: a
// message that became ready while the link was idle, after a pause of any
// length, takes its full n / r from then, as on a real link (before
// 2026-12-02 a pause under tau was credited, so a step whose compute was
// shorter than tau got its transfer for free); the long-run rate is exactly
// r.
#ifndef FERRY_COMMON_LINK_SHAPER_H_
#define FERRY_COMMON_LINK_SHAPER_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ferry {

// What a link may carry. Default: no limit at all.
struct LinkLimit {
  double bytes_per_second = 0;  // per direction; 0 = unlimited
  absl::Duration latency = absl::ZeroDuration();  // one-way, per message

  // True when any limit is set (only then is a shaper worth creating).
  bool enabled() const {
    return bytes_per_second > 0 || latency > absl::ZeroDuration();
  }
  // "unlimited", or e.g. "10 Gbit/s (1.25e+09 B/s), latency 50us".
  std::string ToString() const;
};

// Parses a bandwidth: a number and a unit that says bits or bytes:
//   bits/s:  bit, bit/s, bps   with an optional k/M/G/T (1e3..1e12) or
//            Ki/Mi/Gi/Ti (2^10..2^40) prefix, any case: "1Gbit", "100Mbit",
//            "800Mbps", "25gbit/s";
//   bytes/s: B/s with the same prefixes (the B upper case): "1.5GB/s",
//            "100MiB/s".
// "" and "0" mean unlimited (returns 0). INVALID_ARGUMENT naming the text
// for a missing or unknown unit (e.g. "100", "10Mb/s", which could be either)
// or a negative, non-finite or unparsable number.
absl::StatusOr<double> ParseBandwidth(absl::string_view text);

// Parses a one-way latency in absl::ParseDuration syntax ("50us", "1ms",
// "0"); "" means none. INVALID_ARGUMENT for negative, infinite or unparsable
// text.
absl::StatusOr<absl::Duration> ParseLatency(absl::string_view text);

// Both of the above; the error names which flag to fix.
absl::StatusOr<LinkLimit> ParseLinkLimit(absl::string_view bandwidth_text,
                                         absl::string_view latency_text);

// What a shaper has done so far.
struct LinkShaperStats {
  int64_t bytes_sent = 0;  // bytes of the messages reserved per direction
  int64_t bytes_received = 0;
  absl::Duration send_delay;     // sum over messages of (release - now)
  absl::Duration receive_delay;  // idem, receive direction
};

// The shaper of one process. Thread-safe: every method may be called from
// any thread. Reserve*() are pure arithmetic on the given times (testable
// with a fake clock); RunAt() uses the real clock.
class LinkShaper {
 public:
  // Smallest burst (see the tolerance above).
  static constexpr int64_t kMinBurstBytes = 64 * 1024;
  // The default burst also covers this much time at the rate, so that the
  // timer thread's slack never lowers the long-run rate.
  static constexpr absl::Duration kBurstTime = absl::Milliseconds(5);

  // `burst_bytes` < 0: max(kMinBurstBytes, rate * kBurstTime).
  explicit LinkShaper(LinkLimit limit, int64_t burst_bytes = -1);
  // Runs the continuations still pending at once (a held message is let go
  // rather than lost), then stops the timer thread.
  ~LinkShaper();

  LinkShaper(const LinkShaper&) = delete;
  LinkShaper& operator=(const LinkShaper&) = delete;

  const LinkLimit& limit() const { return limit_; }
  int64_t burst_bytes() const { return burst_bytes_; }

  // When a message of `bytes` bytes that is ready at `ready` may be handed
  // to gRPC, `now` being the current time (the result is never before
  // `now`). A stream that writes one message at a time passes the time the
  // message was queued: clamped to [now - latency, now] it starts the
  // serialization on an idle link (holding the previous message for its
  // latency does not delay this one's), and clamped to [now - latency -
  // tau, now] it decides whether the message continues a busy link's
  // transmission (a write that completed late costs no rate). With rate 0
  // only the latency applies.
  absl::Time ReserveSend(int64_t bytes, absl::Time now, absl::Time ready);
  absl::Time ReserveSend(int64_t bytes, absl::Time now) {
    return ReserveSend(bytes, now, now);
  }
  // When a received message of `bytes` bytes may be taken in: handled (a
  // push's chunk staged, a pulled slice copied, a ring piece filed) and the
  // next read started, never before. Same bucket logic on the receive
  // direction, no latency, for a message whose last byte arrived `now`: its
  // bytes may have been on this link since now - bytes / rate (cut-through,
  // like a real link), so a message its sender already paced at the rate
  // passes at once, while messages from several senders at once (incast)
  // queue behind each other.
  absl::Time ReserveReceive(int64_t bytes, absl::Time now);

  // Runs `fn` on the shaper's timer thread at `when` (at once, still on that
  // thread, when `when` has passed). `fn` must not block; it typically
  // starts the held gRPC operation. The thread starts on first use.
  void RunAt(absl::Time when, std::function<void()> fn);

  LinkShaperStats stats() const;

 private:
  struct Direction {
    absl::Time free = absl::InfinitePast();  // end of the last serialization
    int64_t bytes = 0;
    absl::Duration delay;
  };
  // `queued`: when the message was ready (decides whether it continues the
  // link's last transmission); `fresh`: when its serialization starts if
  // the link was idle.
  absl::Time Reserve(Direction& d, int64_t bytes, absl::Time now,
                     absl::Time queued, absl::Time fresh,
                     absl::Duration latency) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // bytes / rate (0 when unlimited).
  absl::Duration Transmission(int64_t bytes) const {
    return limit_.bytes_per_second > 0
               ? absl::Seconds(
                     static_cast<double>(std::max<int64_t>(bytes, 0)) /
                     limit_.bytes_per_second)
               : absl::ZeroDuration();
  }

  const LinkLimit limit_;
  const int64_t burst_bytes_;
  const absl::Duration tolerance_;  // burst_bytes_ at the rate

  mutable absl::Mutex mu_;
  Direction send_ ABSL_GUARDED_BY(mu_);
  Direction receive_ ABSL_GUARDED_BY(mu_);

  class Timer;  // the RunAt thread; defined in the .cc
  std::unique_ptr<Timer> timer_;
};

}  // namespace ferry

#endif  // FERRY_COMMON_LINK_SHAPER_H_
