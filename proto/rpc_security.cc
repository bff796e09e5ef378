#include "proto/rpc_security.h"

#include <atomic>
#include <random>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/file_system.h"
#include "grpcpp/support/interceptor.h"

namespace ferry {
namespace {

// Reads the file named by `flag` into `*contents`; INVALID_ARGUMENT naming
// the flag and the path when it cannot be read or is empty.
absl::Status ReadFlagFile(absl::string_view flag, const std::string& path,
                          std::string* contents) {
  absl::StatusOr<std::string> read = PosixFileSystem()->ReadFile(path);
  if (!read.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, ": cannot read the file (",
                     read.status().message(), ")"));
  }
  if (read->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, ": the file is empty"));
  }
  *contents = *std::move(read);
  return absl::OkStatus();
}

// ReadFlagFile for a PEM file: also INVALID_ARGUMENT when it holds no PEM
// block (a DER file or a wrong path would otherwise fail only at the first
// handshake, far from the flag).
absl::Status ReadPemFlagFile(absl::string_view flag, const std::string& path,
                             std::string* contents) {
  absl::Status status = ReadFlagFile(flag, path, contents);
  if (!status.ok()) return status;
  if (!absl::StrContains(*contents, "-----BEGIN ")) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, ": not a PEM file (no -----BEGIN line)"));
  }
  return absl::OkStatus();
}

// Every config ever installed (never freed: ProcessRpcSecurity hands out
// references) and the current one.
ABSL_CONST_INIT absl::Mutex install_mu(absl::kConstInit);
std::vector<std::unique_ptr<RpcSecurityConfig>>* installed
    ABSL_GUARDED_BY(install_mu) = nullptr;
std::atomic<const RpcSecurityConfig*> current{nullptr};

void SetProcessConfig(RpcSecurityConfig config) {
  absl::MutexLock lock(&install_mu);
  if (installed == nullptr) {
    installed = new std::vector<std::unique_ptr<RpcSecurityConfig>>();
  }
  installed->push_back(std::make_unique<RpcSecurityConfig>(std::move(config)));
  current.store(installed->back().get(), std::memory_order_release);
}

// Adds `authorization: Bearer <token>` to the initial metadata of a call.
class BearerInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit BearerInterceptor(std::string value) : value_(std::move(value)) {}

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::
                PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(kAuthorizationKey, value_);
    }
    methods->Proceed();
  }

 private:
  const std::string value_;  // a copy: a call may outlive its channel
};

class BearerInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerInterceptorFactory(const std::string& token)
      : value_(absl::StrCat(kBearerPrefix, token)) {}

  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* /*info*/) override {
    return new BearerInterceptor(value_);
  }

 private:
  const std::string value_;
};

}  // namespace

