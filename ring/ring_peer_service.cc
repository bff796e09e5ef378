#include "ring/ring_peer_service.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/peer_limits.h"
#include "common/status_macros.h"
#include "google/protobuf/io/coded_stream.h"
#include "proto/raw_wire.h"
#include "proto/rpc_util.h"
#include "proto/unary_handler.h"
#include "ring/ring_wire.h"
#include "ring/shm_link.h"

namespace ferry {
namespace {

constexpr int64_t kWeightsChunkElements = 256 * 1024;  // 1 MiB

// Files every message of one neighbour's stream; deletes itself in OnDone.
// Reads the stream raw and parses each message itself, so that a message
// that does not parse is an error rather than the stream's end (see the
// header). gRPC serializes the reactions of one call; the lock guards only
// the pause (RingMailbox::MayReadOn), which the mailbox ends from the
// collective's thread and OnCancel from gRPC's.
class ExchangeReactor final : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  ExchangeReactor(grpc::CallbackServerContext* context,
                  RingPeerService* service, grpc::ByteBuffer* response)
      : context_(context), service_(service), response_(response) {
    StartRead(&buffer_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      if (context_->IsCancelled() && generation_ >= 0) {
        service_->mailbox()->Fail(generation_,
                                  absl::UnavailableError(absl::StrFormat(
                                      "the stream from ring rank %d (%s) broke",
                                      from_rank_, from_worker_)));
      }
      FinishWithSummary();
      return;
    }
    ++received_;
    const int64_t size = static_cast<int64_t>(buffer_.Length());
    if (LinkShaper* shaper = service_->shaper(); shaper != nullptr) {
      // Link emulation: the message is taken in (filed for the collective)
      // once it passed the receive bucket; only a read's reaction finishes
      // the call, so the reactor outlives the timer's callback.
      const absl::Time now = absl::Now();
      const absl::Time release = shaper->ReserveReceive(size, now);
      if (release > now) {
        shaper->RunAt(release, [this, size] { TakeIn(size); });
        return;
      }
    }
    TakeIn(size);
  }

  void OnDone() override { delete this; }

  // A paused stream whose call ends (the neighbour went, the server stops)
  // reads on, so that its read fails and the call finishes.
  void OnCancel() override {
    bool read = false;
    {
      absl::MutexLock lock(&pause_mu_);
      cancelled_ = true;
      if (paused_token_ >= 0 &&
          service_->mailbox()->CancelResume(paused_token_)) {
        paused_token_ = -1;
        read = true;
      }
    }
    if (read) StartRead(&buffer_);
  }

 private:
  // Parses and files the message read into buffer_ (`size` bytes), then
  // reads on.
  void TakeIn(int64_t size) {
    absl::StatusOr<RingWireMessage> parsed = ParseRingWire(buffer_);
    buffer_.Clear();  // the message's slices are held by `parsed` alone
    if (!parsed.ok()) {
      service_->counter()->AddReceived(size);  // never taken
      End(absl::InvalidArgumentError(
          absl::StrFormat("ring message %d does not parse", received_)));
      return;
    }
    message_ = std::move(parsed->head);
    data_ = std::move(parsed->data);
    // Only the hello is counted here; the rest of a filed message when the
    // collective takes it (GrpcRingTransport), so that a report after a
    // step does not count messages of the next step that arrived early.
    const int64_t hello =
        message_.has_hello()
            ? static_cast<int64_t>(
                  1 +
                  google::protobuf::io::CodedOutputStream::VarintSize64(
                      message_.hello().ByteSizeLong()) +
                  message_.hello().ByteSizeLong())
            : 0;
    service_->counter()->AddReceived(hello);
    if (message_.has_hello() && message_.hello().shared_memory()) {
      // Nothing of it is filed to be counted when taken.
      service_->counter()->AddReceived(size - hello);
    }
    const absl::Status status = File();
    if (!status.ok()) {
      service_->counter()->AddReceived(size - hello);  // never taken
      End(status);
      return;
    }
    ReadNext();
  }

