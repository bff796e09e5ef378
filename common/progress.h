// Progress output for long runs: on a terminal, one line redrawn in place
// (a bar with the figures); elsewhere (logs, CI), only the lines passed to
// Line(), so logs stay readable.
//
// Thread safety: not thread-safe.
#ifndef FERRY_COMMON_PROGRESS_H_
#define FERRY_COMMON_PROGRESS_H_

#include <cstdio>
#include <string>

namespace ferry {

class ProgressPrinter {
 public:
  // `out` is not owned. `interactive` defaults to isatty(out).
  explicit ProgressPrinter(FILE* out);
  ProgressPrinter(FILE* out, bool interactive)
      : out_(out), interactive_(interactive) {}

  // Redraws the in-place line (terminal only): "[#####     ] 50% text".
  void Update(double fraction, const std::string& text);
  // Prints a permanent line (clears the in-place line first on a terminal).
  void Line(const std::string& text);
  bool interactive() const { return interactive_; }

 private:
  FILE* out_;
  bool interactive_;
  bool has_partial_ = false;
};

}  // namespace ferry

#endif  // FERRY_COMMON_PROGRESS_H_
