#include "ps/sparse_table.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/hash/hash.h"
#include "absl/strings/str_format.h"

namespace ferry {
namespace {

// Row numbers are uint32; keep clear of the top.
constexpr int64_t kMaxRowsPerTable = int64_t{1} << 31;

}  // namespace

size_t SparseTable::IndexHash::operator()(uint32_t row) const {
  return absl::Hash<uint64_t>{}(table->IdOf(row));
}
size_t SparseTable::IndexHash::operator()(Key key) const {
  return absl::Hash<uint64_t>{}(key.id);
}
bool SparseTable::IndexEq::operator()(uint32_t row, Key key) const {
  return table->IdOf(row) == key.id;
}

absl::StatusOr<std::unique_ptr<SparseTable>> SparseTable::Create(
    const SparseTableConfig& config) {
  if (config.table < 0 || config.table >= kMaxEmbeddingTables) {
    return absl::InvalidArgumentError(
        absl::StrFormat("embedding table id %d outside [0, %d)", config.table,
                        kMaxEmbeddingTables));
  }
  if (config.dim < 1 || config.dim > kMaxEmbeddingDim) {
    return absl::InvalidArgumentError(
        absl::StrFormat("embedding table %d: dim %d outside [1, %d]",
                        config.table, config.dim, kMaxEmbeddingDim));
  }
  if (!std::isfinite(config.init_scale) || config.init_scale < 0.0f) {
    return absl::InvalidArgumentError(
        absl::StrFormat("embedding table %d: init_scale %g must be >= 0",
                        config.table, config.init_scale));
  }
  if (absl::Status s = ValidateRowOptimizer(config.optimizer); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("embedding table %d: %s", config.table, s.message()));
  }
  SparseTableConfig resolved = config;
  resolved.init_scale = ResolvedInitScale(config.init_scale, config.dim);
  return std::unique_ptr<SparseTable>(new SparseTable(resolved));
}

SparseTable::SparseTable(const SparseTableConfig& config)
    : config_(config),
      stride_(config.dim + RowStateFloats(config.optimizer.kind, config.dim)),
      index_(0, IndexHash{this}, IndexEq{this}) {}

bool SparseTable::Admitted(uint64_t id) const {
  if (config_.admit_count <= 1) return true;
  auto it = pending_.find(id);
  // Counters are erased when the row is created; a counter that reached
  // the threshold stays until then.
  return it != pending_.end() && it->second.count >= config_.admit_count;
}

absl::Status SparseTable::Read(absl::Span<const uint64_t> ids,
                               absl::Span<float> out) const {
  const int dim = config_.dim;
  if (out.size() != ids.size() * dim) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "embedding table %d: read of %d ids into %d floats (dim %d)",
        config_.table, ids.size(), out.size(), dim));
  }
  std::vector<float> fresh(stride_);
  for (size_t i = 0; i < ids.size(); ++i) {
    float* dst = out.data() + i * dim;
    auto it = index_.find(Key{ids[i]});
    if (it != index_.end()) {
      std::copy_n(RowData(*it), dim, dst);
    } else if (Admitted(ids[i])) {
      InitRow(fresh.data(), config_.seed, config_.table, ids[i], dim,
              config_.init_scale, config_.optimizer);
      std::copy_n(fresh.data(), dim, dst);
    } else {
      std::fill_n(dst, dim, 0.0f);
    }
  }
  return absl::OkStatus();
}

absl::Status SparseTable::Apply(absl::Span<const uint64_t> ids,
                                absl::Span<const float> grads, int64_t step,
                                TableUndo* undo) {
  const int dim = config_.dim;
  if (grads.size() != ids.size() * dim) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "embedding table %d: %d ids with %d gradient floats (dim %d)",
        config_.table, ids.size(), grads.size(), dim));
  }
  // Check everything before changing anything.
  absl::flat_hash_set<uint64_t> seen;
  seen.reserve(ids.size());
  int64_t new_rows = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!seen.insert(ids[i]).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("embedding table %d: id %d appears twice in one "
                          "update",
                          config_.table, ids[i]));
    }
    for (int k = 0; k < dim; ++k) {
      if (!std::isfinite(grads[i * dim + k])) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "embedding table %d: non-finite gradient for id %d (element %d)",
            config_.table, ids[i], k));
      }
    }
    if (!index_.contains(Key{ids[i]}) && Admitted(ids[i])) ++new_rows;
  }
  if (rows_ + new_rows > kMaxRowsPerTable) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("embedding table %d would hold %d rows, more than %d",
                        config_.table, rows_ + new_rows, kMaxRowsPerTable));
  }
  if (undo != nullptr) RecordUndo(ids, *undo);
  for (size_t i = 0; i < ids.size(); ++i) {
    const uint64_t id = ids[i];
    auto it = index_.find(Key{id});
    uint32_t row;
    if (it != index_.end()) {
      row = *it;
    } else if (Admitted(id)) {
      if (config_.admit_count > 1) pending_.erase(id);
      row = AddRow(id, step);
      InitRow(RowData(row), config_.seed, config_.table, id, dim,
              config_.init_scale, config_.optimizer);
      ++counts_.rows_created;
    } else {
      Pending& p = pending_[id];
      p.last_seen = step;
      if (++p.count >= config_.admit_count) ++counts_.ids_admitted;
      ++counts_.updates_dropped;
      continue;
    }
    ApplyRowUpdate(RowData(row), grads.data() + i * dim, dim,
                   config_.optimizer);
    LastSeenOf(row) = step;
  }
  return absl::OkStatus();
}

