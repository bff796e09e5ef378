// `ferry health`: a grpc.health.v1 probe, like grpc_health_probe, for
// scripts and for checking a deployed process by hand.
#ifndef FERRY_CLIENT_HEALTH_COMMAND_H_
#define FERRY_CLIENT_HEALTH_COMMAND_H_

#include <string>

#include "CLI/CLI.hpp"

namespace ferry {

struct HealthFlags {
  std::string address;     // HOST:PORT
  std::string service;     // "" readiness, "liveness", or a ferry service name
  double timeout_s = 3.0;  // deadline of one check
  double wait_s = 0.0;     // keep checking until SERVING for this long
  bool json = false;
};

void AddHealthFlags(CLI::App& app, HealthFlags& flags);

// Prints the status. Exit code: 0 SERVING, 1 NOT_SERVING or unknown
// service, 2 unreachable (no answer within the deadline).
int RunHealth(const HealthFlags& flags);

}  // namespace ferry

#endif  // FERRY_CLIENT_HEALTH_COMMAND_H_
