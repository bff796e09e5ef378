#include "ps/sparse_store.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "common/sharding.h"
#include "common/status_macros.h"

namespace ferry {
namespace {

// A memory eviction frees down to this share of max_bytes, so that it runs
// once per many new rows rather than on every one.
constexpr double kEvictTarget = 0.9;

// Per-row bytes that count towards max_bytes besides RowBytes(): the id and
// last-seen step in the blocks and the index slot (SparseTable's layout).
constexpr int64_t kRowOverheadBytes = 16 + 5;

// A live table as a checkpoint's part (SparseStore::CheckpointSources).
class TableSource final : public TablePartSource {
 public:
  explicit TableSource(const SparseTable* table) : table_(table) {}
  int32_t table() const override { return table_->config().table; }
  uint32_t row_floats() const override {
    return static_cast<uint32_t>(table_->RowFloats());
  }
  uint64_t rows() const override {
    return static_cast<uint64_t>(table_->rows());
  }
  uint64_t pending() const override {
    return static_cast<uint64_t>(table_->pending_ids());
  }
  std::optional<TableCounters> counters() const override {
    return table_->counters();
  }
  void ForEachRun(
      const std::function<void(const TableRowRun&)>& fn) const override {
    table_->ForEachBlock(fn);
  }
  void ForEachPending(const std::function<void(uint64_t, int32_t, int64_t)>& fn)
      const override {
    table_->ForEachPending(fn);
  }

 private:
  const SparseTable* const table_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SparseStore>> SparseStore::Create(
    const SparseStoreConfig& config) {
  if (config.num_shards < 1 || config.shard_id < 0 ||
      config.shard_id >= config.num_shards) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "sparse store: shard %d of %d", config.shard_id, config.num_shards));
  }
  if (config.dims.empty() ||
      config.dims.size() > static_cast<size_t>(kMaxEmbeddingTables)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("sparse store: %d embedding tables (1 to %d allowed)",
                        config.dims.size(), kMaxEmbeddingTables));
  }
  if (config.ttl_steps < 0 || config.max_bytes < 0) {
    return absl::InvalidArgumentError(
        "sparse store: ttl_steps and max_bytes must be >= 0");
  }
  auto store = std::unique_ptr<SparseStore>(new SparseStore(config));
  for (size_t t = 0; t < config.dims.size(); ++t) {
    SparseTableConfig tc;
    tc.table = static_cast<int32_t>(t);
    tc.dim = config.dims[t];
    tc.optimizer = config.optimizer;
    tc.seed = config.seed;
    tc.init_scale = config.init_scale;
    tc.admit_count = config.admit_count;
    absl::StatusOr<std::unique_ptr<SparseTable>> table =
        SparseTable::Create(tc);
    if (!table.ok()) return table.status();
    store->tables_.push_back(*std::move(table));
  }
  return store;
}

absl::Status SparseStore::CheckIdsPlaced(int32_t table,
                                         absl::Span<const uint64_t> ids) const {
  const int32_t tables = static_cast<int32_t>(config_.dims.size());
  if (table < 0 || table >= tables) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "embedding table %d does not exist (the job has %d tables)", table,
        tables));
  }
  if (config_.num_shards == 1) return absl::OkStatus();
  for (uint64_t id : ids) {
    const int32_t shard = ShardOfRow(table, id, config_.num_shards);
    if (shard != config_.shard_id) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "embedding table %d: id %d belongs on shard %d, not shard %d", table,
          id, shard, config_.shard_id));
    }
  }
  return absl::OkStatus();
}

