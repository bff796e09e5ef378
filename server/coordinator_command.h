// `ferry-server coordinator`: the coordinator's flags (and only its) and
// how they become the CoordinatorFlags RunCoordinator takes.
#ifndef FERRY_SERVER_COORDINATOR_COMMAND_H_
#define FERRY_SERVER_COORDINATOR_COMMAND_H_

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "common/cli_flags.h"
#include "common/ops_flags.h"
#include "server/server_main.h"

namespace ferry {

// The coordinator's command line as typed.
struct CoordinatorCommandLine {
  CoordinatorFlags flags;  // optimizer and embedding filled by Resolve
  OptimizerFlags optimizer;
  EmbeddingFlags embedding;
  OpsFlags ops;
};

// Adds every coordinator flag to `command` (its subcommand), bound to
// `line`, which must outlive the parse.
void AddCoordinatorFlags(CLI::App& command, CoordinatorCommandLine& line);

// The flags with the optimizer and the embedding tables validated.
// INVALID_ARGUMENT naming the flag.
absl::StatusOr<CoordinatorFlags> ResolveCoordinatorFlags(
    const CoordinatorCommandLine& line);

}  // namespace ferry

#endif  // FERRY_SERVER_COORDINATOR_COMMAND_H_
