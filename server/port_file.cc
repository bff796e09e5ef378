#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "server/server_main.h"

namespace ferry {

absl::Status WritePortFile(const std::string& path,
                           const std::vector<int>& ports) {
  if (path.empty()) return absl::OkStatus();
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    for (int port : ports) out << port << "\n";
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

}  // namespace ferry
