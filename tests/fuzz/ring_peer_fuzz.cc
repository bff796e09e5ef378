// Fuzz target: ferry.v1.RingPeer (ring/ring_peer_service.h over a
// real RingMailbox and WeightsPublisher), called over a loopback channel.
//
// Input: byte 0 picks the mode.
//  - byte 0 < 0x80, raw mode: even: Exchange, the rest split into frames
//    (FuzzInput::Frame), each one raw RingMessage; odd: GetWeights, the rest
//    is the raw WeightsRequest.
//  - byte 0 >= 0x80, structured mode: byte 1 sets the service up (job id
//    set or not, weights published or not and how many, the mailbox's
//    byte limit); the rest is a program of up to kMaxOps operations:
//    Exchange streams (a hello naming the job with a fuzzed generation,
//    rank and size, or none or repeated; messages with fuzzed tags, data
//    lengths and `encoded`), GetWeights calls, and the local collective's
//    side of the mailbox (Take with an immediate deadline, Enter, Fail),
//    so streams of several generations interleave.
//
// One server (loopback TCP) serves the whole run (grpc_fuzz_util.h); every
// input gets a fresh mailbox, publisher, counter and service behind it, and
// waits for the server side of all its calls to end before they go.
// Oracles: a successful Exchange's summary counts every message sent (so
// every one parsed); an Exchange with a message that does not parse ends
// INVALID_ARGUMENT "ring message N does not parse" (N the first such
// message, unless an earlier message failed first) and, past an accepted
// hello, fails its generation in the mailbox; a successful GetWeights
// streams the published snapshot exactly (offsets contiguous, totals and
// steps consistent, bytes equal); the mailbox never holds more than its
// limit.
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "common/byte_counter.h"
#include "ferry/v1/ring.grpc.pb.h"
#include "ferry/v1/ring.pb.h"
#include "ring/ring_mailbox.h"
#include "ring/ring_peer_service.h"
#include "ring/weights_publisher.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/grpc_fuzz_util.h"

namespace ferry::fuzz {
namespace {

constexpr char kJob[] = "job";
constexpr char kExchange[] = "/ferry.v1.RingPeer/Exchange";
constexpr char kGetWeights[] = "/ferry.v1.RingPeer/GetWeights";
constexpr int kMaxOps = 24;

// ferry.v1.RingPeer for the whole process: forwards every call to the
// running input's RingPeerService, or refuses a call of an earlier input.
class RingForwarder final : public v1::RingPeer::WithRawCallbackMethod_Exchange<
                                v1::RingPeer::CallbackService> {
 public:
  explicit RingForwarder(CallSessions* sessions) : sessions_(sessions) {}

  grpc::ServerReadReactor<grpc::ByteBuffer>* Exchange(
      grpc::CallbackServerContext* context,
      grpc::ByteBuffer* response) override {
    return ForwardRead(sessions_, &RingPeerService::Exchange, context,
                       response);
  }
  grpc::ServerWriteReactor<v1::WeightsChunk>* GetWeights(
      grpc::CallbackServerContext* context,
      const v1::WeightsRequest* request) override {
    return ForwardWrite(sessions_, &RingPeerService::GetWeights, context,
                        request);
  }

 private:
  CallSessions* const sessions_;
};

// The server of the whole process; never destroyed.
struct SharedServer {
  CallSessions sessions;
  RingForwarder forwarder{&sessions};
  LoopbackServer server{&forwarder, &sessions};
};

SharedServer& Shared() {
  static SharedServer* const shared = new SharedServer;
  return *shared;
}

// One input's peer behind the shared server. Members are destroyed in
// reverse order: the session first (it waits for the input's calls to end
// on the server), then the service and what it uses.
struct PeerUnderTest {
  explicit PeerUnderTest(int64_t max_buffered)
      : mailbox(max_buffered), max_buffered(max_buffered) {}

