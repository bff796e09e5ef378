#include "client/worker_command.h"

#include <filesystem>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "common/allocator_tuning.h"

namespace ferry {

std::vector<std::string> HostedWorkerArgv(const std::string& command,
                                          const std::string& coordinator,
                                          const std::string& bin_dir,
                                          const char* pythonpath,
                                          const char* glibc_tunables,
                                          const std::vector<std::string>& env) {
  std::string path =
      (std::filesystem::path(bin_dir).parent_path() / "python").string();
  if (pythonpath != nullptr && pythonpath[0] != '\0') {
    absl::StrAppend(&path, ":", pythonpath);
  }
  std::vector<std::string> argv = {"/usr/bin/env"};
  if (glibc_tunables == nullptr || glibc_tunables[0] == '\0' ||
      std::string_view(glibc_tunables) == kFerryMallocTunables) {
    argv.push_back(absl::StrCat("GLIBC_TUNABLES=", kTorchWorkerMallocTunables));
  }
  argv.insert(argv.end(), {absl::StrCat("FERRY_COORDINATOR=", coordinator),
                           absl::StrCat("PYTHONPATH=", path),
                           "FERRY_PEER_LISTEN=127.0.0.1:0"});
  argv.insert(argv.end(), env.begin(), env.end());
  argv.insert(argv.end(), {"/bin/sh", "-c", absl::StrCat("exec ", command)});
  return argv;
}

}  // namespace ferry
