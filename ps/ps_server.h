// Starting a PS shard's gRPC server, the same way in main.cc and in tests.
#ifndef FERRY_PS_PS_SERVER_H_
#define FERRY_PS_PS_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "ps/ps_service.h"
#include "ps/ps_shard.h"

namespace ferry {

// A running server for one shard. Movable. Destroying it shuts it down.
struct PsServer {
  PsServer() = default;
  PsServer(PsServer&&) = default;
  PsServer& operator=(PsServer&&) = default;
  ~PsServer() { Shutdown(); }

  // Ends the shard's pull waits (they finish UNAVAILABLE), stops accepting
  // calls and waits up to `grace` for calls in flight, then cancels them.
  // Idempotent. Thread-compatible (call from one thread).
  void Shutdown(absl::Duration grace = absl::Seconds(5));

  PsShard* shard = nullptr;            // not owned; outlives the server
  std::unique_ptr<PsService> service;  // declared first: outlives `server`
  std::unique_ptr<grpc::Server> server;
  int port = 0;  // the bound port (the OS's choice for port 0)
};

// Starts serving `shard` on `listen_address` ("host:port"; port 0 lets the OS
// choose) with ConfigureServerBuilder's options and gRPC reflection.
// Checkpoint and Restore go to `checkpointer` (null: they answer
// FAILED_PRECONDITION). Push and pull messages go through `shaper` when it
// is set (link emulation). UNAVAILABLE when the address cannot be bound.
// `shard`, `checkpointer` and `shaper` must outlive the returned server.
absl::StatusOr<PsServer> StartPsServer(
    PsShard* shard, const std::string& listen_address = "127.0.0.1:0",
    PsCheckpointer* checkpointer = nullptr, LinkShaper* shaper = nullptr);

}  // namespace ferry

#endif  // FERRY_PS_PS_SERVER_H_
