// RingExchange's weights for readers outside the training loop: the
// snapshot published between steps for the coordinator's evaluations
// (ring/weights_publisher.h), and the params copied to the host.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "worker/ring_exchange.h"

namespace ferry {

absl::StatusOr<std::vector<float>> RingExchange::HostParams() {
  std::vector<float> host(n_);
  RETURN_IF_ERROR(
      options_.backend->CopyToHost(options_.params, n_, host.data()));
  return host;
}

absl::StatusOr<const float*> RingExchange::ParamsOnHost(
    std::vector<float>& copy) {
  if (options_.backend->IsHostMemory()) return options_.params;
  ASSIGN_OR_RETURN(copy, HostParams());
  return copy.data();
}

void RingExchange::BetweenSteps() {
  WeightsPublisher* publisher = options_.publisher;
  if (publisher == nullptr || !publisher->wanted()) return;
  // Readers ask only for steps the coordinator applied: the copies of
  // the states before them go before the snapshot takes a model's memory.
  ObserveCommitted(publisher->wanted_step());
  copies_.DropCommitted();
  // A pipeline member publishes the stages it holds current (the
  // coordinator's reader puts the parts together); any other member, a
  // sharded one too, all params: one member is enough for the reader, also
  // when a member dies during an evaluation or the slices are recut.
  const std::vector<FlatRange> ranges = CurrentRanges();
  std::string tables =
      options_.tables == nullptr ? std::string() : options_.tables->Encode();
  if (options_.lend_published_params && ranges.empty() &&
      options_.backend->IsHostMemory()) {
    // The params themselves, until the next write (TakeBackWeights).
    publisher->Lend(optimizer_.steps_applied(), options_.params, n_,
                    std::move(tables));
    return;
  }
  absl::StatusOr<std::vector<float>> host = HostRanges(ranges);
  if (!host.ok()) {
    LogInfo(absl::StrCat("publish weights: ", host.status().ToString()));
    return;
  }
  publisher->Publish(optimizer_.steps_applied(), *std::move(host),
                     std::move(tables), ranges, n_);
}

void RingExchange::TakeBackWeights() {
  if (options_.publisher != nullptr) options_.publisher->TakeBack();
}

RingExchange::~RingExchange() { TakeBackWeights(); }

absl::StatusOr<std::vector<float>> RingExchange::HostRanges(
    const std::vector<FlatRange>& ranges) {
  if (ranges.empty()) return HostParams();
  if (options_.backend->IsHostMemory()) {
    return PackRanges(options_.params, ranges);
  }
  int64_t total = 0;
  for (const FlatRange& r : ranges) total += r.size();
  std::vector<float> host(static_cast<size_t>(total));
  float* at = host.data();
  for (const FlatRange& r : ranges) {
    RETURN_IF_ERROR(
        options_.backend->CopyToHost(options_.params + r.begin, r.size(), at));
    at += r.size();
  }
  return host;
}

}  // namespace ferry
