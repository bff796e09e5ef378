#include "ring/grpc_ring_transport.h"

#include <cstring>
#include <deque>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "ferry/v1/ring.grpc.pb.h"
#include "google/protobuf/io/coded_stream.h"
#include "grpcpp/generic/generic_stub.h"
#include "proto/raw_wire.h"
#include "proto/rpc_util.h"
#include "ring/ring_wire.h"

namespace ferry {
namespace {

constexpr char kExchangeMethod[] = "/ferry.v1.RingPeer/Exchange";
// How long the first send waits for the next rank's answer to a
// shared-memory offer before the stream carries the messages.
constexpr absl::Duration kOfferTimeout = absl::Seconds(5);
// An unlocked link this old is no offer in flight (kOfferTimeout bounds
// those, and their writer holds its lock throughout).
constexpr absl::Duration kStaleShmLinkAge = absl::Seconds(60);

// A RingMessage on the wire with the floats copied once: the small fields
// (hello, op, stage, piece) serialized by protobuf, then field 5's tag and
// length, then the data in its own slice. Protobuf parses the concatenation
// as one RingMessage.
// `head` serialized, then field 5's key and a length of `bytes`: what goes
// before the data.
std::string DataPrefix(const v1::RingMessage& head, uint64_t bytes) {
  std::string prefix = head.SerializeAsString();
  uint8_t data_head[11];
  data_head[0] = 5 << 3 | kWireLength;  // field 5: data
  const uint8_t* end = PutVarint(bytes, data_head + 1);
  prefix.append(reinterpret_cast<const char*>(data_head), end - data_head);
  return prefix;
}

grpc::ByteBuffer EncodeRingMessage(const v1::RingMessage& head,
                                   const float* data, int64_t count) {
  const uint64_t bytes = static_cast<uint64_t>(count) * sizeof(float);
  grpc::Slice slices[2] = {grpc::Slice(DataPrefix(head, bytes)),
                           grpc::Slice(static_cast<size_t>(bytes))};
  if (bytes > 0)
    std::memcpy(const_cast<uint8_t*>(slices[1].begin()), data, bytes);
  return grpc::ByteBuffer(slices, 2);
}

// The same with the floats not copied: their slice is `data` itself, a
// slice gRPC neither frees nor counts references to. gRPC may keep the
// slice after the message's write completed (it does: until the stream
// ends), but reads its bytes only until then.
grpc::ByteBuffer EncodeRingBorrowed(const v1::RingMessage& head,
                                    const float* data, int64_t count) {
  const uint64_t bytes = static_cast<uint64_t>(count) * sizeof(float);
  const grpc::Slice slices[2] = {
      grpc::Slice(DataPrefix(head, bytes)),
      grpc::Slice(data, static_cast<size_t>(bytes), grpc::Slice::STATIC_SLICE)};
  return grpc::ByteBuffer(slices, 2);
}

// The same for an opaque payload (a compressed gradient piece): `head`
// carries encoded = true, `payload` is copied once into its own slice.
grpc::ByteBuffer EncodeRingPayload(const v1::RingMessage& head,
                                   const std::string& payload) {
  const grpc::Slice slices[2] = {grpc::Slice(DataPrefix(head, payload.size())),
                                 grpc::Slice(payload)};
  return grpc::ByteBuffer(slices, 2);
}

}  // namespace

// The client side of one Exchange stream: queued messages, one write in
// flight. Callbacks come from gRPC threads; `mu_` guards the queue.
// (The service is client-streaming; the generic stub drives it as a bidi
// call: many messages out, the summary read back at the end.)
class GrpcRingTransport::Writer final
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // `link` (may be null): the shared-memory link to the same peer, failed
  // when the stream ends.
  Writer(const GrpcRingTransportOptions& options, std::string peer_name,
         std::shared_ptr<ShmLinkSender> link)
      : options_(options),
        peer_name_(std::move(peer_name)),
        link_(std::move(link)) {
    const int next = (options.rank + 1) % static_cast<int>(options.ring.size());
    stub_ = std::make_unique<grpc::GenericStub>(
        MakeChannel(options.ring[next].peer_address));
    SetDeadline(context_, options.stream_deadline);
    stub_->PrepareBidiStreamingCall(&context_, kExchangeMethod,
                                    grpc::StubOptions(), this);
    StartRead(&summary_);
    StartCall();
  }

