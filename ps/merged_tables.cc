#include "ps/merged_tables.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"

namespace ferry {
namespace {

// Rows copied out of the parts per run handed to a writer.
constexpr size_t kRunRows = 4096;

}  // namespace

// One table: its part on every shard, in shard order.
class MergedTableSources::Table final : public TablePartSource {
 public:
  // `release`: empty, or one per part.
  Table(std::vector<TableCheckpointView> parts, std::vector<BytesDone> release)
      : parts_(std::move(parts)), release_(std::move(release)) {
    for (const TableCheckpointView& part : parts_) {
      rows_ += part.ids.size();
      pending_ += part.pending_ids.size();
      if (!part.counters.has_value()) {
        all_counted_ = false;
        continue;
      }
      counters_.rows_created += part.counters->rows_created;
      counters_.ids_admitted += part.counters->ids_admitted;
      counters_.updates_dropped += part.counters->updates_dropped;
      counters_.evicted_ttl += part.counters->evicted_ttl;
      counters_.evicted_memory += part.counters->evicted_memory;
    }
  }

  int32_t table() const override { return parts_.front().table; }
  uint32_t row_floats() const override { return parts_.front().row_floats; }
  uint64_t rows() const override { return rows_; }
  uint64_t pending() const override { return pending_; }
  std::optional<TableCounters> counters() const override {
    if (!all_counted_) return std::nullopt;
    return counters_;
  }

  void ForEachRun(
      const std::function<void(const TableRowRun&)>& fn) const override {
    const size_t floats = row_floats();
    std::vector<uint64_t> ids;
    std::vector<int64_t> last_seen;
    std::vector<float> values;
    for (size_t p = 0; p < parts_.size(); ++p) {
      const TableCheckpointView& part = parts_[p];
      const BytesDone* release = release_.empty() ? nullptr : &release_[p];
      const size_t rows = part.ids.size();
      for (size_t first = 0; first < rows; first += kRunRows) {
        const size_t n = std::min(kRunRows, rows - first);
        ids.resize(n);
        last_seen.resize(n);
        values.resize(n * floats);
        part.ids.CopyTo(first, n, ids.data());
        part.last_seen.CopyTo(first, n, last_seen.data());
        part.values.CopyTo(first * floats, n * floats, values.data());
        fn(TableRowRun{ids, last_seen, values});
        if (release != nullptr && *release) {
          (*release)(part.ids.bytes(first, n));
          (*release)(part.last_seen.bytes(first, n));
          (*release)(part.values.bytes(first * floats, n * floats));
        }
      }
    }
  }

  void ForEachPending(const std::function<void(uint64_t, int32_t, int64_t)>& fn)
      const override {
    for (const TableCheckpointView& part : parts_) {
      for (size_t i = 0; i < part.pending_ids.size(); ++i) {
        fn(part.pending_ids[i], part.pending_counts[i],
           part.pending_last_seen[i]);
      }
    }
  }

 private:
  const std::vector<TableCheckpointView> parts_;
  const std::vector<BytesDone> release_;
  uint64_t rows_ = 0;
  uint64_t pending_ = 0;
  bool all_counted_ = true;
  TableCounters counters_;
};

MergedTableSources::~MergedTableSources() = default;

absl::StatusOr<std::unique_ptr<MergedTableSources>> MergedTableSources::Create(
    std::vector<std::vector<TableCheckpointView>> shards,
    std::vector<BytesDone> release) {
  if (!release.empty() && release.size() != shards.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d releasers for %d shards", release.size(), shards.size()));
  }
  auto merged = std::unique_ptr<MergedTableSources>(new MergedTableSources());
  if (shards.empty()) return merged;
  const std::vector<TableCheckpointView>& first = shards.front();
  for (size_t s = 1; s < shards.size(); ++s) {
    if (shards[s].size() != first.size()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("shard %d holds %d tables, shard 0 %d", s,
                          shards[s].size(), first.size()));
    }
    for (size_t t = 0; t < first.size(); ++t) {
      const TableCheckpointView& part = shards[s][t];
      if (part.table != first[t].table ||
          part.row_floats != first[t].row_floats) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "shard %d's table %d (%d floats a row) is not shard 0's table %d "
            "(%d floats a row)",
            s, part.table, part.row_floats, first[t].table,
            first[t].row_floats));
      }
    }
  }
  for (size_t t = 0; t < first.size(); ++t) {
    std::vector<TableCheckpointView> parts;
    for (std::vector<TableCheckpointView>& tables : shards) {
      parts.push_back(std::move(tables[t]));
    }
    merged->tables_.push_back(
        std::make_unique<Table>(std::move(parts), release));
    merged->pointers_.push_back(merged->tables_.back().get());
  }
  return merged;
}

}  // namespace ferry
