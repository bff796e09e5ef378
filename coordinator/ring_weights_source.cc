#include "coordinator/ring_weights_source.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/backoff.h"
#include "common/status_macros.h"
#include "ferry/v1/ring.grpc.pb.h"
#include "proto/rpc_util.h"

namespace ferry {
namespace {
constexpr absl::Duration kRetryPause = absl::Milliseconds(50);
constexpr absl::Duration kCallTimeout = absl::Seconds(10);
}  // namespace

void RingWeightsSource::set_member_source(MemberSource source) {
  absl::MutexLock lock(&mu_);
  members_ = std::move(source);
}

absl::Status RingWeightsSource::FetchFrom(const std::string& address,
                                          int64_t min_step,
                                          std::vector<float>& params,
                                          std::string* tables) {
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
  int64_t filled = 0;
  std::string blob;
  int64_t blob_bytes = -1;  // as the first chunk says
  while (reader->Read(&chunk)) {
    counter_.AddReceived(static_cast<int64_t>(chunk.ByteSizeLong()));
    if (blob_bytes < 0) blob_bytes = chunk.tables_bytes();
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
    if (chunk.total_elements() != n || chunk.offset() != filled ||
        chunk.data().size() % sizeof(float) != 0 || filled + count > n) {
      context.TryCancel();
      reader->Finish();
      return absl::DataLossError(absl::StrFormat(
          "weights from %s: chunk at %d of %d bytes (total %d) does not "
          "continue the %d of %d elements received",
          address, chunk.offset(), chunk.data().size(), chunk.total_elements(),
          filled, n));
    }
    std::memcpy(params.data() + filled, chunk.data().data(),
                chunk.data().size());
    filled += count;
  }
  RETURN_IF_ERROR(FromGrpcStatus(reader->Finish()));
  if (filled != n) {
    return absl::DataLossError(absl::StrFormat(
        "weights from %s: %d of %d elements received", address, filled, n));
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
  do {
    const std::vector<std::string> members =
        source ? source() : std::vector<std::string>();
    for (const std::string& address : members) {
      if (address.empty()) continue;
      last = FetchFrom(address, min_step, params, tables);
      if (last.ok()) return last;
      if (!absl::IsUnavailable(last)) break;  // a real fault: try again later
    }
  } while (backoff.Wait());
  return absl::DeadlineExceededError(absl::StrFormat(
      "no ring member gave its weights after step %d within %s: %s", min_step,
      absl::FormatDuration(fetch_timeout_), last.ToString()));
}

}  // namespace ferry
