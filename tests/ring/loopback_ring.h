// Test rings over the real gRPC transport: N RingPeer servers on loopback
// in one process, transports between them, and an all-reduce on one thread
// per rank. Header-only, for tests/ring.
#ifndef FERRY_TESTS_RING_LOOPBACK_RING_H_
#define FERRY_TESTS_RING_LOOPBACK_RING_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/peer_limits.h"
#include "gtest/gtest.h"
#include "ring/grpc_ring_transport.h"
#include "ring/ring_collective.h"
#include "ring/ring_peer_service.h"

namespace ferry::testutil {

inline constexpr char kJob[] = "ring-test";

struct Ring {
  std::vector<std::unique_ptr<RingPeerServer>> peers;
  std::vector<RingMemberAddress> members;
  bool shared_memory = false;  // transports offer shared-memory links
  int64_t shared_memory_bytes = kDefaultRingShmBytes;
  LinkShaper* shaper = nullptr;

  explicit Ring(int n) {
    for (int r = 0; r < n; ++r) {
      auto peer = StartRingPeerServer("127.0.0.1:0");
      EXPECT_TRUE(peer.ok()) << peer.status();
      (*peer)->service->set_job_id(kJob);
      members.push_back(
          {absl::StrCat("w", r), absl::StrCat("127.0.0.1:", (*peer)->port)});
      peers.push_back(std::move(*peer));
    }
  }

  // `order` (when given): the ring's members in rank order by index into
  // `members` (a pipeline's backward ring reverses them); `rank` is then
  // the position in it.
  std::unique_ptr<GrpcRingTransport> Transport(
      int rank, int64_t generation = 1, const std::string& job = kJob,
      const std::vector<int>& order = {}) {
    GrpcRingTransportOptions o;
    o.job_id = job;
    o.generation = generation;
    o.rank = rank;
    o.ring = members;
    int peer = rank;
    if (!order.empty()) {
      o.ring.clear();
      for (int m : order) o.ring.push_back(members[m]);
      peer = order[rank];
    }
    o.mailbox = peers[peer]->mailbox.get();
    o.counter = peers[peer]->counter.get();
    o.shared_memory = shared_memory;
    o.shared_memory_bytes = shared_memory_bytes;
    o.shaper = shaper;
    auto t = GrpcRingTransport::Create(o);
    EXPECT_TRUE(t.ok()) << t.status();
    return std::move(*t);
  }
};

// Runs AllReduceSum on ranks [0, participants) of an n-rank ring.
// `transports` (when given) receives them, to look at afterwards.
inline std::vector<absl::Status> AllReduce(
    Ring& ring, int n, int participants, int64_t count,
    std::vector<std::vector<float>>& data, absl::Duration timeout,
    int64_t piece = 1000,
    std::vector<std::unique_ptr<GrpcRingTransport>>* kept = nullptr) {
  std::vector<absl::Status> results(n);
  std::vector<std::unique_ptr<GrpcRingTransport>> own;
  std::vector<std::unique_ptr<GrpcRingTransport>>& transports =
      kept != nullptr ? *kept : own;
  for (int r = 0; r < n; ++r) transports.push_back(ring.Transport(r));
  data.assign(n, std::vector<float>(count));
  std::vector<std::thread> threads;
  for (int r = 0; r < participants; ++r) {
    for (int64_t i = 0; i < count; ++i)
      data[r][i] = static_cast<float>((r + 1) * (i % 7));
    threads.emplace_back([&, r] {
      RingCollective collective(transports[r].get(), {piece, timeout});
      results[r] = collective.AllReduceSum(/*op_id=*/1, data[r].data(), count);
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

// Recv of `count` floats of `tag` into `dst`, copied, within 20 s.
inline absl::Status RecvCopy(RingTransport& transport, const RingTag& tag,
                             float* dst, int64_t count) {
  return transport.Recv(tag, dst, count, RecvOp::kCopy,
                        absl::Now() + absl::Seconds(20));
}

}  // namespace ferry::testutil

#endif  // FERRY_TESTS_RING_LOOPBACK_RING_H_