  // Queues `message` (`borrowed`: over a caller's buffer, see
  // WaitWritten). UNAVAILABLE once the stream has ended.
  absl::Status Enqueue(grpc::ByteBuffer message, bool borrowed = false) {
    absl::MutexLock lock(&mu_);
    if (done_) return failure_;
    // The summary read ended: the stream is over and OnDone may be running
    // on another thread, so no write or hold may start (a hold for a timer
    // could outlive this reactor).
    if (!read_pending_) {
      return absl::UnavailableError(
          absl::StrFormat("the link to %s ended", peer_name_));
    }
    // Counted when handed over, so a report right after a collective
    // includes all of it.
    options_.counter->AddSent(static_cast<int64_t>(message.Length()));
    if (options_.shaper != nullptr) {
      release_.push_back(options_.shaper->ReserveSend(
          static_cast<int64_t>(message.Length()), absl::Now()));
    }
    queue_.push_back(std::move(message));
    borrowed_.push_back(borrowed);
    if (borrowed) ++borrowed_queued_;
    if (!writing_) StartNextLocked();
    return absl::OkStatus();
  }

  // Waits until no queued message is borrowed any more: each was written
  // (OnWriteDone: gRPC has put its bytes on the socket) or the stream ended
  // (no write starts after OnDone). False at the deadline.
  bool WaitWritten(absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithDeadline(
        absl::Condition(
            +[](int64_t* queued) { return *queued == 0; }, &borrowed_queued_),
        deadline);
  }

  void Cancel() { context_.TryCancel(); }

  // Half-closes once the queue is drained, then waits for the end.
  void Close(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    closing_ = true;
    if (!writing_ && !done_ && !closed_ && read_pending_) {
      closed_ = true;
      StartWritesDone();
    }
    if (!mu_.AwaitWithTimeout(absl::Condition(&done_), timeout)) {
      context_.TryCancel();
      mu_.Await(absl::Condition(&done_));
    }
  }

  // The summary, or the stream's end.
  void OnReadDone(bool) override {
    absl::MutexLock lock(&mu_);
    read_pending_ = false;
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) return;  // the stream failed; OnDone follows with the status
    queue_.pop_front();
    if (borrowed_.front()) --borrowed_queued_;
    borrowed_.pop_front();
    if (!release_.empty()) release_.pop_front();
    if (!queue_.empty()) {
      StartNextLocked();
    } else if (closing_ && !closed_) {
      closed_ = true;
      StartWritesDone();
    }
  }

  void OnDone(const grpc::Status& status) override {
    absl::MutexLock lock(&mu_);
    failure_ = absl::UnavailableError(
        absl::StrFormat("the link to %s ended: %s", peer_name_,
                        status.ok() ? std::string("closed")
                                    : FromGrpcStatus(status).ToString()));
    if (!status.ok() || !closing_) {
      options_.mailbox->Fail(options_.generation, failure_);
    }
    if (link_ != nullptr) link_->Fail(failure_);
    done_ = true;
    borrowed_queued_ = 0;  // nothing is written any more
  }

 private:
  void StartNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (done_) return;
    writing_ = true;  // also while the message waits for the link
    if (!release_.empty() && release_.front() > absl::Now()) {
      // Link emulation: a hold keeps the call alive until the timer has
      // started the write. Added only while the call cannot finish: from
      // a reaction, from the previous timer (which holds its own hold), or
      // from Enqueue while the summary read is pending (checked there).
      AddHold();
      options_.shaper->RunAt(release_.front(), [this] {
        {
          absl::MutexLock lock(&mu_);
          StartNextLocked();
        }
        RemoveHold();
      });
      return;
    }
    StartWrite(&queue_.front());
  }

  const GrpcRingTransportOptions& options_;
  const std::string peer_name_;
  const std::shared_ptr<ShmLinkSender> link_;
  std::unique_ptr<grpc::GenericStub> stub_;
  grpc::ClientContext context_;
  grpc::ByteBuffer summary_;
  absl::Mutex mu_;
  std::deque<grpc::ByteBuffer> queue_ ABSL_GUARDED_BY(mu_);
  // Per queued message: over a caller's buffer (SendBorrowed); how many.
  std::deque<bool> borrowed_ ABSL_GUARDED_BY(mu_);
  int64_t borrowed_queued_ ABSL_GUARDED_BY(mu_) = 0;
  // Link emulation: when each queued message may go (empty without one).
  std::deque<absl::Time> release_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  // The summary read, started before the call: pending until the stream
  // ends; while it is, the call cannot finish.
  bool read_pending_ ABSL_GUARDED_BY(mu_) = true;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::unique_ptr<GrpcRingTransport>> GrpcRingTransport::Create(
    GrpcRingTransportOptions options) {
  const int n = static_cast<int>(options.ring.size());
  if (n == 0 || options.rank < 0 || options.rank >= n) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ring rank %d outside a ring of %d", options.rank, n));
  }
  if (options.mailbox == nullptr || options.counter == nullptr) {
    return absl::InvalidArgumentError(
        "ring transport needs a mailbox and a counter");
  }
  for (int r = 0; r < n; ++r) {
    if (n > 1 && options.ring[r].peer_address.empty()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("ring member %d (%s) has no peer address", r,
                          options.ring[r].worker_id));
    }
  }
  options.mailbox->Enter(options.generation);
  return std::unique_ptr<GrpcRingTransport>(
      new GrpcRingTransport(std::move(options)));
}

