#include "proto/rpc_util.h"

#include <chrono>
#include <cstdio>

#include "common/log.h"

namespace ferry {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

void SetDeadline(grpc::ClientContext& context, absl::Duration timeout) {
  context.set_deadline(std::chrono::system_clock::now() +
                       absl::ToChronoMilliseconds(timeout));
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address) {
  return MakeChannel(address, ProcessRpcSecurity());
}

namespace {

grpc::ChannelArguments MessageLimitArgs() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  return args;
}

}  // namespace

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           const RpcSecurityConfig& security) {
  grpc::ChannelArguments args = MessageLimitArgs();
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // A peer that is not up yet (processes of a job start together) or is
  // restarting is tried again after 50 ms, then 1.6x longer each time up to
  // 2 s, instead of gRPC's first backoff of a whole second: a call made
  // during the backoff fails at once, so a coordinator whose first call to
  // a shard came too early otherwise stalled the job's next call to it.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  if (security.tls() && !security.server_name.empty()) {
    args.SetSslTargetNameOverride(security.server_name);
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      MakeChannelCredentials(security);
  if (security.token.empty()) {
    return grpc::CreateCustomChannel(address, credentials, args);
  }
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      address, credentials, args, MakeClientInterceptors(security));
}

std::shared_ptr<grpc::Channel> MakeInProcessChannel(grpc::Server* server) {
  return server->InProcessChannel(MessageLimitArgs());
}

void MarkInProcessCall(grpc::ClientContext& context) {
  context.AddMetadata(kInProcessKey, InProcessSecret());
}

void ConfigureServerBuilder(grpc::ServerBuilder& builder) {
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  // A port another process (or server) holds is an error, not shared.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
}

void AddServingPort(grpc::ServerBuilder& builder, const std::string& address,
                    int* port) {
  AddServingPort(builder, address, port, ProcessRpcSecurity());
}

void AddServingPort(grpc::ServerBuilder& builder, const std::string& address,
                    int* port, const RpcSecurityConfig& security) {
  std::shared_ptr<grpc::ServerCredentials> credentials =
      MakeServerCredentials(security);
  if (credentials == nullptr) {
    LogError("cannot serve over TLS without --tls-cert and --tls-key",
             {{"address", address}});
    *port = 0;
    return;
  }
  builder.AddListeningPort(address, credentials, port);
}

}  // namespace ferry
