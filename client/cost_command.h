// `ferry cost`: prints the cost model's prediction (client/cost_model.h) for
// PS and ring all-reduce side by side, which one wins, and the crossovers.
#ifndef FERRY_CLIENT_COST_COMMAND_H_
#define FERRY_CLIENT_COST_COMMAND_H_

#include <string>

#include "CLI/CLI.hpp"

namespace ferry {

struct CostFlags {
  std::string model = "fashion-mlp";
  int workers = 4;
  int shards = 2;
  std::string bandwidth = "10Gbit";
  std::string latency = "50us";
  std::string compute = "0";
  std::string overhead = "0";
  std::string compression = "none";
  bool colocated = false;
  int64_t bucket_elements = 25 * 1024 * 1024 / 4;
  int64_t max_chunk_elements = 256 * 1024;
  bool json = false;
};

// Adds the subcommand's flags to `cmd`.
void AddCostFlags(CLI::App& cmd, CostFlags& flags);

// Prints the prediction (a table, or JSON with flags.json). Returns the exit
// code: 0, or 2 for a bad flag value (the message names it).
int RunCost(const CostFlags& flags);

}  // namespace ferry

#endif  // FERRY_CLIENT_COST_COMMAND_H_