namespace {

uint32_t RingFingerprint(const std::vector<RingMemberAddress>& ring) {
  uint32_t crc = 0;
  for (const RingMemberAddress& m : ring) {
    crc = Crc32cExtend(crc, m.worker_id);
    crc = Crc32cExtend(crc, "\n");
  }
  return crc;
}

}  // namespace

GrpcRingTransport::GrpcRingTransport(GrpcRingTransportOptions options)
    : options_(std::move(options)),
      ring_fingerprint_(RingFingerprint(options_.ring)),
      inbound_key_(
          ShmLinkKey(options_
                         .ring[(options_.rank + options_.ring.size() - 1) %
                               options_.ring.size()]
                         .worker_id,
                     ring_fingerprint_)) {}

GrpcRingTransport::~GrpcRingTransport() {
  if (shm_ != nullptr) shm_->Close(absl::Seconds(1));
  if (writer_ != nullptr) writer_->Close(absl::Seconds(1));
}

std::string GrpcRingTransport::PeerName(int rank) const {
  const RingMemberAddress& m = options_.ring[rank];
  return absl::StrFormat("ring rank %d (%s at %s)", rank, m.worker_id,
                         m.peer_address);
}

std::shared_ptr<ShmLinkSender> GrpcRingTransport::OfferLink() {
  const int next = (rank() + 1) % size();
  // What a sender killed during its offer left behind (once a generation;
  // a live offer is answered or abandoned within its deadline).
  if (const int swept = SweepStaleShmLinks(kStaleShmLinkAge); swept > 0) {
    LogInfo(absl::StrFormat(
        "ring rank %d: removed %d shared-memory link(s) that killed "
        "senders left in /dev/shm",
        rank(), swept));
  }
  absl::StatusOr<std::unique_ptr<ShmLinkWriter>> writer =
      ShmLinkWriter::Create(options_.shared_memory_bytes);
  if (!writer.ok()) {
    LogInfo(absl::StrFormat(
        "ring rank %d: no shared-memory link to %s (%s); the stream "
        "carries the ring's messages",
        rank(), PeerName(next), writer.status().ToString()));
    return nullptr;
  }
  v1::SharedMemoryOffer offer;
  offer.set_job_id(options_.job_id);
  offer.set_generation(options_.generation);
  offer.set_from_rank(rank());
  offer.set_from_worker_id(options_.ring[rank()].worker_id);
  offer.set_name((*writer)->name());
  offer.set_nonce((*writer)->nonce().data(), (*writer)->nonce().size());
  offer.set_capacity(options_.shared_memory_bytes);
  offer.set_ring_fingerprint(ring_fingerprint_);
  v1::SharedMemoryAnswer answer;
  grpc::ClientContext context;
  SetDeadline(context, kOfferTimeout);
  const grpc::Status status =
      v1::RingPeer::NewStub(MakeChannel(options_.ring[next].peer_address))
          ->OfferSharedMemory(&context, offer, &answer);
  (*writer)->Unlink();  // mapped by the peer, or never will be
  options_.counter->AddSent(static_cast<int64_t>(offer.ByteSizeLong()));
  options_.counter->AddReceived(static_cast<int64_t>(answer.ByteSizeLong()));
  if (!status.ok() || !answer.accepted()) {
    LogInfo(absl::StrFormat(
        "ring rank %d: %s took no shared-memory link (%s); the stream "
        "carries the ring's messages",
        rank(), PeerName(next),
        status.ok() ? answer.reason() : FromGrpcStatus(status).ToString()));
    return nullptr;
  }
  return std::make_shared<ShmLinkSender>(*std::move(writer), options_.counter,
                                         PeerName(next));
}