absl::Status SparseStore::CheckRows(absl::Span<const SparseRows> rows) const {
  absl::flat_hash_set<int32_t> tables_seen;
  for (const SparseRows& part : rows) {
    if (absl::Status s = CheckIdsPlaced(part.table, part.ids); !s.ok()) {
      return s;
    }
    if (!tables_seen.insert(part.table).second) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "embedding table %d appears twice in one push", part.table));
    }
    const int64_t dim = config_.dims[part.table];
    if (static_cast<int64_t>(part.grads.size()) !=
        static_cast<int64_t>(part.ids.size()) * dim) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "embedding table %d: %d ids with %d gradient floats (dim %d)",
          part.table, part.ids.size(), part.grads.size(), dim));
    }
    absl::flat_hash_set<uint64_t> ids;
    ids.reserve(part.ids.size());
    for (size_t i = 0; i < part.ids.size(); ++i) {
      if (!ids.insert(part.ids[i]).second) {
        return absl::InvalidArgumentError(
            absl::StrFormat("embedding table %d: id %d appears twice in one "
                            "push",
                            part.table, part.ids[i]));
      }
      for (int64_t k = 0; k < dim; ++k) {
        if (!std::isfinite(part.grads[i * dim + k])) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "embedding table %d: non-finite gradient for id %d", part.table,
              part.ids[i]));
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status SparseStore::Read(int32_t table, absl::Span<const uint64_t> ids,
                               absl::Span<float> out) const {
  if (absl::Status s = CheckIdsPlaced(table, ids); !s.ok()) return s;
  return tables_[table]->Read(ids, out);
}

absl::Status SparseStore::ApplyStep(
    absl::Span<const std::vector<SparseRows>* const> contributions,
    int64_t total_samples, int64_t step, SparseStepUndo* undo) {
  if (total_samples < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "sparse step %d: total_samples %d must be >= 1", step, total_samples));
  }
  for (const std::vector<SparseRows>* rows : contributions) {
    if (absl::Status s = CheckRows(*rows); !s.ok()) return s;
  }
  return ApplyCheckedStep(contributions, total_samples, step, undo);
}

void SparseStore::Undo(const SparseStepUndo& undo) {
  for (size_t i = undo.tables.size(); i-- > 0;) {
    tables_[undo.tables[i]]->Undo(undo.undos[i]);
  }
}

absl::Status SparseStore::ApplyCheckedStep(
    absl::Span<const std::vector<SparseRows>* const> contributions,
    int64_t total_samples, int64_t step, SparseStepUndo* undo) {
  if (undo != nullptr && (config_.ttl_steps > 0 || config_.max_bytes > 0)) {
    return absl::FailedPreconditionError(
        "a step of a store with a TTL or memory limit cannot be undone");
  }
  // Per table: the ids in first-seen order and their gradient sums, summed
  // in the contributions' order.
  struct Sum {
    absl::flat_hash_map<uint64_t, uint32_t> slot;
    std::vector<uint64_t> ids;
    std::vector<float> grads;
  };
  std::vector<Sum> sums(tables_.size());
  for (const std::vector<SparseRows>* rows : contributions) {
    for (const SparseRows& part : *rows) {
      Sum& sum = sums[part.table];
      const int64_t dim = tables_[part.table]->dim();
      for (size_t i = 0; i < part.ids.size(); ++i) {
        auto [it, added] = sum.slot.try_emplace(
            part.ids[i], static_cast<uint32_t>(sum.ids.size()));
        if (added) {
          sum.ids.push_back(part.ids[i]);
          sum.grads.resize(sum.grads.size() + dim, 0.0f);
        }
        float* dst = sum.grads.data() + int64_t{it->second} * dim;
        const float* src = part.grads.data() + i * dim;
        for (int64_t k = 0; k < dim; ++k) dst[k] += src[k];
      }
    }
  }
  // Means first, all checked before any table changes: finite sums may
  // still overflow.
  const float n = static_cast<float>(total_samples);
  for (size_t t = 0; t < sums.size(); ++t) {
    for (size_t i = 0; i < sums[t].grads.size(); ++i) {
      float& g = sums[t].grads[i];
      g /= n;
      if (!std::isfinite(g)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "embedding table %d: the step's mean gradient for id %d "
            "overflows",
            t, sums[t].ids[i / tables_[t]->dim()]));
      }
    }
  }
  if (undo != nullptr) {
    undo->tables.clear();
    undo->undos.clear();
  }
  for (size_t t = 0; t < sums.size(); ++t) {
    if (sums[t].ids.empty()) continue;
    TableUndo* table_undo = nullptr;
    if (undo != nullptr) {
      undo->tables.push_back(static_cast<int32_t>(t));
      table_undo = &undo->undos.emplace_back();
    }
    // Unique, sized and finite: Apply's own checks pass.
    if (absl::Status s =
            tables_[t]->Apply(sums[t].ids, sums[t].grads, step, table_undo);
        !s.ok()) {
      if (undo != nullptr) {  // the tables updated before this one go back
        undo->tables.pop_back();
        undo->undos.pop_back();
        Undo(*undo);
      }
      return s;
    }
  }
  EnforceLimits(step);
  return absl::OkStatus();
}