  // Reads the next message now, or once the mailbox lets it (read-ahead).
  void ReadNext() {
    {
      absl::MutexLock lock(&pause_mu_);
      int64_t token = -1;
      if (!cancelled_ &&
          !service_->mailbox()->MayReadOn([this] { Resume(); }, &token)) {
        paused_token_ = token;
        return;
      }
    }
    StartRead(&buffer_);
  }

  void Resume() {
    {
      absl::MutexLock lock(&pause_mu_);
      paused_token_ = -1;
    }
    StartRead(&buffer_);
  }

  // Ends the call OK with the encoded ExchangeSummary.
  void FinishWithSummary() {
    v1::ExchangeSummary summary;
    summary.set_messages(filed_);
    *response_ = SerializeMessage(summary);
    Finish(grpc::Status::OK);
  }

  // Ends the call with `error`, failing the stream's generation (if it got
  // that far) so that the collective waiting for its pieces fails at once.
  void End(const absl::Status& error) {
    if (generation_ >= 0) service_->mailbox()->Fail(generation_, error);
    Finish(ToGrpcStatus(error));
  }

  // Files message_ (the first must carry the hello); returns the error
  // that ends the stream.
  absl::Status File() {
    if (generation_ < 0) {
      if (!message_.has_hello()) {
        return absl::InvalidArgumentError(
            "the first ring message must carry the hello");
      }
      const v1::RingHello& hello = message_.hello();
      const std::string job = service_->job_id();
      if (job.empty()) {
        return absl::UnavailableError("this worker has not joined a job yet");
      }
      if (hello.job_id() != job) {
        return absl::FailedPreconditionError(absl::StrFormat(
            "ring message for job '%s'; this worker runs job '%s'",
            hello.job_id(), job));
      }
      RETURN_IF_ERROR(CheckIdLength("the ring hello's from_worker_id",
                                    hello.from_worker_id()));
      // Generations count from 0; a negative one would pass for "no hello
      // yet" here and leave a broken stream's collective waiting.
      if (hello.generation() < 0) {
        return absl::InvalidArgumentError(
            absl::StrFormat("ring hello of generation %d: generations are >= 0",
                            hello.generation()));
      }
      if (!service_->mailbox()->Enter(hello.generation())) {
        return absl::AbortedError(
            absl::StrFormat("ring generation %d is older than this worker's",
                            hello.generation()));
      }
      generation_ = hello.generation();
      from_rank_ = hello.from_rank();
      from_worker_ = hello.from_worker_id();
      // The messages come through the shared-memory link; this stream only
      // tells that its sender is alive.
      if (hello.shared_memory()) return absl::OkStatus();
    } else if (message_.has_hello()) {
      return absl::InvalidArgumentError("ring hello repeated in a stream");
    }
    if (!message_.encoded() && data_.size() % sizeof(float) != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "ring message of %d bytes is not a whole number of floats",
          data_.size()));
    }
    ++filed_;
    RingTag tag{message_.op_id(), message_.stage(), message_.piece()};
    return service_->mailbox()->Deliver(generation_, tag, std::move(data_));
  }

  grpc::CallbackServerContext* const context_;
  RingPeerService* const service_;
  grpc::ByteBuffer* const response_;
  grpc::ByteBuffer buffer_;  // the message being read
  v1::RingMessage message_;  // buffer_'s fields but its data, parsed
  RingPayload data_;         // buffer_'s data, in the slices it arrived in
  int64_t received_ = 0;     // messages read, the one in hand included
  int64_t filed_ = 0;        // ExchangeSummary.messages
  int64_t generation_ = -1;
  int from_rank_ = -1;
  std::string from_worker_;
  absl::Mutex pause_mu_;
  int64_t paused_token_ ABSL_GUARDED_BY(pause_mu_) = -1;  // -1: reading
  bool cancelled_ ABSL_GUARDED_BY(pause_mu_) = false;
};

