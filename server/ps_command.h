// `ferry-server ps`: a parameter-server shard's flags (and only its) and how
// they become the PsFlags RunPsShard takes.
#ifndef FERRY_SERVER_PS_COMMAND_H_
#define FERRY_SERVER_PS_COMMAND_H_

#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "common/ops_flags.h"
#include "server/server_main.h"

namespace ferry {

// A shard's command line as typed.
struct PsCommandLine {
  PsFlags flags;
  bool shard_id_from_hostname = false;
  OpsFlags ops;
};

// Adds every shard flag to `command` (its subcommand), bound to `line`,
// which must outlive the parse.
void AddPsFlags(CLI::App& command, PsCommandLine& line);

// The flags with --shard-id-from-hostname applied: the shard id is the -N at
// the end of `hostname` (the pod's name). INVALID_ARGUMENT when it has none.
absl::StatusOr<PsFlags> ResolvePsFlags(const PsCommandLine& line,
                                       const std::string& hostname);

}  // namespace ferry

#endif  // FERRY_SERVER_PS_COMMAND_H_