int64_t SparseStore::Bytes() const {
  int64_t bytes = 0;
  for (const auto& table : tables_) {
    bytes += table->rows() * (table->RowBytes() + kRowOverheadBytes);
  }
  return bytes;
}

void SparseStore::EnforceLimits(int64_t step) {
  const int64_t ttl = config_.ttl_steps;
  if (ttl > 0 && step - last_ttl_scan_ >= std::max<int64_t>(1, ttl / 4)) {
    last_ttl_scan_ = step;
    for (auto& table : tables_) table->EvictUnseenSince(step - ttl);
  }
  if (config_.max_bytes <= 0 || Bytes() <= config_.max_bytes) return;
  // Bytes to free, oldest steps first, across the tables.
  int64_t excess =
      Bytes() - static_cast<int64_t>(kEvictTarget *
                                     static_cast<double>(config_.max_bytes));
  std::map<int64_t, std::vector<int64_t>> by_step;  // step -> rows per table
  for (size_t t = 0; t < tables_.size(); ++t) {
    for (const auto& [seen, count] : tables_[t]->LastSeenHistogram()) {
      auto& counts = by_step[seen];
      counts.resize(tables_.size(), 0);
      counts[t] = count;
    }
  }
  int64_t threshold = step + 1;  // evict every row seen before it
  std::vector<int64_t> partial(tables_.size(), 0);  // rows at the threshold
  for (const auto& [seen, counts] : by_step) {
    int64_t step_bytes = 0;
    for (size_t t = 0; t < tables_.size(); ++t) {
      step_bytes += counts[t] * (tables_[t]->RowBytes() + kRowOverheadBytes);
    }
    if (step_bytes < excess) {
      excess -= step_bytes;
      continue;
    }
    // Part of this step's rows: table by table.
    threshold = seen;
    for (size_t t = 0; t < tables_.size() && excess > 0; ++t) {
      const int64_t row_cost = tables_[t]->RowBytes() + kRowOverheadBytes;
      partial[t] = std::min(counts[t], (excess + row_cost - 1) / row_cost);
      excess -= partial[t] * row_cost;
    }
    break;
  }
  for (size_t t = 0; t < tables_.size(); ++t) {
    tables_[t]->EvictSeenBefore(threshold);
    if (partial[t] > 0) tables_[t]->EvictSeenAt(threshold, partial[t]);
  }
}

SparseStoreStats SparseStore::Stats() const {
  SparseStoreStats s;
  for (const auto& table : tables_) {
    SparseTableStats t = table->Stats();
    s.total.rows += t.rows;
    s.total.pending_ids += t.pending_ids;
    s.total.rows_created += t.rows_created;
    s.total.ids_admitted += t.ids_admitted;
    s.total.updates_dropped += t.updates_dropped;
    s.total.evicted_ttl += t.evicted_ttl;
    s.total.evicted_memory += t.evicted_memory;
    s.total.row_bytes += t.row_bytes;
    s.total.overhead_bytes += t.overhead_bytes;
    s.total.index_bytes += t.index_bytes;
    s.tables.push_back(t);
  }
  s.bytes = Bytes();
  return s;
}

