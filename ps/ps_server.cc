#include "ps/ps_server.h"

#include <chrono>
#include <mutex>
#include <utility>

#include "absl/strings/str_format.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "proto/rpc_util.h"

namespace ferry {

void PsServer::Shutdown(absl::Duration grace) {
  if (server == nullptr) return;
  if (shard != nullptr) shard->Shutdown();
  server->Shutdown(std::chrono::system_clock::now() +
                   absl::ToChronoMilliseconds(grace));
  server->Wait();
  server.reset();
}

absl::StatusOr<PsServer> StartPsServer(PsShard* shard,
                                       const std::string& listen_address,
                                       PsCheckpointer* checkpointer,
                                       LinkShaper* shaper) {
  static std::once_flag reflection_once;
  std::call_once(reflection_once, [] {
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  });
  PsServer result;
  result.shard = shard;
  result.service = std::make_unique<PsService>(shard, checkpointer, shaper);
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(builder);
  if (const int64_t window = shard->config().limits.receive_window_bytes;
      window > 0) {
    builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES,
                               static_cast<int>(window));
  }
  AddServingPort(builder, listen_address, &result.port);
  builder.RegisterService(result.service.get());
  result.server = builder.BuildAndStart();
  if (result.server == nullptr || result.port == 0) {
    result.server.reset();
    return absl::UnavailableError(
        absl::StrFormat("cannot serve shard on %s", listen_address));
  }
  return result;
}

}  // namespace ferry
