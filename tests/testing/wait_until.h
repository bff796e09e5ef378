// WaitUntil: the one way a test waits for something another thread or
// process does. It polls an observable condition (a counter, a gauge, a
// file, a status answer) until it holds or a deadline passes; it never
// sleeps "to give time". A wait that times out says what it waited for,
// both in the Status it returns and on stderr (so that a caller that only
// checks ok() still leaves the reason in the test's output).
// The Python tests' equivalent is tests/testing/wait_until.py.
// Header-only: any test folder may include it.
#ifndef FERRY_TESTS_TESTING_WAIT_UNTIL_H_
#define FERRY_TESTS_TESTING_WAIT_UNTIL_H_

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ferry::testutil {

// Long enough for a loaded 2-core machine running ctest -j2 under a
// sanitizer; a wait that holds returns as soon as its condition does.
inline constexpr absl::Duration kDefaultWait = absl::Seconds(30);

// Calls `condition` until it returns true (OK) or `timeout` has passed
// (DEADLINE_EXCEEDED "timed out after T waiting for <what>"). The first
// checks follow each other closely (1 ms apart), later ones up to 50 ms
// apart, so a condition that holds soon is seen soon and a slow one does
// not spin. `condition` runs on the calling thread; it is checked once
// more at the deadline.
inline absl::Status WaitUntil(absl::string_view what,
                              const std::function<bool()>& condition,
                              absl::Duration timeout = kDefaultWait) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration pause = absl::Milliseconds(1);
  while (!condition()) {
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      if (condition()) return absl::OkStatus();
      const std::string message =
          absl::StrCat("timed out after ", absl::FormatDuration(timeout),
                       " waiting for ", what);
      std::fprintf(stderr, "WaitUntil: %s\n", message.c_str());
      return absl::DeadlineExceededError(message);
    }
    absl::SleepFor(std::min(pause, deadline - now));
    pause = std::min(pause * 2, absl::Milliseconds(50));
  }
  return absl::OkStatus();
}

}  // namespace ferry::testutil

#endif  // FERRY_TESTS_TESTING_WAIT_UNTIL_H_
