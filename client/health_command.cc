#include "client/health_command.h"

#include <cstdio>

#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
#include "proto/health.h"
#include "proto/rpc_util.h"

namespace ferry {

void AddHealthFlags(CLI::App& app, HealthFlags& f) {
  app.add_option("--address", f.address,
                 "HOST:PORT of the process (service or health port)")
      ->required();
  app.add_option(
         "--service", f.service,
         "health service: \"\" = ready, liveness, or e.g. ferry.v1.Coordinator")
      ->capture_default_str();
  app.add_option("--timeout", f.timeout_s, "seconds to wait for one answer")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--wait", f.wait_s,
                 "keep checking until SERVING for up to this many seconds")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--json", f.json,
               "print {\"address\", \"service\", \"status\", \"error\"}");
}

int RunHealth(const HealthFlags& f) {
  std::shared_ptr<grpc::Channel> channel = MakeChannel(f.address);
  const absl::Time give_up = absl::Now() + absl::Seconds(f.wait_s);
  HealthStatus status;
  std::string error;
  while (true) {
    error.clear();
    status =
        CheckHealth(channel, f.service, absl::Seconds(f.timeout_s), &error);
    if (status == HealthStatus::kServing || absl::Now() >= give_up) break;
    absl::SleepFor(absl::Milliseconds(250));
  }
  if (f.json) {
    nlohmann::json out = {{"address", f.address},
                          {"service", f.service},
                          {"status", HealthStatusName(status)},
                          {"error", error}};
    std::printf("%s\n", out.dump().c_str());
  } else if (error.empty()) {
    std::printf("%s\n", HealthStatusName(status));
  } else {
    std::printf("%s: %s\n", HealthStatusName(status), error.c_str());
  }
  switch (status) {
    case HealthStatus::kServing:
      return 0;
    case HealthStatus::kUnreachable:
      return 2;
    default:
      return 1;
  }
}

}  // namespace ferry