std::vector<TableCheckpoint> SparseStore::Export() const {
  std::vector<TableCheckpoint> parts;
  for (const auto& table : tables_) {
    TableCheckpoint part;
    part.table = table->config().table;
    part.row_floats = static_cast<uint32_t>(table->RowFloats());
    part.ids.reserve(table->rows());
    part.last_seen.reserve(table->rows());
    part.values.reserve(table->rows() * table->RowFloats());
    table->ForEachRow(
        [&](uint64_t id, int64_t last_seen, absl::Span<const float> row) {
          part.ids.push_back(id);
          part.last_seen.push_back(last_seen);
          part.values.insert(part.values.end(), row.begin(), row.end());
        });
    table->ForEachPending([&](uint64_t id, int32_t count, int64_t last_seen) {
      part.pending_ids.push_back(id);
      part.pending_counts.push_back(count);
      part.pending_last_seen.push_back(last_seen);
    });
    part.counters = table->counters();
    parts.push_back(std::move(part));
  }
  return parts;
}

std::vector<std::unique_ptr<TablePartSource>> SparseStore::CheckpointSources()
    const {
  std::vector<std::unique_ptr<TablePartSource>> sources;
  for (const auto& table : tables_) {
    sources.push_back(std::make_unique<TableSource>(table.get()));
  }
  return sources;
}

absl::Status SparseStore::Restore(const std::vector<TableCheckpoint>& parts) {
  return Restore(ViewsOf(parts), nullptr);
}

absl::Status SparseStore::Restore(absl::Span<const TableCheckpointView> parts,
                                  const BytesDone& done,
                                  const TableRestoreOptions& options) {
  const TableScope scope = options.scope;
  const int64_t shift = options.last_seen_shift;
  const bool placed_only =
      scope == TableScope::kPlacedHere && config_.num_shards > 1;
  const auto here = [&](int32_t table, uint64_t id) {
    return ShardOfRow(table, id, config_.num_shards) == config_.shard_id;
  };
  if (parts.size() != tables_.size()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the checkpoint holds %d embedding tables, the job has %d",
        parts.size(), tables_.size()));
  }
  // Rows are copied out of the columns (which may sit at any alignment) and
  // their bytes handed to `done` this many at a time.
  constexpr size_t kBatch = 16384;
  // Build the new tables aside; swap them in only when all is well.
  absl::StatusOr<std::unique_ptr<SparseStore>> fresh = Create(config_);
  if (!fresh.ok()) return fresh.status();
  std::vector<uint64_t> ids;
  std::vector<float> values;
  for (size_t t = 0; t < parts.size(); ++t) {
    const TableCheckpointView& part = parts[t];
    SparseTable& table = *(*fresh)->tables_[t];
    const size_t row_floats = part.row_floats;
    if (part.table != static_cast<int32_t>(t) ||
        part.row_floats != static_cast<uint32_t>(table.RowFloats())) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "checkpoint part %d is table %d with %d floats per row; the job's "
          "table %d has %d",
          t, part.table, part.row_floats, t, table.RowFloats()));
    }
    const size_t rows = part.ids.size();
    if (part.last_seen.size() != rows ||
        part.values.size() != rows * row_floats) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "embedding table %d: checkpoint part of %d rows holds %d steps and "
          "%d values",
          part.table, rows, part.last_seen.size(), part.values.size()));
    }
    for (size_t first = 0; first < rows; first += kBatch) {
      const size_t n = std::min(kBatch, rows - first);
      ids.resize(n);
      part.ids.CopyTo(first, n, ids.data());
      if (!placed_only) {
        if (absl::Status s = CheckIdsPlaced(part.table, ids); !s.ok()) {
          return s;
        }
      }
      values.resize(n * row_floats);
      part.values.CopyTo(first * row_floats, n * row_floats, values.data());
      for (size_t i = 0; i < n; ++i) {
        if (placed_only && !here(part.table, ids[i])) continue;
        absl::Status s = table.InsertRow(
            ids[i], part.last_seen[first + i] - shift,
            absl::MakeConstSpan(values).subspan(i * row_floats, row_floats));
        if (!s.ok()) return s;
      }
      if (done) {
        done(part.ids.bytes(first, n));
        done(part.last_seen.bytes(first, n));
        done(part.values.bytes(first * row_floats, n * row_floats));
      }
    }
    const size_t pending = part.pending_ids.size();
    if (part.pending_counts.size() != pending ||
        part.pending_last_seen.size() != pending) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "embedding table %d: %d/%d/%d pending counters in its checkpoint "
          "part",
          part.table, pending, part.pending_counts.size(),
          part.pending_last_seen.size()));
    }
    for (size_t i = 0; i < pending; ++i) {
      if (placed_only && !here(part.table, part.pending_ids[i])) continue;
      absl::Status s =
          table.InsertPending(part.pending_ids[i], part.pending_counts[i],
                              part.pending_last_seen[i] - shift);
      if (!s.ok()) return s;
    }
    if (done) {
      done(part.pending_ids.bytes(0, pending));
      done(part.pending_counts.bytes(0, pending));
      done(part.pending_last_seen.bytes(0, pending));
    }
    if (part.counters.has_value() && scope == TableScope::kAll) {
      table.set_counters(*part.counters);
    }
  }
  tables_ = std::move((*fresh)->tables_);
  last_ttl_scan_ = -1;
  return absl::OkStatus();
}

