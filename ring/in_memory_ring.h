// InMemoryRingHub: the RingTransport of `size` ranks living in one process,
// for tests of ring collectives (the pattern of gloo's in-process test
// rendezvous). Rank r sends to rank (r + 1) % size over the link r; every
// link is a mailbox of messages keyed by RingTag, so a message is matched by
// tag whatever the order in which it arrived.
//
// Fault hooks: Silence(rank) makes a rank stop answering (its later messages
// are dropped), so that its neighbours' Recv run into their deadline.
// Byte accounting: payload bytes (4 per float; an opaque payload's size),
// per rank, for messages sent and for messages received.
#ifndef FERRY_RING_IN_MEMORY_RING_H_
#define FERRY_RING_IN_MEMORY_RING_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ring/ring_transport.h"

namespace ferry {

// Thread safety: all methods are thread-safe; every transport() honours the
// full RingTransport contract, including concurrent Send and Recv from
// several threads. Send never blocks (mailboxes are unbounded).
class InMemoryRingHub {
 public:
  // REQUIRES: size >= 1.
  explicit InMemoryRingHub(int size);
  ~InMemoryRingHub();

  InMemoryRingHub(const InMemoryRingHub&) = delete;
  InMemoryRingHub& operator=(const InMemoryRingHub&) = delete;

  int size() const { return static_cast<int>(endpoints_.size()); }

  // The transport of `rank`, owned by the hub and valid for its lifetime.
  // Abort() on it cancels only that rank's Send/Recv.
  // REQUIRES: 0 <= rank < size().
  RingTransport* transport(int rank);

  // From now on, messages that `rank` sends are dropped: Send still returns
  // OK (the sender does not notice), nothing is delivered or counted in
  // bytes_sent. Messages already delivered stay in the mailbox. Irreversible.
  // REQUIRES: 0 <= rank < size().
  void Silence(int rank);

  // Cumulative payload bytes (4 per float) that `rank` has sent (counted when
  // Send delivers a message) and received (counted when Recv consumes a
  // message, including one rejected with DATA_LOSS).
  // REQUIRES: 0 <= rank < size().
  int64_t bytes_sent(int rank) const;
  int64_t bytes_received(int rank) const;

  // Recv calls of `rank` blocked right now waiting for a message, so that a
  // test can act (Abort, destroy) once a collective is known to be inside
  // its Recv rather than sleep and hope it is.
  // REQUIRES: 0 <= rank < size().
  int blocked_receivers(int rank) const;

 private:
  class Endpoint;

  // Messages from rank r to rank (r + 1) % size. Messages under the same tag
  // (which the contract does not expect) are delivered in Send order.
  struct Link {
    absl::Mutex mu;
    std::map<RingTag, std::deque<std::string>> mailbox ABSL_GUARDED_BY(mu);
    bool receiver_aborted ABSL_GUARDED_BY(mu) = false;
    int blocked_receivers ABSL_GUARDED_BY(mu) = 0;
  };

  std::vector<std::unique_ptr<Link>> links_;  // links_[r]: r -> r + 1
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
};

}  // namespace ferry

#endif  // FERRY_RING_IN_MEMORY_RING_H_
