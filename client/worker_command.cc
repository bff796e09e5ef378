#include "client/worker_command.h"

#include <filesystem>

#include "absl/strings/str_cat.h"

namespace ferry {

std::vector<std::string> HostedWorkerArgv(const std::string& command,
                                          const std::string& coordinator,
                                          const std::string& bin_dir,
                                          const char* pythonpath) {
  std::string path =
      (std::filesystem::path(bin_dir).parent_path() / "python").string();
  if (pythonpath != nullptr && pythonpath[0] != '\0') {
    absl::StrAppend(&path, ":", pythonpath);
  }
  return {"/usr/bin/env",
          absl::StrCat("FERRY_COORDINATOR=", coordinator),
          absl::StrCat("PYTHONPATH=", path),
          "FERRY_PEER_LISTEN=127.0.0.1:0",
          "/bin/sh",
          "-c",
          absl::StrCat("exec ", command)};
}

}  // namespace ferry
