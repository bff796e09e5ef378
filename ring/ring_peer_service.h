// gRPC adapter of a worker's ring peer role (ferry.v1.RingPeer): files the
// Exchange streams of the left neighbour into a RingMailbox and serves
// GetWeights from a WeightsPublisher. A few lines per method; the logic is
// in the mailbox, the publisher and GrpcRingTransport.
// Both methods first check the process's bearer token (proto/rpc_auth.h):
// UNAUTHENTICATED "missing bearer token" / "wrong bearer token" when one is
// configured and the call lacks it. The server's port uses the process's
// TLS settings (AddServingPort).
//
// Exchange is registered raw (grpc::ByteBuffer) and parses each RingMessage
// itself: gRPC reports a message that does not parse to a read reactor
// exactly like the end of the stream, which would end the call OK and drop
// the rest of the stream silently. Instead a message that does not parse
// ends the call with INVALID_ARGUMENT "ring message N does not parse" (N
// counts the stream's messages from 1) and fails the stream's generation in
// the mailbox (RingMailbox::Fail), so the collective waiting for the lost
// pieces fails at once rather than at its deadline. The summary is the
// canonical ExchangeSummary encoding.
#ifndef FERRY_RING_RING_PEER_SERVICE_H_
#define FERRY_RING_RING_PEER_SERVICE_H_

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/byte_counter.h"
#include "common/link_shaper.h"
#include "ferry/v1/ring.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "ring/ring_mailbox.h"
#include "ring/weights_publisher.h"

namespace ferry {

// Peer role name in byte accounting for worker <-> worker traffic.
inline constexpr char kRingPeerRole[] = "worker";

class RingPeerService final
    : public v1::RingPeer::WithRawCallbackMethod_Exchange<
          v1::RingPeer::CallbackService> {
 public:
  // Pointers are not owned and must outlive the service. `job_id` may be set
  // later (set_job_id) once the worker knows its job; until then every
  // call is refused with UNAVAILABLE.
  // `shaper` (may be null: none) delays the next read of an Exchange
  // stream until the message read passed its receive bucket.
  RingPeerService(RingMailbox* mailbox, WeightsPublisher* publisher,
                  ByteCounter* counter, LinkShaper* shaper = nullptr)
      : mailbox_(mailbox),
        publisher_(publisher),
        counter_(counter),
        shaper_(shaper) {}

  void set_job_id(const std::string& job_id);

  // The stream carries encoded ferry.v1.RingMessage messages; `response`
  // receives the encoded ferry.v1.ExchangeSummary.
  grpc::ServerReadReactor<grpc::ByteBuffer>* Exchange(
      grpc::CallbackServerContext* context,
      grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<v1::WeightsChunk>* GetWeights(
      grpc::CallbackServerContext* context,
      const v1::WeightsRequest* request) override;
  // Maps the offered link (ring/shm_link.h) and attaches it to the mailbox
  // for the offer's generation; answers not accepted, with the reason,
  // when it cannot be mapped or is not the link offered.
  grpc::ServerUnaryReactor* OfferSharedMemory(
      grpc::CallbackServerContext* context, const v1::SharedMemoryOffer* offer,
      v1::SharedMemoryAnswer* answer) override;

  std::string job_id() const;
  RingMailbox* mailbox() const { return mailbox_; }
  WeightsPublisher* publisher() const { return publisher_; }
  ByteCounter* counter() const { return counter_; }
  LinkShaper* shaper() const { return shaper_; }

 private:
  RingMailbox* const mailbox_;
  WeightsPublisher* const publisher_;
  ByteCounter* const counter_;
  LinkShaper* const shaper_;
  mutable absl::Mutex mu_;
  std::string job_id_ ABSL_GUARDED_BY(mu_);
};

// A running peer server.
struct RingPeerServer {
  // Closes the mailbox first, so that streams paused for read-ahead read on
  // and end, then stops the server, cancelling the calls still open after
  // kRingPeerShutdownGrace: a stream beside a shared-memory link reads
  // nothing after its hello, and its sender may be waiting on the link,
  // which the mailbox (destroyed after the server) still holds.
  ~RingPeerServer() {
    if (mailbox != nullptr) mailbox->Close();
    if (server != nullptr) {
      server->Shutdown(std::chrono::system_clock::now() +
                       kRingPeerShutdownGrace);
    }
  }
  static constexpr std::chrono::seconds kRingPeerShutdownGrace{1};

  std::unique_ptr<RingMailbox> mailbox;
  std::unique_ptr<WeightsPublisher> publisher;
  std::unique_ptr<ByteCounter> counter;
  std::unique_ptr<RingPeerService> service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;                  // the bound port
  LinkShaper* shaper = nullptr;  // link emulation of this worker; not owned
};

// Starts a RingPeer server on `listen_address` (HOST:PORT, port 0 picks a
// free one), its Exchange streams shaped by `shaper` when set (not owned;
// must outlive the server). UNAVAILABLE when the address cannot be bound.
absl::StatusOr<std::unique_ptr<RingPeerServer>> StartRingPeerServer(
    const std::string& listen_address, LinkShaper* shaper = nullptr);

// The address other workers reach this worker's peer service at:
// `advertise` (a HOST alone gets `port`), else the listen host (this
// machine's hostname for a wildcard such as 0.0.0.0) with `port`.
std::string AdvertisedPeerAddress(const std::string& listen,
                                  const std::string& advertise, int port);

}  // namespace ferry

#endif  // FERRY_RING_RING_PEER_SERVICE_H_
