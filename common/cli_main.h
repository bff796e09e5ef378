// How ferry's three programs (ferry, ferry-server, ferry-worker) parse their
// command line and end on an error, so that all three print and exit alike:
//   - errors go to stderr as "<program>: <message>", one line;
//   - exit 0 after --help, kExitConfig (2) for bad usage or an invalid
//     configuration, kExitFailure (1) for a fault at run time
//     (common/exit_codes.h).
#ifndef FERRY_COMMON_CLI_MAIN_H_
#define FERRY_COMMON_CLI_MAIN_H_

#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ferry {

// Parses `args` (args[0] is the program) into `app`. nullopt: parsed, go
// on; otherwise the process's exit code: 0 after --help (printed), 2 for a
// parse error (printed by CLI11 with the usage hint).
std::optional<int> ParseCommandLine(CLI::App& app,
                                    const std::vector<std::string>& args);

// argv as strings.
std::vector<std::string> ArgsOf(int argc, char** argv);

// Prints "<program>: <status message>" and returns StartupExitCode(status):
// 2 for INVALID_ARGUMENT, 1 otherwise. REQUIRES: !status.ok().
int ExitWithError(absl::string_view program, const absl::Status& status);

// Prints "<program>: <message>" and returns kExitConfig.
int ExitWithConfigError(absl::string_view program, absl::string_view message);

}  // namespace ferry

#endif  // FERRY_COMMON_CLI_MAIN_H_