void SparseTable::RecordUndo(absl::Span<const uint64_t> ids,
                             TableUndo& undo) const {
  undo.entries.clear();
  undo.rows.clear();
  undo.counters = counters();
  undo.entries.reserve(ids.size());
  for (const uint64_t id : ids) {
    TableUndo::Entry entry{.id = id};
    if (auto it = index_.find(Key{id}); it != index_.end()) {
      entry.was = TableUndo::Was::kRow;
      entry.last_seen = LastSeenOf(*it);
      const float* row = RowData(*it);
      undo.rows.insert(undo.rows.end(), row, row + stride_);
    } else if (auto p = pending_.find(id); p != pending_.end()) {
      entry.was = TableUndo::Was::kPending;
      entry.count = p->second.count;
      entry.last_seen = p->second.last_seen;
    }
    undo.entries.push_back(entry);
  }
}

void SparseTable::Undo(const TableUndo& undo) {
  int64_t next_row = 0;  // of undo.rows, in entry order
  for (const TableUndo::Entry& entry : undo.entries) {
    auto it = index_.find(Key{entry.id});
    switch (entry.was) {
      case TableUndo::Was::kRow: {
        // Apply never removes a row, so it is still stored.
        const uint32_t row = *it;
        std::copy_n(undo.rows.data() + next_row * stride_, stride_,
                    RowData(row));
        LastSeenOf(row) = entry.last_seen;
        ++next_row;
        break;
      }
      case TableUndo::Was::kPending:
        if (it != index_.end()) RemoveRow(*it);
        pending_[entry.id] = Pending{entry.count, entry.last_seen};
        break;
      case TableUndo::Was::kAbsent:
        if (it != index_.end()) RemoveRow(*it);
        pending_.erase(entry.id);
        break;
    }
  }
  set_counters(undo.counters);
}

uint32_t SparseTable::AddRow(uint64_t id, int64_t last_seen) {
  const uint32_t row = static_cast<uint32_t>(rows_);
  if (row / kBlockRows >= blocks_.size()) {
    Block block;
    block.values = std::make_unique<float[]>(int64_t{kBlockRows} * stride_);
    block.ids = std::make_unique<uint64_t[]>(kBlockRows);
    block.last_seen = std::make_unique<int64_t[]>(kBlockRows);
    blocks_.push_back(std::move(block));
  }
  IdOf(row) = id;
  LastSeenOf(row) = last_seen;
  ++rows_;
  index_.insert(row);
  return row;
}

void SparseTable::RemoveRow(uint32_t row) {
  const uint32_t last = static_cast<uint32_t>(rows_ - 1);
  index_.erase(row);
  if (row != last) {
    index_.erase(last);
    std::copy_n(RowData(last), stride_, RowData(row));
    IdOf(row) = IdOf(last);
    LastSeenOf(row) = LastSeenOf(last);
    index_.insert(row);
  }
  --rows_;
  // Keep one spare block so that a table hovering at a block boundary does
  // not allocate and free a block per row.
  const size_t needed =
      static_cast<size_t>((rows_ + kBlockRows - 1) / kBlockRows);
  while (blocks_.size() > needed + 1) blocks_.pop_back();
}

int64_t SparseTable::RemoveRowsIf(const std::function<bool(uint32_t)>& evict,
                                  int64_t n) {
  int64_t removed = 0;
  uint32_t row = 0;
  while (row < rows_ && removed < n) {
    if (evict(row)) {
      RemoveRow(row);  // the last row moved here: look at it next
      ++removed;
    } else {
      ++row;
    }
  }
  return removed;
}

int64_t SparseTable::EvictUnseenSince(int64_t step) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    auto here = it++;
    if (here->second.last_seen < step) pending_.erase(here);
  }
  const int64_t removed =
      RemoveRowsIf([&](uint32_t row) { return LastSeenOf(row) < step; }, rows_);
  counts_.evicted_ttl += removed;
  return removed;
}

absl::flat_hash_map<int64_t, int64_t> SparseTable::LastSeenHistogram() const {
  absl::flat_hash_map<int64_t, int64_t> histogram;
  for (uint32_t row = 0; row < rows_; ++row) ++histogram[LastSeenOf(row)];
  return histogram;
}