absl::StatusOr<RpcSecurityConfig> LoadRpcSecurity(const OpsFlags& flags) {
  RpcSecurityConfig config;
  if (flags.tls_cert.empty() != flags.tls_key.empty()) {
    return absl::InvalidArgumentError(
        flags.tls_cert.empty()
            ? absl::StrCat("--tls-key ", flags.tls_key, " needs --tls-cert")
            : absl::StrCat("--tls-cert ", flags.tls_cert, " needs --tls-key"));
  }
  if (flags.require_client_cert && flags.tls_cert.empty()) {
    return absl::InvalidArgumentError(
        "--require-client-cert needs TLS: give --tls-cert and --tls-key");
  }
  if (flags.require_client_cert && flags.tls_ca.empty()) {
    return absl::InvalidArgumentError(
        "--require-client-cert needs --tls-ca (the CA that signs client "
        "certificates)");
  }
  if (!flags.tls_cert.empty()) {
    absl::Status status =
        ReadPemFlagFile("--tls-cert", flags.tls_cert, &config.cert_pem);
    if (!status.ok()) return status;
    status = ReadPemFlagFile("--tls-key", flags.tls_key, &config.key_pem);
    if (!status.ok()) return status;
  }
  if (!flags.tls_ca.empty()) {
    absl::Status status =
        ReadPemFlagFile("--tls-ca", flags.tls_ca, &config.ca_pem);
    if (!status.ok()) return status;
  }
  config.require_client_cert = flags.require_client_cert;
  config.server_name = flags.tls_server_name;
  if (!flags.auth_token_file.empty()) {
    std::string token;
    absl::Status status =
        ReadFlagFile("--auth-token-file", flags.auth_token_file, &token);
    if (!status.ok()) return status;
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r' ||
                              token.back() == ' ' || token.back() == '\t')) {
      token.pop_back();
    }
    if (token.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--auth-token-file ", flags.auth_token_file,
                       ": the token is empty (only whitespace)"));
    }
    for (const char c : token) {
      const unsigned char u = static_cast<unsigned char>(c);
      if (u < 0x21 || u > 0x7e) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--auth-token-file ", flags.auth_token_file,
            ": the token may hold only visible ASCII characters (no spaces, "
            "control characters or non-ASCII bytes) as it travels in an HTTP "
            "header"));
      }
    }
    config.token = std::move(token);
  }
  if (!flags.role_tokens_file.empty()) {
    std::string text;
    absl::Status status =
        ReadFlagFile("--role-tokens-file", flags.role_tokens_file, &text);
    if (!status.ok()) return status;
    absl::StatusOr<RoleTokens> tokens = ParseRoleTokens(
        text, absl::StrCat("--role-tokens-file ", flags.role_tokens_file));
    if (!tokens.ok()) return tokens.status();
    if (!tokens->sans.empty() && !flags.require_client_cert) {
      return absl::InvalidArgumentError(
          absl::StrCat("--role-tokens-file ", flags.role_tokens_file, ": \"",
                       RoleName(tokens->sans.front().role),
                       " san:", tokens->sans.front().san,
                       "\" names a client certificate, which needs "
                       "--require-client-cert (mutual TLS)"));
    }
    config.role_tokens = *std::move(tokens);
  }
  return config;
}

absl::Status InstallRpcSecurity(const OpsFlags& flags) {
  absl::StatusOr<RpcSecurityConfig> config = LoadRpcSecurity(flags);
  if (!config.ok()) return config.status();
  SetProcessConfig(*std::move(config));
  return absl::OkStatus();
}

const RpcSecurityConfig& ProcessRpcSecurity() {
  static const RpcSecurityConfig* const kDefault = new RpcSecurityConfig();
  const RpcSecurityConfig* config = current.load(std::memory_order_acquire);
  return config != nullptr ? *config : *kDefault;
}

void SetProcessRpcSecurityForTesting(RpcSecurityConfig config) {
  SetProcessConfig(std::move(config));
}

std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(
    const RpcSecurityConfig& config) {
  if (!config.tls()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = config.ca_pem;  // empty: the system's roots
  if (config.has_cert()) {
    options.pem_private_key = config.key_pem;
    options.pem_cert_chain = config.cert_pem;
  }
  return grpc::SslCredentials(options);
}

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(
    const RpcSecurityConfig& config) {
  if (!config.tls()) return grpc::InsecureServerCredentials();
  if (!config.has_cert()) return nullptr;
  grpc::SslServerCredentialsOptions options(
      config.require_client_cert
          ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
          : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  options.pem_root_certs = config.ca_pem;
  options.pem_key_cert_pairs.push_back({config.key_pem, config.cert_pem});
  return grpc::SslServerCredentials(options);
}

const std::string& InProcessSecret() {
  static const std::string* const secret = [] {
    std::random_device device;
    std::string hex;
    for (int i = 0; i < 4; ++i) {
      absl::StrAppend(&hex, absl::Hex(device(), absl::kZeroPad8));
    }
    return new std::string(hex);
  }();
  return *secret;
}

std::vector<
    std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
MakeClientInterceptors(const RpcSecurityConfig& config) {
  std::vector<
      std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
      interceptors;
  if (!config.token.empty()) {
    interceptors.push_back(
        std::make_unique<BearerInterceptorFactory>(config.token));
  }
  return interceptors;
}

}  // namespace ferry