// Streams one snapshot in chunks, one write in flight; deletes itself in
// OnDone.
class WeightsReactor final : public grpc::ServerWriteReactor<v1::WeightsChunk> {
 public:
  WeightsReactor(RingPeerService* service, const v1::WeightsRequest& request)
      : service_(service) {
    service_->counter()->AddReceived(
        static_cast<int64_t>(request.ByteSizeLong()));
    const std::string job = service_->job_id();
    if (request.job_id() != job) {
      Finish(ToGrpcStatus(absl::FailedPreconditionError(absl::StrFormat(
          "weights of job '%s' asked; this worker runs job '%s'",
          request.job_id(), job))));
      return;
    }
    absl::StatusOr<std::shared_ptr<const WeightsSnapshot>> snapshot =
        service_->publisher()->Get(request.min_step());
    if (!snapshot.ok()) {
      Finish(ToGrpcStatus(snapshot.status()));
      return;
    }
    snapshot_ = *std::move(snapshot);
    const int64_t total = snapshot_->total_elements;
    if (snapshot_->ranges.empty()) {
      segments_.push_back({{0, total}, 0});
    } else {
      int64_t packed = 0;  // where the range's values start
      for (const FlatRange& r : snapshot_->ranges) {
        segments_.push_back({r, packed});
        packed += r.size();
      }
    }
    WriteNext();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(
          grpc::Status(grpc::StatusCode::CANCELLED, "weights stream broken"));
      return;
    }
    WriteNext();
  }

  void OnDone() override { delete this; }

 private:
  // The dense chunks of every current segment (at least one chunk, maybe
  // empty), then the tables' blob in chunks of as many bytes.
  void WriteNext() {
    const int64_t total = snapshot_->total_elements;
    const int64_t tables = static_cast<int64_t>(snapshot_->tables.size());
    while (segment_ < segments_.size() &&
           std::max(offset_, segments_[segment_].range.begin) >=
               segments_[segment_].range.end) {
      ++segment_;  // this segment is sent (or empty)
    }
    const bool dense_left = segment_ < segments_.size();
    if (!dense_left && tables_offset_ >= tables && sent_any_) {
      Finish(grpc::Status::OK);
      return;
    }
    sent_any_ = true;
    chunk_.Clear();
    chunk_.set_steps_applied(snapshot_->steps_applied);
    chunk_.set_total_elements(total);
    chunk_.set_tables_bytes(tables);
    if (dense_left || tables == 0) {
      const Segment segment =
          dense_left ? segments_[segment_] : Segment{{total, total}, 0};
      offset_ = std::max(offset_, segment.range.begin);
      const int64_t n =
          std::min(kWeightsChunkElements, segment.range.end - offset_);
      chunk_.set_offset(offset_);
      const int64_t at = segment.packed + (offset_ - segment.range.begin);
      snapshot_->ReadValues(at, n, chunk_.mutable_data());
      offset_ += n;
    } else {
      const int64_t n = std::min<int64_t>(kWeightsChunkElements * sizeof(float),
                                          tables - tables_offset_);
      chunk_.set_offset(total);
      chunk_.set_tables(snapshot_->tables.substr(tables_offset_, n));
      tables_offset_ += n;
    }
    service_->counter()->AddSent(static_cast<int64_t>(chunk_.ByteSizeLong()));
    StartWrite(&chunk_);
  }

  RingPeerService* const service_;
  std::shared_ptr<const WeightsSnapshot> snapshot_;
  v1::WeightsChunk chunk_;
  // A published range and where its values start in the snapshot's.
  struct Segment {
    FlatRange range;
    int64_t packed = 0;
  };
  std::vector<Segment> segments_;  // the snapshot's current parts
  size_t segment_ = 0;             // the segment being sent
  int64_t offset_ = 0;             // the next element to send
  int64_t tables_offset_ = 0;
  bool sent_any_ = false;
};

}  // namespace

void RingPeerService::set_job_id(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  job_id_ = job_id;
}

std::string RingPeerService::job_id() const {
  absl::MutexLock lock(&mu_);
  return job_id_;
}

grpc::ServerReadReactor<grpc::ByteBuffer>* RingPeerService::Exchange(
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response) {
  return AuthorizedRead<grpc::ByteBuffer>(
      context, RpcMethod::kRingExchange,
      [&] { return new ExchangeReactor(context, this, response); });
}

