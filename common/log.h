// Structured logs with levels for ferry's long-running processes (servers
// and workers; the `ferry` CLI prints for humans instead).
//
// Every event is one line on stderr: a message plus key=value fields, in
// either of two formats chosen once at start:
//   text: 2026-11-21T23:10:00.123Z INFO  coordinator listening port=7070 job=j1
//   json: {"ts":"2026-11-21T23:10:00.123Z","level":"info","component":
//          "coordinator","msg":"listening","port":7070,"job":"j1"}
// Numbers stay numbers in JSON; text values with spaces are quoted.
// Thread-safe: lines from different threads never interleave.
#ifndef FERRY_COMMON_LOG_H_
#define FERRY_COMMON_LOG_H_

#include <cstdio>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace ferry {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

// One key=value pair of an event. Arithmetic values are kept as JSON numbers.
struct LogField {
  template <typename T>
  LogField(absl::string_view k, const T& v) : key(k) {
    if constexpr (std::is_same_v<T, bool>) {
      value = v ? "true" : "false";
      number = true;
    } else if constexpr (std::is_arithmetic_v<T>) {
      value = absl::StrCat(v);
      number = true;
    } else {
      value = std::string(absl::string_view(v));
    }
  }
  LogField(absl::string_view k, const absl::Status& s)
      : key(k), value(s.ToString()) {}
  absl::string_view key;
  std::string value;
  bool number = false;
};

// Sets the component name (e.g. "coordinator", "ps-2", "worker"), the lowest
// level printed and the format ("text" or "json"). INVALID_ARGUMENT for an
// unknown level or format (nothing changes). Defaults: "ferry", info, text.
absl::Status ConfigureLogging(absl::string_view component,
                              absl::string_view level,
                              absl::string_view format);

// Redirects the lines (default stderr); for tests. Not owned.
void SetLogStreamForTesting(std::FILE* out);

bool LogEnabled(LogLevel level);

// Formats one event as the configured format would (no trailing newline).
std::string FormatLogLine(LogLevel level, absl::string_view message,
                          std::initializer_list<LogField> fields);

void Log(LogLevel level, absl::string_view message,
         std::initializer_list<LogField> fields = {});

inline void LogDebug(absl::string_view m,
                     std::initializer_list<LogField> f = {}) {
  if (LogEnabled(LogLevel::kDebug)) Log(LogLevel::kDebug, m, f);
}
inline void LogInfo(absl::string_view m,
                    std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kInfo, m, f);
}
inline void LogWarn(absl::string_view m,
                    std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kWarn, m, f);
}
inline void LogError(absl::string_view m,
                     std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kError, m, f);
}

}  // namespace ferry

#endif  // FERRY_COMMON_LOG_H_