void GrpcRingTransport::Connect() {
  if (writer_ != nullptr) return;
  const int next = (rank() + 1) % size();
  if (options_.shared_memory && options_.shaper == nullptr && size() > 1) {
    shm_ = OfferLink();
  }
  writer_ = std::make_unique<Writer>(options_, PeerName(next), shm_);
  if (shm_ != nullptr) {
    // The stream carries only the hello (and tells each end of the other's
    // end); the messages go through the link.
    v1::RingMessage hello = StartMessage(RingTag{});
    hello.mutable_hello()->set_shared_memory(true);
    (void)writer_->Enqueue(EncodeRingMessage(hello, nullptr, 0));
  }
}

v1::RingMessage GrpcRingTransport::StartMessage(const RingTag& tag) {
  Connect();
  v1::RingMessage message;
  if (!hello_sent_) {
    hello_sent_ = true;
    v1::RingHello* hello = message.mutable_hello();
    hello->set_job_id(options_.job_id);
    hello->set_generation(options_.generation);
    hello->set_from_rank(rank());
    hello->set_ring_size(size());
    hello->set_from_worker_id(options_.ring[rank()].worker_id);
  }
  message.set_op_id(tag.op_id);
  message.set_stage(tag.stage);
  message.set_piece(tag.piece);
  return message;
}

absl::Status GrpcRingTransport::Send(const RingTag& tag, const float* data,
                                     int64_t count) {
  Connect();
  if (shm_ != nullptr) return shm_->Send(tag, data, count);
  v1::RingMessage message = StartMessage(tag);
  return writer_->Enqueue(EncodeRingMessage(message, data, count));
}

absl::Status GrpcRingTransport::SendBorrowed(const RingTag& tag,
                                             const float* data, int64_t count) {
  Connect();
  if (shm_ != nullptr) return shm_->SendBorrowed(tag, data, count);
  if (count == 0) return Send(tag, data, count);
  v1::RingMessage message = StartMessage(tag);
  return writer_->Enqueue(EncodeRingBorrowed(message, data, count),
                          /*borrowed=*/true);
}

absl::Status GrpcRingTransport::WaitSent(absl::Time deadline) {
  if (shm_ != nullptr ? shm_->WaitWritten(deadline)
                      : writer_ == nullptr || writer_->WaitWritten(deadline)) {
    return absl::OkStatus();
  }
  const int next = (rank() + 1) % size();
  return absl::DeadlineExceededError(
      absl::StrFormat("ring rank %d: pieces sent to %s not written by the "
                      "deadline",
                      rank(), PeerName(next)));
}

void GrpcRingTransport::CountReceived(const RingTag& tag, size_t payload_bytes,
                                      bool encoded) {
  // The wire size of the RingMessage that carried it (the hello, if any,
  // was counted on arrival by the peer service).
  options_.counter->AddReceived(
      RingMessageWireBytes(tag, payload_bytes, encoded));
}

absl::Status GrpcRingTransport::Receive(
    const RingTag& tag, absl::Time deadline, std::optional<RingPayload>* filed,
    const std::function<absl::Status(ShmLinkReader&, const ShmLinkMessage&)>&
        direct) {
  const int prev = (rank() + size() - 1) % size();
  const auto in_context = [&](const absl::Status& s) {
    return absl::Status(
        s.code(),
        absl::StrFormat("ring rank %d waiting for %s from %s: %s", rank(),
                        tag.ToString(), PeerName(prev), s.message()));
  };
  for (;;) {
    absl::StatusOr<RingMailbox::Arrival> arrival = options_.mailbox->TakeOrLink(
        options_.generation, tag, inbound_key_, deadline);
    if (!arrival.ok()) return in_context(arrival.status());
    if (arrival->payload.has_value()) {
      *filed = std::move(arrival->payload);
      return absl::OkStatus();
    }
    ShmLinkReader& link = *arrival->link;
    bool mine = false;
    const absl::Status s = [&]() -> absl::Status {
      // A message of this tag may come by the stream meanwhile (another
      // transport of the sender has the link): Deliver nudges the link.
      ASSIGN_OR_RETURN(const ShmLinkMessage next, link.Peek(deadline, [&] {
        return options_.mailbox->Filed(options_.generation, tag);
      }));
      if (next.tag == tag) {
        mine = true;
        return direct(link, next);
      }
      // Another taker's message: filed for it.
      std::string bytes;
      bytes.reserve(static_cast<size_t>(next.bytes));
      RETURN_IF_ERROR(link.Consume(
          [&bytes](const char* data, size_t n) { bytes.append(data, n); },
          deadline));
      return options_.mailbox->Deliver(options_.generation, next.tag,
                                       RingPayload(std::move(bytes)));
    }();
    options_.mailbox->ReleaseLink(inbound_key_);
    if (mine) return s.ok() ? s : in_context(s);
    // The stream filed it meanwhile (Peek stopped for it).
    if (options_.mailbox->Filed(options_.generation, tag)) continue;
    if (link.sender_gone() && absl::IsUnavailable(s)) {
      // Its sender's transport ended (a process that died also breaks its
      // stream, which fails the generation): what comes next comes by
      // the stream.
      options_.mailbox->DetachLink(inbound_key_, &link);
      continue;
    }
    if (!s.ok()) return in_context(s);
  }
}

