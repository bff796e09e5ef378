// Test certificates made by openssl at test time, once per test process:
// ca, other_ca (.pem/.key), server (SAN localhost, 127.0.0.1; signed by ca),
// client (signed by ca), rogue (a client certificate signed by other_ca),
// worker_client (SAN URI:spiffe://ferry.test/worker) and coordinator_client
// (SANs URI:spiffe://ferry.test/coordinator, DNS:coordinator.ferry.test),
// both signed by ca, and rogue_coordinator (the coordinator's SANs, signed
// by other_ca).
#ifndef FERRY_TESTS_INTEGRATION_TLS_CERTS_FIXTURE_H_
#define FERRY_TESTS_INTEGRATION_TLS_CERTS_FIXTURE_H_

#include <string>

#include "absl/strings/str_cat.h"

namespace ferry::testing {

// `ok` is false when openssl failed (see `dir`/gen.log).
struct Certs {
  std::string dir;
  bool ok = false;
  std::string Path(const std::string& name) const {
    return absl::StrCat(dir, "/", name);
  }
};

bool HaveOpenssl();
// Made at the first call, removed at exit.
const Certs& GetCerts();
// A new directory /tmp/ferry_tls_XXXXXX ("" on failure).
std::string MakeTempDir();
// Writes `contents` to dir/name; returns the path.
std::string WriteFile(const std::string& dir, const std::string& name,
                      const std::string& contents);

}  // namespace ferry::testing

#endif  // FERRY_TESTS_INTEGRATION_TLS_CERTS_FIXTURE_H_