  RingMailbox mailbox;
  WeightsPublisher publisher;
  ByteCounter counter;
  std::unique_ptr<RingPeerService> service;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<CallSessions::Scope> session;
  const int64_t max_buffered;
  std::shared_ptr<const WeightsSnapshot> published;
};

std::unique_ptr<PeerUnderTest> Start(uint8_t config) {
  // Small limits (4 KiB, 64 KiB) make RESOURCE_EXHAUSTED reachable.
  const int64_t max_buffered = (config & 0x03) == 0   ? int64_t{1} << 12
                               : (config & 0x03) == 1 ? int64_t{1} << 16
                                                      : int64_t{1} << 30;
  auto peer = std::make_unique<PeerUnderTest>(max_buffered);
  peer->service = std::make_unique<RingPeerService>(
      &peer->mailbox, &peer->publisher, &peer->counter);
  if (!(config & 0x04)) peer->service->set_job_id(kJob);
  if (!(config & 0x08)) {
    // 0, a few, or just over one 256 Ki-element GetWeights chunk.
    const size_t n = (config & 0x30) == 0x00   ? 0
                     : (config & 0x30) == 0x30 ? (size_t{256} << 10) + 3
                                               : (config >> 4) * 5;
    static const std::vector<float>* const ramp = [] {
      auto* v = new std::vector<float>((size_t{256} << 10) + 3);
      for (size_t i = 0; i < v->size(); ++i) (*v)[i] = static_cast<float>(i);
      return v;
    }();
    peer->publisher.Publish(
        config >> 6,
        std::vector<float>(ramp->begin(),
                           ramp->begin() + static_cast<ptrdiff_t>(n)));
    peer->published = *peer->publisher.Get(0);
  }
  SharedServer& shared = Shared();
  peer->channel = shared.server.channel();
  peer->session = std::make_unique<CallSessions::Scope>(&shared.sessions,
                                                        peer->service.get());
  return peer;
}

void CheckWeights(const PeerUnderTest& peer, const RawCallResult& result) {
  if (!result.status.ok()) return;
  FuzzCheck(peer.published != nullptr, "GetWeights: OK without weights");
  const std::vector<float>& values = peer.published->values;
  std::string received;
  for (const std::string& bytes : result.responses) {
    v1::WeightsChunk chunk;
    FuzzCheck(chunk.ParseFromString(bytes), "GetWeights: chunk does not parse");
    FuzzCheck(chunk.steps_applied() == peer.published->steps_applied,
              "GetWeights: wrong steps_applied");
    FuzzCheck(chunk.total_elements() == static_cast<int64_t>(values.size()),
              "GetWeights: wrong total_elements");
    FuzzCheck(chunk.offset() * 4 == static_cast<int64_t>(received.size()),
              "GetWeights: offsets not contiguous");
    received += chunk.data();
  }
  FuzzCheck(!result.responses.empty(), "GetWeights: OK without a chunk");
  FuzzCheck(received.size() == values.size() * sizeof(float) &&
                (values.empty() || std::memcmp(received.data(), values.data(),
                                               received.size()) == 0),
            "GetWeights: values differ from the snapshot");
}

// Checks an Exchange call's outcome against the contract in
// ring_peer_service.h.
void CheckExchange(PeerUnderTest& peer,
                   const std::vector<std::string>& requests,
                   const RawCallResult& result) {
  // The first message that does not parse (e.g. a string field that is not
  // UTF-8), counted from 1; 0: none.
  size_t unparsable = 0;
  v1::RingMessage first;
  for (size_t i = 0; i < requests.size() && unparsable == 0; ++i) {
    v1::RingMessage m;
    if (!m.ParseFromString(requests[i])) unparsable = i + 1;
    if (i == 0) first = m;
  }
  if (result.status.ok()) {
    FuzzCheck(unparsable == 0,
              "Exchange: OK despite a message that does not parse");
    FuzzCheck(result.responses.size() == 1, "Exchange: OK without a summary");
    v1::ExchangeSummary summary;
    FuzzCheck(summary.ParseFromString(result.responses[0]),
              "Exchange: summary does not parse");
    FuzzCheck(summary.messages() == static_cast<int64_t>(requests.size()),
              "Exchange: OK but not every message filed");
    return;
  }
  // Other errors (an earlier message refused, a deadline on a loaded
  // machine) end the call first; their messages never have this shape.
  const std::string message = result.status.error_message();
  if (message.rfind("ring message ", 0) != 0 || message.size() < 15 ||
      message.compare(message.size() - 15, 15, " does not parse") != 0) {
    return;
  }
  FuzzCheck(result.status.error_code() == grpc::StatusCode::INVALID_ARGUMENT,
            "Exchange: a parse failure is not INVALID_ARGUMENT");
  FuzzCheck(message == "ring message " + std::to_string(unparsable) +
                           " does not parse",
            "Exchange: the parse failure names the wrong message");
  if (unparsable > 1) {
    // Every message before it was filed, the hello of the first one too:
    // the collective of that generation must fail now, not wait.
    // (A tag the harness never files; OK only if a raw frame filed it.)
    const absl::StatusOr<RingPayload> taken = peer.mailbox.Take(
        first.hello().generation(), RingTag{INT64_MIN, INT32_MIN, INT32_MIN},
        absl::Now());
    FuzzCheck(taken.ok() ||
                  taken.status().code() != absl::StatusCode::kDeadlineExceeded,
              "Exchange: a parse failure did not fail the mailbox");
  }
}

void ExchangeOp(PeerUnderTest& peer, FuzzInput& in) {
  const uint8_t flags = in.Byte();
  std::vector<std::string> requests;
  const int count = in.Range(0, 12);
  for (int i = 0; i < count; ++i) {
    v1::RingMessage m;
    if ((i == 0 && !(flags & 0x01)) || (i > 0 && in.Byte() == 0xff)) {
      v1::RingHello* hello = m.mutable_hello();
      hello->set_job_id(flags & 0x02 ? in.Frame() : std::string(kJob));
      hello->set_generation(flags & 0x04 ? in.Int<int64_t>() : in.Range(-2, 5));
      hello->set_from_rank(in.Range(-1, 4));
      hello->set_ring_size(in.Range(0, 4));
      hello->set_from_worker_id("w" + std::to_string(in.Byte() % 4));
    }
    m.set_op_id(in.Range(-1, 3));
    m.set_stage(in.Range(-1, 3));
    m.set_piece(in.Range(-1, 3));
    const uint8_t size = in.Byte();
    m.set_encoded(size & 0x01);
    if (size == 0xff) {
      m.set_data(std::string(in.Int<uint16_t>(), 'x'));
    } else {
      m.set_data(in.Bytes(size >> 1));
    }
    requests.push_back(m.SerializeAsString());
  }
  const RawCallResult result = RawCall(peer.channel, kExchange, requests);
  FuzzCheck(peer.mailbox.buffered_bytes() <= peer.max_buffered,
            "mailbox holds more than its limit");
  CheckExchange(peer, requests, result);
}

void WeightsOp(PeerUnderTest& peer, FuzzInput& in) {
  v1::WeightsRequest request;
  request.set_job_id(in.Byte() == 0xff ? in.Frame() : std::string(kJob));
  request.set_min_step(in.Byte() == 0xff ? in.Int<int64_t>() : in.Range(-1, 3));
  CheckWeights(
      peer, RawCall(peer.channel, kGetWeights, {request.SerializeAsString()}));
}

void MailboxOp(PeerUnderTest& peer, FuzzInput& in) {
  const uint8_t op = in.Byte();
  const int64_t generation = in.Range(-2, 5);
  RingTag tag;
  tag.op_id = in.Range(-1, 3);
  tag.stage = static_cast<int32_t>(in.Range(-1, 3));
  tag.piece = static_cast<int32_t>(in.Range(-1, 3));
  switch (op % 3) {
    case 0:
      peer.mailbox.Take(generation, tag, absl::Now()).IgnoreError();
      break;
    case 1:
      peer.mailbox.Enter(generation);
      break;
    default:
      peer.mailbox.Fail(generation, absl::UnavailableError("fuzz: broke"));
  }
}

void RunStructured(PeerUnderTest& peer, FuzzInput& in) {
  for (int op = 0; op < kMaxOps && !in.empty(); ++op) {
    switch (in.Byte() % 5) {
      case 0:
      case 1:
        ExchangeOp(peer, in);
        break;
      case 2:
        WeightsOp(peer, in);
        break;
      case 3:
        MailboxOp(peer, in);
        break;
      default: {
        const bool exchange = in.Bool();
        RawCall(peer.channel, exchange ? kExchange : kGetWeights, {in.Frame()});
      }
    }
  }
}

}  // namespace
}  // namespace ferry::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ferry::fuzz;
  FuzzInput in(data, size);
  const uint8_t selector = in.Byte();
  if (selector < 0x80) {
    auto peer = Start(0x12);  // job set, 5 weights, 1 GiB limit
    if (selector % 2 == 0) {
      std::vector<std::string> requests;
      while (!in.empty() && requests.size() < 64) {
        requests.push_back(in.Frame());
      }
      CheckExchange(*peer, requests,
                    RawCall(peer->channel, kExchange, requests));
    } else {
      CheckWeights(*peer, RawCall(peer->channel, kGetWeights, {in.Rest()}));
    }
  } else {
    auto peer = Start(in.Byte());
    RunStructured(*peer, in);
  }
  return 0;
}
