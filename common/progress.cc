#include "common/progress.h"

#include <unistd.h>

#include <algorithm>

namespace ferry {

ProgressPrinter::ProgressPrinter(FILE* out)
    : ProgressPrinter(out, isatty(fileno(out)) != 0) {}

void ProgressPrinter::Update(double fraction, const std::string& text) {
  if (!interactive_) return;
  constexpr int kWidth = 24;
  const double f = std::clamp(fraction, 0.0, 1.0);
  const int filled = static_cast<int>(f * kWidth);
  std::string bar(filled, '#');
  bar.append(kWidth - filled, ' ');
  std::fprintf(out_, "\r\033[K[%s] %3d%% %s", bar.c_str(),
               static_cast<int>(f * 100), text.c_str());
  std::fflush(out_);
  has_partial_ = true;
}

void ProgressPrinter::Line(const std::string& text) {
  if (interactive_ && has_partial_) std::fprintf(out_, "\r\033[K");
  has_partial_ = false;
  std::fprintf(out_, "%s\n", text.c_str());
  std::fflush(out_);
}

}  // namespace ferry
