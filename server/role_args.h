// ferry-server's role is its subcommand (`ferry-server ps ...`,
// `ferry-server coordinator ...`), so each role shows and accepts only its
// own flags. The older spellings still start a server: `--role ps` or
// `--role=ps` anywhere on the command line, or FERRY_ROLE in the
// environment, become the subcommand.
#ifndef FERRY_SERVER_ROLE_ARGS_H_
#define FERRY_SERVER_ROLE_ARGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ferry {

// `args` (args[0] the program) with the role as args[1] and no --role left:
// args[1] when it already is a role, else the --role value, else
// `env_role` (empty: none). Unchanged when no role is given anywhere (the
// parser then asks for one). INVALID_ARGUMENT for a role other than
// coordinator or ps, a --role without a value, or two different roles.
absl::StatusOr<std::vector<std::string>> RoleAsSubcommand(
    std::vector<std::string> args, absl::string_view env_role);

}  // namespace ferry

#endif  // FERRY_SERVER_ROLE_ARGS_H_
