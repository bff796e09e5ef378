#include "coordinator/ring_weights_source.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "common/backoff.h"
#include "common/status_macros.h"
#include "ferry/v1/ring.grpc.pb.h"
#include "proto/rpc_util.h"
#include "ring/weights_publisher.h"

namespace ferry {
namespace {
constexpr absl::Duration kRetryPause = absl::Milliseconds(50);
constexpr absl::Duration kCallTimeout = absl::Seconds(10);
}  // namespace

void RingWeightsSource::set_member_source(MemberSource source) {
  absl::MutexLock lock(&mu_);
  members_ = std::move(source);
}

// Adds [begin, end) to `covered` (ascending, disjoint, merged).
void Cover(std::vector<std::pair<int64_t, int64_t>>& covered, int64_t begin,
           int64_t end) {
  if (end <= begin) return;
  covered.emplace_back(begin, end);
  std::sort(covered.begin(), covered.end());
  std::vector<std::pair<int64_t, int64_t>> merged;
  for (const auto& [b, e] : covered) {
    if (!merged.empty() && b <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, e);
    } else {
      merged.emplace_back(b, e);
    }
  }
  covered = std::move(merged);
}

absl::Status RingWeightsSource::FetchFrom(const std::string& address,
                                          int64_t min_step,
                                          std::vector<float>& params,
                                          std::string* tables, Part* part) {
  auto stub = v1::RingPeer::NewStub(MakeChannel(address));
  grpc::ClientContext context;
  SetDeadline(context, kCallTimeout);
  v1::WeightsRequest request;
  request.set_job_id(job_id_);
  request.set_min_step(min_step);
  counter_.AddSent(static_cast<int64_t>(request.ByteSizeLong()));
  auto reader = stub->GetWeights(&context, request);
  v1::WeightsChunk chunk;
  const int64_t n = static_cast<int64_t>(params.size());
  int64_t filled = 0;  // elements received
  int64_t next = 0;    // chunks come in ascending order without overlap
  std::string blob;
  int64_t blob_bytes = -1;  // as the first chunk says
  while (reader->Read(&chunk)) {
    counter_.AddReceived(static_cast<int64_t>(chunk.ByteSizeLong()));
    if (blob_bytes < 0) {
      blob_bytes = chunk.tables_bytes();
      part->steps = chunk.steps_applied();
    }
    if (chunk.steps_applied() != part->steps) {
      context.TryCancel();
      reader->Finish();
      return absl::DataLossError(absl::StrFormat(
          "weights from %s mix the states after %d and %d steps", address,
          part->steps, chunk.steps_applied()));
    }
    if (!chunk.tables().empty()) {
      if (chunk.tables_bytes() != blob_bytes || filled != n ||
          static_cast<int64_t>(blob.size() + chunk.tables().size()) >
              blob_bytes) {
        context.TryCancel();
        reader->Finish();
        return absl::DataLossError(absl::StrFormat(
            "weights from %s: %d table bytes after %d of %d (total %d) do "
            "not continue the stream",
            address, chunk.tables().size(), blob.size(), blob_bytes,
            chunk.tables_bytes()));
      }
      blob.append(chunk.tables());
      continue;
    }
    const int64_t count =
        static_cast<int64_t>(chunk.data().size() / sizeof(float));
    if (chunk.total_elements() != n || chunk.offset() < next ||
        chunk.data().size() % sizeof(float) != 0 ||
        chunk.offset() + count > n) {
      context.TryCancel();
      reader->Finish();
      return absl::DataLossError(absl::StrFormat(
          "weights from %s: chunk at %d of %d bytes (total %d) does not "
          "follow the elements received up to %d of %d",
          address, chunk.offset(), chunk.data().size(), chunk.total_elements(),
          next, n));
    }
    if (count > 0) {
      std::memcpy(params.data() + chunk.offset(), chunk.data().data(),
                  chunk.data().size());
      Cover(part->covered, chunk.offset(), chunk.offset() + count);
    }
    next = chunk.offset() + count;
    filled += count;
  }
  RETURN_IF_ERROR(FromGrpcStatus(reader->Finish()));
  if (filled != n && blob_bytes > 0) {
    return absl::DataLossError(absl::StrFormat(
        "weights from %s: %d of %d elements received with tables", address,
        filled, n));
  }
  if (static_cast<int64_t>(blob.size()) != std::max<int64_t>(blob_bytes, 0)) {
    return absl::DataLossError(
        absl::StrFormat("weights from %s: %d of %d table bytes received",
                        address, blob.size(), blob_bytes));
  }
  if (tables != nullptr) {
    *tables = std::move(blob);
  } else if (!blob.empty()) {
    return absl::DataLossError(absl::StrFormat(
        "weights from %s hold embedding tables this job does not have",
        address));
  }
  return absl::OkStatus();
}

absl::Status RingWeightsSource::Fetch(int64_t min_step,
                                      std::vector<float>& params,
                                      std::string* tables) {
  MemberSource source;
  {
    absl::MutexLock lock(&mu_);
    source = members_;
  }
  Backoff backoff(RetryPolicy{.initial_backoff = kRetryPause,
                              .max_backoff = kRetryPause * 8,
                              .budget = fetch_timeout_});
  absl::Status last = absl::UnavailableError("the ring has no members");
  const int64_t n = static_cast<int64_t>(params.size());
  int64_t want = min_step;
  // The member that said it will publish the state asked for, asked first
  // (and alone, while it has not) until prefer_wait_ has passed.
  std::string preferred;
  absl::Time preferred_since;
  do {
    std::vector<std::string> members =
        source ? source() : std::vector<std::string>();
    if (auto it = std::find(members.begin(), members.end(), preferred);
        !preferred.empty() && it != members.end()) {
      std::rotate(members.begin(), it, it + 1);
    }
    // The parts of one state (one step count) until they cover the model:
    // a ring pipeline's stage members hold only their layers current.
    Part whole;
    for (const std::string& address : members) {
      if (address.empty()) continue;
      Part part;
      last = FetchFrom(address, want, params, tables, &part);
      if (!last.ok()) {
        if (!absl::IsUnavailable(last)) break;  // a real fault: try later
        if (whole.steps < 0 &&
            absl::StrContains(last.message(), kWeightsNotPublishedYet)) {
          if (preferred.empty()) {
            preferred = address;
            preferred_since = absl::Now();
          }
          if (address == preferred &&
              absl::Now() - preferred_since < prefer_wait_) {
            break;  // it publishes between two of its steps: wait for it
          }
        }
        continue;
      }
      if (address == preferred) preferred.clear();  // others may hold parts
      if (whole.steps >= 0 && part.steps != whole.steps) {
        // Another step's state: ask everyone for the newer one.
        want = std::max(whole.steps, part.steps);
        last = absl::UnavailableError(
            absl::StrFormat("members hold the states after %d and %d steps",
                            whole.steps, part.steps));
        break;
      }
      whole.steps = part.steps;
      for (const auto& [b, e] : part.covered) Cover(whole.covered, b, e);
      if (n == 0 || (whole.covered.size() == 1 &&
                     whole.covered[0] == std::make_pair(int64_t{0}, n))) {
        return absl::OkStatus();
      }
      last = absl::UnavailableError(
          "the members asked so far hold only parts of the weights");
    }
  } while (backoff.Wait());
  return absl::DeadlineExceededError(absl::StrFormat(
      "no ring member gave its weights after step %d within %s: %s", min_step,
      absl::FormatDuration(fetch_timeout_), last.ToString()));
}

}  // namespace ferry
