#include "common/log.h"

#include <atomic>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace ferry {
namespace {

struct LogConfig {
  std::string component = "ferry";
  LogLevel level = LogLevel::kInfo;
  bool json = false;
  std::FILE* out = stderr;
};

absl::Mutex& ConfigMutex() {
  static absl::Mutex mu(absl::kConstInit);
  return mu;
}

LogConfig& Config() ABSL_EXCLUSIVE_LOCKS_REQUIRED(ConfigMutex()) {
  static LogConfig config;
  return config;
}

std::atomic<int> g_min_level{static_cast<int>(LogLevel::kInfo)};

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

const char* LevelTag(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "DEBUG";
    case LogLevel::kInfo:
      return "INFO ";
    case LogLevel::kWarn:
      return "WARN ";
    case LogLevel::kError:
      return "ERROR";
  }
  return "INFO ";
}

bool NeedsQuotes(absl::string_view v) {
  if (v.empty()) return true;
  for (char c : v) {
    if (c == ' ' || c == '"' || c == '=' || c == '\n' || c == '\t') return true;
  }
  return false;
}

std::string Format(const LogConfig& config, LogLevel level,
                   absl::string_view message,
                   std::initializer_list<LogField> fields) {
  const std::string ts = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(),
                                          absl::UTCTimeZone());
  if (config.json) {
    nlohmann::ordered_json line;
    line["ts"] = ts;
    line["level"] = LevelName(level);
    line["component"] = config.component;
    line["msg"] = std::string(message);
    for (const LogField& f : fields) {
      nlohmann::json value = f.value;
      if (f.number) {
        value =
            nlohmann::json::parse(f.value, nullptr, /*allow_exceptions=*/false);
        if (value.is_discarded()) value = f.value;  // nan, inf: keep as text
      }
      line[std::string(f.key)] = value;
    }
    return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  std::string line = absl::StrCat(ts, " ", LevelTag(level), " ",
                                  config.component, " ", message);
  for (const LogField& f : fields) {
    if (!f.number && NeedsQuotes(f.value)) {
      absl::StrAppend(&line, " ", f.key, "=", nlohmann::json(f.value).dump());
    } else {
      absl::StrAppend(&line, " ", f.key, "=", f.value);
    }
  }
  return line;
}

}  // namespace

absl::Status ConfigureLogging(absl::string_view component,
                              absl::string_view level,
                              absl::string_view format) {
  LogLevel parsed;
  if (level == "debug") {
    parsed = LogLevel::kDebug;
  } else if (level == "info") {
    parsed = LogLevel::kInfo;
  } else if (level == "warn" || level == "warning") {
    parsed = LogLevel::kWarn;
  } else if (level == "error") {
    parsed = LogLevel::kError;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--log-level '", level, "': use debug, info, warn or error"));
  }
  if (format != "text" && format != "json") {
    return absl::InvalidArgumentError(
        absl::StrCat("--log-format '", format, "': use text or json"));
  }
  absl::MutexLock lock(&ConfigMutex());
  Config().component = std::string(component);
  Config().level = parsed;
  Config().json = format == "json";
  g_min_level.store(static_cast<int>(parsed));
  return absl::OkStatus();
}

void SetLogStreamForTesting(std::FILE* out) {
  absl::MutexLock lock(&ConfigMutex());
  Config().out = out;
}

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) >= g_min_level.load();
}

std::string FormatLogLine(LogLevel level, absl::string_view message,
                          std::initializer_list<LogField> fields) {
  absl::MutexLock lock(&ConfigMutex());
  return Format(Config(), level, message, fields);
}

void Log(LogLevel level, absl::string_view message,
         std::initializer_list<LogField> fields) {
  if (!LogEnabled(level)) return;
  absl::MutexLock lock(&ConfigMutex());
  const std::string line = Format(Config(), level, message, fields);
  std::fprintf(Config().out, "%s\n", line.c_str());
  std::fflush(Config().out);
}

}  // namespace ferry