SparseStoreConfig MakeSparseStoreConfig(const EmbeddingOptions& options,
                                        std::vector<int32_t> dims,
                                        uint64_t seed, int32_t shard_id,
                                        int32_t num_shards) {
  SparseStoreConfig config;
  config.shard_id = shard_id;
  config.num_shards = num_shards;
  config.dims = std::move(dims);
  config.optimizer = options.optimizer;
  config.seed = seed;
  config.admit_count = options.admit_count;
  config.ttl_steps = options.ttl_steps;
  config.max_bytes = options.max_mb * (int64_t{1} << 20);
  return config;
}

std::string EncodeSparseStore(const SparseStore& store) {
  std::string blob;
  EncodeTables(store.Export(), blob);
  return blob;
}

absl::StatusOr<std::unique_ptr<SparseStore>> DecodeSparseStore(
    absl::string_view blob, const SparseStoreConfig& config) {
  ASSIGN_OR_RETURN(std::vector<TableCheckpoint> tables,
                   DecodeTables(blob, /*with_counters=*/true));
  ASSIGN_OR_RETURN(std::unique_ptr<SparseStore> store,
                   SparseStore::Create(config));
  RETURN_IF_ERROR(store->Restore(tables));
  return store;
}

absl::Status SparseStoreRowSource::Read(absl::Span<const TableIds> tables,
                                        std::vector<std::vector<float>>& out) {
  out.resize(tables.size());
  for (size_t i = 0; i < tables.size(); ++i) {
    const TableIds& t = tables[i];
    if (t.table < 0 || t.table >= store_->num_tables()) {
      return absl::InvalidArgumentError(
          absl::StrCat("table ", t.table, " is not one of the ",
                       store_->num_tables(), " tables"));
    }
    out[i].resize(t.ids.size() * store_->table(t.table).dim());
    absl::Status read = store_->Read(t.table, t.ids, absl::MakeSpan(out[i]));
    if (!read.ok()) {
      return absl::Status(
          read.code(), absl::StrCat("table ", t.table, ": ", read.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status ModuloRowSource::Read(absl::Span<const TableIds> tables,
                                   std::vector<std::vector<float>>& out) {
  mapped_.resize(tables.size());
  std::vector<TableIds> mapped(tables.size());
  for (size_t i = 0; i < tables.size(); ++i) {
    mapped_[i].assign(tables[i].ids.begin(), tables[i].ids.end());
    for (uint64_t& id : mapped_[i]) id %= static_cast<uint64_t>(rows_);
    mapped[i] = TableIds{tables[i].table, mapped_[i]};
  }
  return source_->Read(mapped, out);
}

}  // namespace ferry