grpc::ServerWriteReactor<v1::WeightsChunk>* RingPeerService::GetWeights(
    grpc::CallbackServerContext* context, const v1::WeightsRequest* request) {
  return AuthorizedWrite<v1::WeightsChunk>(
      context, RpcMethod::kRingGetWeights,
      [&] { return new WeightsReactor(this, *request); });
}

grpc::ServerUnaryReactor* RingPeerService::OfferSharedMemory(
    grpc::CallbackServerContext* context, const v1::SharedMemoryOffer* offer,
    v1::SharedMemoryAnswer* answer) {
  const CountCallBytes count = [this](int64_t sent, int64_t received) {
    counter_->AddSent(sent);
    counter_->AddReceived(received);
  };
  return HandleUnary(
      context, RpcMethod::kRingOfferSharedMemory, *offer, *answer, count,
      [&]() -> absl::Status {
        const std::string job = job_id();
        if (offer->job_id() != job) {
          return absl::FailedPreconditionError(absl::StrFormat(
              "a ring link of job '%s' offered; this worker runs job '%s'",
              offer->job_id(), job));
        }
        ShmLinkNonce nonce;
        RETURN_IF_ERROR(CheckIdLength("the ring link offer's from_worker_id",
                                      offer->from_worker_id()));
        if (offer->generation() < 0 || offer->nonce().size() != nonce.size() ||
            !IsShmLinkName(offer->name())) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "a ring link offer needs a generation >= 0, a %d-byte nonce and "
              "a name %s + 32 hex digits (got %d, %d bytes, '%s')",
              nonce.size(), kShmLinkPrefix, offer->generation(),
              offer->nonce().size(), offer->name()));
        }
        std::memcpy(nonce.data(), offer->nonce().data(), nonce.size());
        absl::StatusOr<std::unique_ptr<ShmLinkReader>> link =
            ShmLinkReader::Open(offer->name(), offer->capacity(), nonce);
        if (!link.ok()) {
          answer->set_accepted(false);
          answer->set_reason(link.status().ToString());
          return absl::OkStatus();
        }
        const absl::Status attached = mailbox_->AttachLink(
            offer->generation(),
            ShmLinkKey(offer->from_worker_id(), offer->ring_fingerprint()),
            *std::move(link));
        if (absl::IsAlreadyExists(attached)) {
          answer->set_accepted(false);
          answer->set_reason(attached.ToString());
          return absl::OkStatus();
        }
        RETURN_IF_ERROR(attached);
        answer->set_accepted(true);
        return absl::OkStatus();
      });
}

std::string AdvertisedPeerAddress(const std::string& listen,
                                  const std::string& advertise, int port) {
  if (!advertise.empty()) {
    if (advertise.find(':') == std::string::npos) {
      return absl::StrCat(advertise, ":", port);
    }
    return advertise;
  }
  std::string host = listen.substr(0, listen.rfind(':'));
  if (host.empty() || host == "0.0.0.0" || host == "[::]" || host == "::") {
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    host = name;
  }
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<std::unique_ptr<RingPeerServer>> StartRingPeerServer(
    const std::string& listen_address, LinkShaper* shaper) {
  auto peer = std::make_unique<RingPeerServer>();
  peer->mailbox = std::make_unique<RingMailbox>();
  peer->publisher = std::make_unique<WeightsPublisher>();
  peer->counter = std::make_unique<ByteCounter>();
  peer->shaper = shaper;
  peer->service = std::make_unique<RingPeerService>(
      peer->mailbox.get(), peer->publisher.get(), peer->counter.get(), shaper);
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(builder);
  AddServingPort(builder, listen_address, &peer->port);
  builder.RegisterService(peer->service.get());
  peer->server = builder.BuildAndStart();
  if (peer->server == nullptr || peer->port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for ring peers on '", listen_address,
                     "' (address in use or invalid?)"));
  }
  return peer;
}

}  // namespace ferry
