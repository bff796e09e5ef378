#include "common/cli_main.h"

#include <cstdio>

#include "common/exit_codes.h"

namespace ferry {

std::optional<int> ParseCommandLine(CLI::App& app,
                                    const std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (const std::string& arg : args)
    argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  try {
    app.parse(static_cast<int>(args.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitConfig;  // --help is 0
  }
  return std::nullopt;
}

std::vector<std::string> ArgsOf(int argc, char** argv) {
  return std::vector<std::string>(argv, argv + argc);
}

int ExitWithError(absl::string_view program, const absl::Status& status) {
  std::fprintf(stderr, "%.*s: %.*s\n", static_cast<int>(program.size()),
               program.data(), static_cast<int>(status.message().size()),
               status.message().data());
  return StartupExitCode(status);
}

int ExitWithConfigError(absl::string_view program, absl::string_view message) {
  return ExitWithError(program, absl::InvalidArgumentError(message));
}

}  // namespace ferry
