#include "ring/in_memory_ring.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ferry {

// One rank's side: sends into links_[rank], receives from links_[rank - 1].
class InMemoryRingHub::Endpoint : public RingTransport {
 public:
  Endpoint(int rank, int size, Link* out, Link* in)
      : rank_(rank), size_(size), out_(out), in_(in) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  absl::Status Send(const RingTag& tag, const float* data,
                    int64_t count) override {
    if (aborted_.load()) return Cancelled("Send", tag);
    if (count < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank_, ": Send with negative count ", count));
    }
    if (count == 0) return SendBytes(tag, std::string());
    return SendBytes(tag, std::string(reinterpret_cast<const char*>(data),
                                      static_cast<size_t>(count) * 4));
  }

  absl::Status SendBytes(const RingTag& tag, std::string payload) override {
    if (aborted_.load()) return Cancelled("Send", tag);
    if (silenced_.load()) return absl::OkStatus();  // dropped on the floor
    const int64_t size = static_cast<int64_t>(payload.size());
    {
      absl::MutexLock lock(&out_->mu);
      out_->mailbox[tag].push_back(std::move(payload));
    }
    bytes_sent_.fetch_add(size);
    return absl::OkStatus();
  }

  absl::Status Recv(const RingTag& tag, float* dst, int64_t count, RecvOp op,
                    absl::Time deadline) override {
    absl::StatusOr<std::string> payload = RecvBytes(tag, deadline);
    if (!payload.ok()) return payload.status();
    const std::string& message = *payload;
    if (static_cast<int64_t>(message.size()) != 4 * count) {
      return absl::DataLossError(
          absl::StrCat("rank ", rank_, ": message from rank ", prev(), " for ",
                       tag.ToString(), " holds ", message.size(),
                       " bytes, expected ", count, " floats"));
    }
    const float* values = reinterpret_cast<const float*>(message.data());
    if (op == RecvOp::kCopy) {
      std::copy(values, values + count, dst);
    } else {
      for (int64_t i = 0; i < count; ++i) dst[i] += values[i];
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> RecvBytes(const RingTag& tag,
                                        absl::Time deadline) override {
    if (aborted_.load()) return Cancelled("Recv", tag);
    std::string message;
    {
      absl::MutexLock lock(&in_->mu);
      auto arrived_or_aborted = [this, &tag]() {
        in_->mu.AssertHeld();
        return in_->receiver_aborted || in_->mailbox.count(tag) > 0;
      };
      ++in_->blocked_receivers;
      in_->mu.AwaitWithDeadline(absl::Condition(&arrived_or_aborted), deadline);
      --in_->blocked_receivers;
      if (in_->receiver_aborted) return Cancelled("Recv", tag);
      auto it = in_->mailbox.find(tag);
      if (it == in_->mailbox.end()) {
        return absl::DeadlineExceededError(
            absl::StrCat("rank ", rank_, ": no message from rank ", prev(),
                         " for ", tag.ToString(), " before the deadline"));
      }
      message = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) in_->mailbox.erase(it);
    }
    bytes_received_.fetch_add(static_cast<int64_t>(message.size()));
    return message;
  }

  void Abort() override {
    aborted_.store(true);
    absl::MutexLock lock(&in_->mu);  // wakes a Recv blocked on the link
    in_->receiver_aborted = true;
  }

  void Silence() { silenced_.store(true); }
  int64_t bytes_sent() const { return bytes_sent_.load(); }
  int64_t bytes_received() const { return bytes_received_.load(); }

 private:
  int prev() const { return (rank_ + size_ - 1) % size_; }

  absl::Status Cancelled(const char* what, const RingTag& tag) const {
    return absl::CancelledError(absl::StrCat("rank ", rank_, ": ", what, " of ",
                                             tag.ToString(), " after Abort()"));
  }

  const int rank_;
  const int size_;
  Link* const out_;
  Link* const in_;
  std::atomic<bool> aborted_{false};
  std::atomic<bool> silenced_{false};
  std::atomic<int64_t> bytes_sent_{0};
  std::atomic<int64_t> bytes_received_{0};
};

InMemoryRingHub::InMemoryRingHub(int size) {
  size = std::max(size, 1);
  for (int r = 0; r < size; ++r) links_.push_back(std::make_unique<Link>());
  for (int r = 0; r < size; ++r) {
    endpoints_.push_back(std::make_unique<Endpoint>(
        r, size, links_[r].get(), links_[(r + size - 1) % size].get()));
  }
}

InMemoryRingHub::~InMemoryRingHub() = default;

RingTransport* InMemoryRingHub::transport(int rank) {
  return endpoints_[rank].get();
}

void InMemoryRingHub::Silence(int rank) { endpoints_[rank]->Silence(); }

int64_t InMemoryRingHub::bytes_sent(int rank) const {
  return endpoints_[rank]->bytes_sent();
}

int64_t InMemoryRingHub::bytes_received(int rank) const {
  return endpoints_[rank]->bytes_received();
}

int InMemoryRingHub::blocked_receivers(int rank) const {
  // Rank r receives on the link of rank r - 1.
  Link& in = *links_[(rank + size() - 1) % size()];
  absl::MutexLock lock(&in.mu);
  return in.blocked_receivers;
}

}  // namespace ferry
