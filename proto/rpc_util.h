// gRPC glue shared by every service adapter and client: status conversion,
// deadlines, channel and server options. The only place that converts
// between absl::Status and grpc::Status.
#ifndef FERRY_PROTO_RPC_UTIL_H_
#define FERRY_PROTO_RPC_UTIL_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"

namespace ferry {

// Largest message any ferry service accepts or sends (tensor data travels in
// chunks far below this; the limit bounds what a peer can make us allocate).
inline constexpr int kMaxMessageBytes = 64 << 20;

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// Sets a deadline `timeout` from now on `context`.
void SetDeadline(grpc::ClientContext& context, absl::Duration timeout);

// A channel to `address` with ferry's options: raised message limits, no
// compression, a dedicated subchannel (one connection per peer pair),
// keepalive so dead peers are noticed.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address);

// Applies ferry's server options (message limits, keepalive) to `builder`.
void ConfigureServerBuilder(grpc::ServerBuilder& builder);

}  // namespace ferry

#endif  // FERRY_PROTO_RPC_UTIL_H_