int64_t SparseTable::EvictSeenBefore(int64_t step) {
  const int64_t removed =
      RemoveRowsIf([&](uint32_t row) { return LastSeenOf(row) < step; }, rows_);
  counts_.evicted_memory += removed;
  return removed;
}

int64_t SparseTable::EvictSeenAt(int64_t step, int64_t n) {
  const int64_t removed =
      RemoveRowsIf([&](uint32_t row) { return LastSeenOf(row) == step; }, n);
  counts_.evicted_memory += removed;
  return removed;
}

int64_t SparseTable::EvictOldest(int64_t n) {
  if (n <= 0) return 0;
  const absl::flat_hash_map<int64_t, int64_t> histogram = LastSeenHistogram();
  const std::map<int64_t, int64_t> by_step(histogram.begin(), histogram.end());
  int64_t removed = 0;
  for (const auto& [step, count] : by_step) {
    if (removed >= n) break;
    removed += EvictSeenAt(step, n - removed);
  }
  return removed;
}

SparseTableStats SparseTable::Stats() const {
  SparseTableStats s = counts_;
  s.rows = rows_;
  s.pending_ids = static_cast<int64_t>(pending_.size());
  s.row_bytes = rows_ * RowBytes();
  const int64_t block_slots = static_cast<int64_t>(blocks_.size()) * kBlockRows;
  s.index_bytes =
      static_cast<int64_t>(index_.capacity()) * (sizeof(uint32_t) + 1);
  s.overhead_bytes = block_slots * (RowBytes() + 16) - s.row_bytes +
                     s.index_bytes +
                     static_cast<int64_t>(pending_.capacity()) *
                         (sizeof(std::pair<uint64_t, Pending>) + 1);
  return s;
}

void SparseTable::ForEachRow(
    const std::function<void(uint64_t, int64_t, absl::Span<const float>)>& fn)
    const {
  for (uint32_t row = 0; row < rows_; ++row) {
    fn(IdOf(row), LastSeenOf(row),
       absl::Span<const float>(RowData(row), stride_));
  }
}

void SparseTable::ForEachBlock(
    const std::function<void(const TableRowRun&)>& fn) const {
  for (int64_t first = 0; first < rows_; first += kBlockRows) {
    const Block& block = blocks_[first / kBlockRows];
    const size_t n =
        static_cast<size_t>(std::min<int64_t>(kBlockRows, rows_ - first));
    fn(TableRowRun{absl::MakeConstSpan(block.ids.get(), n),
                   absl::MakeConstSpan(block.last_seen.get(), n),
                   absl::MakeConstSpan(block.values.get(), n * stride_)});
  }
}

TableCounters SparseTable::counters() const {
  return TableCounters{counts_.rows_created, counts_.ids_admitted,
                       counts_.updates_dropped, counts_.evicted_ttl,
                       counts_.evicted_memory};
}

void SparseTable::set_counters(const TableCounters& c) {
  counts_.rows_created = c.rows_created;
  counts_.ids_admitted = c.ids_admitted;
  counts_.updates_dropped = c.updates_dropped;
  counts_.evicted_ttl = c.evicted_ttl;
  counts_.evicted_memory = c.evicted_memory;
}

void SparseTable::ForEachPending(
    const std::function<void(uint64_t, int32_t, int64_t)>& fn) const {
  for (const auto& [id, p] : pending_) fn(id, p.count, p.last_seen);
}

absl::Status SparseTable::InsertRow(uint64_t id, int64_t last_seen,
                                    absl::Span<const float> row) {
  if (static_cast<int64_t>(row.size()) != stride_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("embedding table %d: row %d has %d floats, expected %d",
                        config_.table, id, row.size(), stride_));
  }
  if (index_.contains(Key{id})) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "embedding table %d: row %d is already stored", config_.table, id));
  }
  for (float v : row) {
    if (!std::isfinite(v)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("embedding table %d: row %d holds a non-finite value",
                          config_.table, id));
    }
  }
  if (rows_ >= kMaxRowsPerTable) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "embedding table %d holds %d rows already", config_.table, rows_));
  }
  pending_.erase(id);
  const uint32_t r = AddRow(id, last_seen);
  std::copy(row.begin(), row.end(), RowData(r));
  return absl::OkStatus();
}

absl::Status SparseTable::InsertPending(uint64_t id, int32_t count,
                                        int64_t last_seen) {
  // A counter at the threshold is an admitted id without a row yet.
  if (config_.admit_count <= 1 || count < 1 || count > config_.admit_count) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "embedding table %d: pending count %d for id %d outside [1, %d]",
        config_.table, count, id, config_.admit_count));
  }
  if (index_.contains(Key{id})) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "embedding table %d: id %d has a row and a pending count",
        config_.table, id));
  }
  pending_[id] = Pending{count, last_seen};
  return absl::OkStatus();
}

}  // namespace ferry
