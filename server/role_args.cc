#include "server/role_args.h"

#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ferry {
namespace {

bool IsRole(absl::string_view word) {
  return word == "coordinator" || word == "ps";
}

absl::Status CheckRole(absl::string_view role, absl::string_view where) {
  if (IsRole(role)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(where, " must be coordinator or ps, not '", role, "'"));
}

}  // namespace

absl::StatusOr<std::vector<std::string>> RoleAsSubcommand(
    std::vector<std::string> args, absl::string_view env_role) {
  std::optional<std::string> flag_role;
  for (size_t i = 1; i < args.size();) {
    std::string value;
    if (args[i] == "--role") {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(
            "--role needs a value: coordinator or ps");
      }
      value = args[i + 1];
      args.erase(args.begin() + i, args.begin() + i + 2);
    } else if (absl::StartsWith(args[i], "--role=")) {
      value = args[i].substr(7);
      args.erase(args.begin() + i);
    } else {
      ++i;
      continue;
    }
    if (absl::Status s = CheckRole(value, "--role"); !s.ok()) return s;
    if (flag_role && *flag_role != value) {
      return absl::InvalidArgumentError(absl::StrCat(
          "two roles given: --role ", *flag_role, " and --role ", value));
    }
    flag_role = value;
  }
  const bool has_subcommand = args.size() > 1 && IsRole(args[1]);
  if (has_subcommand) {
    if (flag_role && *flag_role != args[1]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "two roles given: ", args[1], " and --role ", *flag_role));
    }
    return args;
  }
  std::string role;
  if (flag_role) {
    role = *flag_role;
  } else if (!env_role.empty()) {
    if (absl::Status s = CheckRole(env_role, "FERRY_ROLE"); !s.ok()) return s;
    role = std::string(env_role);
  } else {
    return args;
  }
  args.insert(args.begin() + (args.empty() ? 0 : 1), role);
  return args;
}

}  // namespace ferry
