// The flags both ferry-server roles take, each defined once.
#ifndef FERRY_SERVER_SERVER_FLAGS_H_
#define FERRY_SERVER_SERVER_FLAGS_H_

#include <string>

#include "CLI/CLI.hpp"

namespace ferry {

// --listen (bound to `listen`, whose value is the default shown) and
// --port-file; `listen_more` ends --listen's help.
void AddListenFlags(CLI::App& command, std::string& listen,
                    std::string& port_file, const std::string& listen_more);

}  // namespace ferry

#endif  // FERRY_SERVER_SERVER_FLAGS_H_
