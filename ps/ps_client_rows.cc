// GrpcParameterClient::PullRows: one PullRows call per shard that holds some
// of the requested rows, in parallel (typed async stub on the shard's
// channel), retried per shard on UNAVAILABLE; the answers are put back in
// the request's order.
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/prometheus_metrics.h"
#include "common/sharding.h"
#include "proto/rpc_util.h"
#include "ps/call_rounds.h"
#include "ps/ps_calls.h"
#include "ps/ps_client.h"
#include "ps/sparse_rows_wire.h"

namespace ferry {

absl::StatusOr<int64_t> GrpcParameterClient::PullRows(
    int64_t min_version, absl::Span<const RowRequest> tables,
    std::vector<std::vector<float>>& out) {
  const int num_shards = static_cast<int>(shards_.size());
  // Per shard: its request, and where each of its rows goes: (part index,
  // position in the part's ids), in the order it is asked.
  std::vector<v1::PullRowsRequest> requests(num_shards);
  std::vector<std::vector<std::pair<size_t, size_t>>> places(num_shards);
  for (size_t t = 0; t < tables.size(); ++t) {
    std::vector<std::vector<uint64_t>> ids(num_shards);
    for (size_t i = 0; i < tables[t].ids.size(); ++i) {
      const uint64_t id = tables[t].ids[i];
      const int32_t s = ShardOfRow(tables[t].table, id, num_shards);
      ids[s].push_back(id);
      places[s].emplace_back(t, i);
    }
    for (int s = 0; s < num_shards; ++s) {
      if (ids[s].empty()) continue;
      ToSparseRowsPart(tables[t].table, ids[s], {}, requests[s].add_tables());
    }
  }
  std::vector<int> asked;
  for (int s = 0; s < num_shards; ++s) {
    if (requests[s].tables_size() == 0) continue;
    requests[s].set_job_id(options_.job_id);
    requests[s].set_worker_id(options_.worker_id);
    requests[s].set_min_version(min_version);
    requests[s].set_generation(pull_generation_.load());
    asked.push_back(s);
  }
  if (asked.empty()) {
    out.assign(tables.size(), {});
    return min_version;
  }
  std::vector<v1::PullRowsResponse> responses(num_shards);
  const absl::Time begun = absl::Now();
  const std::string call = absl::StrCat("row pull of version >= ", min_version);
  const absl::Status status = RetryRounds(
      static_cast<int>(asked.size()), options_.retry,
      [&](const std::vector<int>& round, int) {
        const int n = static_cast<int>(round.size());
        std::unique_ptr<grpc::ClientContext[]> contexts(
            new grpc::ClientContext[n]);
        std::vector<absl::Status> statuses(n);
        CallGroup group(n);
        for (int k = 0; k < n; ++k) {
          const int s = asked[round[k]];
          Shard& shard = *shards_[s];
          ps_internal::PrepareContext(contexts[k], shard, options_.rpc_timeout);
          responses[s].Clear();
          const int64_t sent = static_cast<int64_t>(requests[s].ByteSizeLong());
          if (!shard.in_process) {  // bytes() counts sockets only
            counter_.AddSent(sent);
            counter_.AddCall();
          }
          shard.bytes->AddSent(sent);
          shard.bytes->AddCall();
          shard.control->async()->PullRows(
              &contexts[k], &requests[s], &responses[s],
              [&, k, s](grpc::Status done) {
                const int64_t received =
                    static_cast<int64_t>(responses[s].ByteSizeLong());
                if (!shards_[s]->in_process) counter_.AddReceived(received);
                shards_[s]->bytes->AddReceived(received);
                statuses[k] = ps_internal::Annotate(FromGrpcStatus(done),
                                                    *shards_[s], call);
                group.Done(false);
              });
        }
        group.WaitAll();
        return statuses;
      });
  if (!status.ok()) return status;
  // Check every answer, then scatter the rows into place.
  std::vector<std::vector<float>> values(tables.size());
  std::vector<int64_t> dims(tables.size(), -1);
  int64_t version = -1;
  for (int s : asked) {
    const v1::PullRowsResponse& response = responses[s];
    const auto fail = [&](const std::string& what) {
      return absl::DataLossError(absl::StrCat(
          "ps shard ", s, " (", shards_[s]->address, ") ", call, ": ", what));
    };
    if (response.tables_size() != requests[s].tables_size()) {
      return fail(absl::StrCat("answered ", response.tables_size(),
                               " tables for ", requests[s].tables_size()));
    }
    if (version < 0 || response.version() < version) {
      version = response.version();
    }
    if (response.version() < min_version) {
      return fail(absl::StrCat("answered version ", response.version()));
    }
    size_t place = 0;
    for (int p = 0; p < response.tables_size(); ++p) {
      const v1::SparseRowsPart& asked_part = requests[s].tables(p);
      const v1::SparseRowsPart& part = response.tables(p);
      const size_t count = asked_part.ids().size() / sizeof(uint64_t);
      const size_t bytes = part.values().size();
      if (part.table() != asked_part.table() || count == 0 || bytes == 0 ||
          bytes % (count * sizeof(float)) != 0) {
        return fail(absl::StrCat("answered ", bytes, " bytes of table ",
                                 part.table(), " for ", count, " ids of table ",
                                 asked_part.table()));
      }
      const int64_t dim = static_cast<int64_t>(bytes / (count * sizeof(float)));
      const size_t t = places[s][place].first;
      if (dims[t] >= 0 && dims[t] != dim) {
        return fail(absl::StrCat("table ", part.table(), " has dim ", dim,
                                 " here and ", dims[t], " on another shard"));
      }
      if (dims[t] < 0) {
        dims[t] = dim;
        values[t].resize(tables[t].ids.size() * dim);
      }
      const float* src = reinterpret_cast<const float*>(part.values().data());
      for (size_t i = 0; i < count; ++i, ++place) {
        std::memcpy(values[t].data() + places[s][place].second * dim,
                    src + i * dim, dim * sizeof(float));
      }
    }
  }
  out = std::move(values);
  Metrics().pull_seconds(MetricRole::kWorker).Observe(SecondsSince(begun));
  return version < 0 ? min_version : version;
}

}  // namespace ferry
