#include "proto/health.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/health_check_service_interface.h"
#include "proto/rpc_util.h"

namespace ferry {

void HealthState::Attach(grpc::Server* server,
                         std::vector<std::string> services) {
  absl::MutexLock lock(&mu_);
  attached_.push_back({server, std::move(services)});
  PublishLocked();
}

void HealthState::Detach(grpc::Server* server) {
  absl::MutexLock lock(&mu_);
  attached_.erase(std::remove_if(attached_.begin(), attached_.end(),
                                 [server](const Attached& a) {
                                   return a.server == server;
                                 }),
                  attached_.end());
}

void HealthState::SetStarted() {
  absl::MutexLock lock(&mu_);
  started_ = true;
  PublishLocked();
}

void HealthState::SetDraining() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
  PublishLocked();
}

void HealthState::SetPeersReachable(bool ok, const std::string& reason) {
  absl::MutexLock lock(&mu_);
  if (peers_ok_ == ok && peer_reason_ == reason) return;
  peers_ok_ = ok;
  peer_reason_ = ok ? "" : reason;
  PublishLocked();
}

bool HealthState::ready() const {
  absl::MutexLock lock(&mu_);
  return started_ && !draining_ && peers_ok_;
}

bool HealthState::live() const {
  absl::MutexLock lock(&mu_);
  return !draining_;
}

std::string HealthState::reason() const {
  absl::MutexLock lock(&mu_);
  if (draining_) return "draining";
  if (!started_) return "starting";
  if (!peers_ok_) return peer_reason_;
  return "";
}

void HealthState::PublishLocked() {
  const bool ready = started_ && !draining_ && peers_ok_;
  for (const Attached& a : attached_) {
    grpc::HealthCheckServiceInterface* health =
        a.server->GetHealthCheckService();
    if (health == nullptr) continue;
    health->SetServingStatus("", ready);
    health->SetServingStatus(kLivenessService, !draining_);
    for (const std::string& s : a.services) health->SetServingStatus(s, ready);
  }
}

void EnableHealthChecks() { grpc::EnableDefaultHealthCheckService(true); }

absl::StatusOr<std::unique_ptr<HealthServer>> HealthServer::Start(
    int port, HealthState* state, const std::string& host) {
  EnableHealthChecks();
  std::unique_ptr<HealthServer> result(new HealthServer(state));
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT,
                             0);  // a busy port is an error
  builder.AddListeningPort(absl::StrCat(host, ":", port),
                           grpc::InsecureServerCredentials(), &result->port_);
  result->server_ = builder.BuildAndStart();
  if (result->server_ == nullptr || result->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve health checks on ", host, ":", port,
                     " (--health-port in use or not allowed?)"));
  }
  state->Attach(result->server_.get());
  return result;
}

HealthServer::~HealthServer() {
  if (server_ == nullptr) return;
  state_->Detach(server_.get());
  server_->Shutdown(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(200));
}

const char* HealthStatusName(HealthStatus status) {
  switch (status) {
    case HealthStatus::kServing:
      return "SERVING";
    case HealthStatus::kNotServing:
      return "NOT_SERVING";
    case HealthStatus::kServiceUnknown:
      return "SERVICE_UNKNOWN";
    case HealthStatus::kUnreachable:
      return "UNREACHABLE";
  }
  return "UNKNOWN";
}

namespace {

// HealthCheckRequest { string service = 1; } in protobuf wire format.
grpc::ByteBuffer EncodeRequest(const std::string& service) {
  std::string bytes;
  if (!service.empty()) {
    bytes.push_back(0x0A);
    size_t n = service.size();
    while (n >= 0x80) {
      bytes.push_back(static_cast<char>((n & 0x7F) | 0x80));
      n >>= 7;
    }
    bytes.push_back(static_cast<char>(n));
    bytes += service;
  }
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

// HealthCheckResponse { ServingStatus status = 1; }: 1 SERVING, 2
// NOT_SERVING, 0 UNKNOWN, 3 SERVICE_UNKNOWN. Returns -1 if malformed.
int DecodeStatus(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return -1;
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  if (bytes.empty()) return 0;  // every field at its default: UNKNOWN
  if (bytes.size() < 2 || bytes[0] != 0x08) return -1;
  return static_cast<unsigned char>(bytes[1]) & 0x7F;
}

}  // namespace

HealthStatus CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                         const std::string& service, absl::Duration timeout,
                         std::string* error) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  SetDeadline(context, timeout);
  const grpc::ByteBuffer request = EncodeRequest(service);
  grpc::ByteBuffer response;
  grpc::Status status;
  absl::Notification done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(),
                 &request, &response, [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  if (status.error_code() == grpc::StatusCode::NOT_FOUND)
    return HealthStatus::kServiceUnknown;
  if (!status.ok()) {
    if (error != nullptr) {
      *error = absl::StrCat(FromGrpcStatus(status).ToString());
    }
    return HealthStatus::kUnreachable;
  }
  switch (DecodeStatus(response)) {
    case 1:
      return HealthStatus::kServing;
    case 3:
      return HealthStatus::kServiceUnknown;
    case -1:
      if (error != nullptr) *error = "malformed HealthCheckResponse";
      return HealthStatus::kUnreachable;
    default:
      return HealthStatus::kNotServing;
  }
}

}  // namespace ferry
