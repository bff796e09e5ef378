#include "common/pod_name.h"

#include <unistd.h>

#include <cctype>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ferry {

std::string PodName() {
  const char* env = std::getenv("HOSTNAME");
  if (env != nullptr && *env != '\0') return env;
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

absl::StatusOr<int> StatefulSetOrdinal(const std::string& hostname) {
  size_t digits = 0;
  while (digits < hostname.size() &&
         std::isdigit(static_cast<unsigned char>(
             hostname[hostname.size() - 1 - digits]))) {
    ++digits;
  }
  const size_t dash = hostname.size() - digits - 1;
  if (digits == 0 || digits > 6 || hostname.size() < digits + 2 ||
      hostname[dash] != '-') {
    return absl::InvalidArgumentError(absl::StrCat(
        "hostname '", hostname,
        "' does not end in -N (a StatefulSet pod name such as ferry-ps-2)"));
  }
  return std::stoi(hostname.substr(hostname.size() - digits));
}

}  // namespace ferry