absl::Status GrpcRingTransport::Recv(const RingTag& tag, float* dst,
                                     int64_t count, RecvOp op,
                                     absl::Time deadline) {
  const int prev = (rank() + size() - 1) % size();
  const int64_t expected = count * static_cast<int64_t>(sizeof(float));
  const auto wrong_size = [&](int64_t bytes) {
    return absl::DataLossError(absl::StrFormat(
        "ring message %s from %s holds %d bytes, expected %d floats",
        tag.ToString(), PeerName(prev), bytes, count));
  };
  std::optional<RingPayload> filed;
  RETURN_IF_ERROR(Receive(
      tag, deadline, &filed,
      [&](ShmLinkReader& link, const ShmLinkMessage& message) -> absl::Status {
        const bool fits = message.bytes == expected;
        size_t at = 0;  // bytes applied
        const absl::Status s = link.Consume(
            [&](const char* data, size_t n) {
              if (!fits) return;
              ApplyPacked(data, n / sizeof(float), dst + at / sizeof(float),
                          op);
              at += n;
            },
            deadline);
        CountReceived(tag, static_cast<size_t>(message.bytes),
                      /*encoded=*/false);
        if (!s.ok()) return s;
        return fits ? absl::OkStatus() : wrong_size(message.bytes);
      }));
  if (!filed.has_value()) return absl::OkStatus();
  CountReceived(tag, filed->size(), /*encoded=*/false);
  if (static_cast<int64_t>(filed->size()) != expected) {
    return wrong_size(static_cast<int64_t>(filed->size()));
  }
  // Straight from the slices the message arrived in (ring/ring_wire.h).
  filed->ApplyFloats(dst, op);
  return absl::OkStatus();
}

absl::Status GrpcRingTransport::SendBytes(const RingTag& tag,
                                          std::string payload) {
  Connect();
  if (shm_ != nullptr) return shm_->SendBytes(tag, std::move(payload));
  v1::RingMessage message = StartMessage(tag);
  message.set_encoded(true);
  return writer_->Enqueue(EncodeRingPayload(message, payload));
}

absl::StatusOr<std::string> GrpcRingTransport::RecvBytes(const RingTag& tag,
                                                         absl::Time deadline) {
  std::string bytes;
  std::optional<RingPayload> filed;
  RETURN_IF_ERROR(Receive(
      tag, deadline, &filed,
      [&](ShmLinkReader& link, const ShmLinkMessage& message) -> absl::Status {
        bytes.reserve(static_cast<size_t>(message.bytes));
        CountReceived(tag, static_cast<size_t>(message.bytes),
                      /*encoded=*/true);
        return link.Consume(
            [&bytes](const char* data, size_t n) { bytes.append(data, n); },
            deadline);
      }));
  if (!filed.has_value()) return bytes;
  CountReceived(tag, filed->size(), /*encoded=*/true);
  return std::move(*filed).TakeString();
}

void GrpcRingTransport::Abort() {
  options_.mailbox->Fail(
      options_.generation,
      absl::CancelledError("the ring transport was aborted"));
  if (shm_ != nullptr) {
    shm_->Fail(absl::CancelledError("the ring transport was aborted"));
  }
  if (writer_ != nullptr) writer_->Cancel();
}

}  // namespace ferry
