// The command line of a `ferry local --worker-command` worker: the user's
// shell command (a PyTorch script using ferry.torch, docs/pytorch.md) run
// by /bin/sh with the job in its environment.
#ifndef FERRY_CLIENT_WORKER_COMMAND_H_
#define FERRY_CLIENT_WORKER_COMMAND_H_

#include <string>
#include <vector>

namespace ferry {

// argv of `env FERRY_COORDINATOR=<coordinator> PYTHONPATH=<python>
// FERRY_PEER_LISTEN=127.0.0.1:0 /bin/sh -c "exec <command>"`, where
// <python> is `bin_dir`/../python (the build tree's ferry package,
// python/CMakeLists.txt) followed by `pythonpath` (the launcher's
// PYTHONPATH; null or empty: none). The ring peer service listens on
// loopback, as ferry-worker's does under ferry local. `glibc_tunables`:
// the launcher's GLIBC_TUNABLES; unset (or ferry's own tuning,
// common/allocator_tuning.h), the command runs with
// kTorchWorkerMallocTunables, as a script does in the ferry:torch image; a
// user's own setting is left as it is.
// `env` (NAME=VALUE each) is added to the command's environment.
std::vector<std::string> HostedWorkerArgv(
    const std::string& command, const std::string& coordinator,
    const std::string& bin_dir, const char* pythonpath,
    const char* glibc_tunables, const std::vector<std::string>& env = {});

}  // namespace ferry

#endif  // FERRY_CLIENT_WORKER_COMMAND_H_
