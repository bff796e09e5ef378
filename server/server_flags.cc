#include "server/server_flags.h"

namespace ferry {

void AddListenFlags(CLI::App& command, std::string& listen,
                    std::string& port_file, const std::string& listen_more) {
  command
      .add_option(
          "--listen", listen,
          "address to serve on (port 0 picks a free port)" + listen_more)
      ->capture_default_str();
  command.add_option("--port-file", port_file,
                     "write the bound port to this file (one line per "
                     "partition), for --listen HOST:0");
}

}  // namespace ferry
