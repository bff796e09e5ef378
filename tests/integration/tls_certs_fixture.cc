#include "tests/integration/tls_certs_fixture.h"

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace ferry::testing {
namespace {

// Writes ca, other_ca (.pem/.key), server, client (signed by ca), rogue (a
// client certificate signed by other_ca), worker_client and
// coordinator_client (signed by ca, with role SANs) and rogue_coordinator
// (the coordinator's SANs, signed by other_ca) into the current directory.
constexpr char kCertScript[] = R"(set -e
cat > ca.cnf <<'EOF'
[req]
distinguished_name = dn
[dn]
[v3_ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[server]
basicConstraints = CA:FALSE
subjectAltName = DNS:localhost,IP:127.0.0.1
extendedKeyUsage = serverAuth,clientAuth
[client]
basicConstraints = CA:FALSE
extendedKeyUsage = clientAuth
[worker_client]
basicConstraints = CA:FALSE
subjectAltName = URI:spiffe://ferry.test/worker
extendedKeyUsage = clientAuth
[coordinator_client]
basicConstraints = CA:FALSE
subjectAltName = URI:spiffe://ferry.test/coordinator,DNS:coordinator.ferry.test
extendedKeyUsage = clientAuth
EOF
K="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
for ca in ca other_ca; do
  openssl req -x509 -new $K -keyout $ca.key -out $ca.pem -days 2 \
    -subj "/CN=ferry-test-$ca" -config ca.cnf -extensions v3_ca
done
sign() {  # name subject ca extensions
  openssl req -new $K -keyout $1.key -out $1.csr -subj "$2" -config ca.cnf
  openssl x509 -req -in $1.csr -CA $3.pem -CAkey $3.key -CAcreateserial \
    -out $1.pem -days 2 -extfile ca.cnf -extensions $4
}
sign server /CN=localhost ca server
sign client /CN=ferry-client ca client
sign rogue /CN=ferry-rogue other_ca client
sign worker_client /CN=ferry-worker ca worker_client
sign coordinator_client /CN=ferry-coordinator ca coordinator_client
sign rogue_coordinator /CN=ferry-rogue other_ca coordinator_client
)";

}  // namespace

std::string MakeTempDir() {
  std::string dir = "/tmp/ferry_tls_XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) return "";
  return dir;
}

std::string WriteFile(const std::string& dir, const std::string& name,
                      const std::string& contents) {
  const std::string path = absl::StrCat(dir, "/", name);
  std::ofstream(path) << contents;
  return path;
}

bool HaveOpenssl() {
  return std::system("command -v openssl >/dev/null 2>&1") == 0;
}

const Certs& GetCerts() {
  static const Certs* const certs = [] {
    auto* c = new Certs;
    c->dir = MakeTempDir();
    if (c->dir.empty()) return c;
    WriteFile(c->dir, "gen.sh", kCertScript);
    const std::string command =
        absl::StrCat("cd '", c->dir, "' && sh gen.sh > gen.log 2>&1");
    c->ok = std::system(command.c_str()) == 0;
    std::atexit([] { std::filesystem::remove_all(GetCerts().dir); });
    return c;
  }();
  return *certs;
}

}  // namespace ferry::testing
