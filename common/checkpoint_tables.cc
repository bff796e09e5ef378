#include "common/checkpoint_tables.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ferry {

static_assert(std::endian::native == std::endian::little,
              "checkpoints are written and read as little-endian");

namespace {

// Pending counters are gathered this many at a time per column.
constexpr size_t kPendingBatch = 8192;

// Writes fields to a sink, keeping the first error (later writes are
// skipped).
class SectionWriter {
 public:
  explicit SectionWriter(ByteSink& sink) : sink_(sink) {}

  template <typename T>
  void Put(T value) {
    char bytes[sizeof(T)];
    std::memcpy(bytes, &value, sizeof(T));
    Bytes(absl::string_view(bytes, sizeof(T)));
  }
  template <typename T>
  void PutSpan(absl::Span<const T> values) {
    if (values.empty()) return;  // data() may be null
    Bytes(absl::string_view(reinterpret_cast<const char*>(values.data()),
                            values.size() * sizeof(T)));
  }
  void Bytes(absl::string_view bytes) {
    if (status_.ok()) status_ = sink_.Append(bytes);
  }
  void Fail(absl::Status status) {
    if (status_.ok()) status_ = std::move(status);
  }
  bool ok() const { return status_.ok(); }
  const absl::Status& status() const { return status_; }

 private:
  ByteSink& sink_;
  absl::Status status_;
};

// One column of a source's rows (`column` picks the span of a run), run by
// run. False when the runs are not sized as the header says.
template <typename T, typename Column>
bool WriteRowColumn(const TablePartSource& t, SectionWriter& w, Column column) {
  uint64_t rows = 0;
  bool sized = true;
  const uint64_t row_floats = t.row_floats();
  t.ForEachRun([&](const TableRowRun& run) {
    const uint64_t n = run.ids.size();
    rows += n;
    sized = sized && run.last_seen.size() == n &&
            run.values.size() == n * row_floats && rows <= t.rows();
    if (sized) w.PutSpan<T>(column(run));
  });
  return sized && rows == t.rows();
}

// One column of a source's pending counters, kPendingBatch at a time.
// False when there are not pending() of them.
template <typename T, typename Field>
bool WritePendingColumn(const TablePartSource& t, SectionWriter& w,
                        Field field) {
  std::vector<T> batch;
  batch.reserve(std::min<uint64_t>(t.pending(), kPendingBatch));
  uint64_t n = 0;
  t.ForEachPending([&](uint64_t id, int32_t count, int64_t last_seen) {
    if (++n > t.pending()) return;  // more than claimed: refused below
    batch.push_back(field(id, count, last_seen));
    if (batch.size() == kPendingBatch) {
      w.PutSpan<T>(batch);
      batch.clear();
    }
  });
  w.PutSpan<T>(batch);
  return n == t.pending();
}

// Reads front to back; every read checks the bytes left first.
class SectionReader {
 public:
  explicit SectionReader(absl::string_view bytes) : bytes_(bytes) {}

  template <typename T>
  bool Get(T& value) {
    if (left() < sizeof(T)) return false;
    std::memcpy(&value, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  // A column of `n` elements of T in place; false when the bytes left
  // cannot hold them.
  template <typename T>
  bool GetColumn(uint64_t n, PackedColumn<T>& column) {
    if (n > left() / sizeof(T)) return false;
    column = PackedColumn<T>(bytes_.data() + pos_, n);
    pos_ += n * sizeof(T);
    return true;
  }
  size_t left() const { return bytes_.size() - pos_; }

 private:
  absl::string_view bytes_;
  size_t pos_ = 0;
};

}  // namespace

void TableCheckpointSource::ForEachRun(
    const std::function<void(const TableRowRun&)>& fn) const {
  if (part_->ids.empty()) return;
  fn(TableRowRun{part_->ids, part_->last_seen, part_->values});
}

void TableCheckpointSource::ForEachPending(
    const std::function<void(uint64_t, int32_t, int64_t)>& fn) const {
  for (size_t i = 0; i < part_->pending_ids.size(); ++i) {
    fn(part_->pending_ids[i], part_->pending_counts[i],
       part_->pending_last_seen[i]);
  }
}

TableCheckpointSources::TableCheckpointSources(
    const std::vector<TableCheckpoint>& tables) {
  sources_.reserve(tables.size());  // no reallocation: pointers_ point in
  for (const TableCheckpoint& t : tables) {
    pointers_.push_back(&sources_.emplace_back(&t));
  }
}

absl::Status ValidateTables(const std::vector<TableCheckpoint>& tables) {
  for (const TableCheckpoint& t : tables) {
    const size_t rows = t.ids.size();
    if (t.row_floats == 0 || t.row_floats > kMaxCheckpointRowFloats ||
        t.last_seen.size() != rows || t.values.size() != rows * t.row_floats ||
        t.pending_counts.size() != t.pending_ids.size() ||
        t.pending_last_seen.size() != t.pending_ids.size()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "embedding table %d: checkpoint part of %d rows x %d floats holds "
          "%d steps and %d values, %d/%d/%d pending",
          t.table, rows, t.row_floats, t.last_seen.size(), t.values.size(),
          t.pending_ids.size(), t.pending_counts.size(),
          t.pending_last_seen.size()));
    }
  }
  return ValidateTableSources(TableCheckpointSources(tables).pointers());
}

absl::Status ValidateTableSources(
    absl::Span<const TablePartSource* const> tables) {
  if (tables.size() > kMaxCheckpointTables) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%d embedding tables in a checkpoint; at most %d",
                        tables.size(), kMaxCheckpointTables));
  }
  for (const TablePartSource* t : tables) {
    if (t->row_floats() == 0 || t->row_floats() > kMaxCheckpointRowFloats) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "embedding table %d: %d floats per row in a "
          "checkpoint (1 to %d)",
          t->table(), t->row_floats(), kMaxCheckpointRowFloats));
    }
    if (t->counters().has_value() != tables[0]->counters().has_value()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "embedding table %d: event counters %s, table %d's %s", t->table(),
          t->counters().has_value() ? "present" : "absent", tables[0]->table(),
          tables[0]->counters().has_value() ? "present" : "absent"));
    }
  }
  return absl::OkStatus();
}

absl::Status WriteTables(absl::Span<const TablePartSource* const> tables,
                         bool with_counters, ByteSink& sink) {
  SectionWriter w(sink);
  const auto inconsistent = [](const TablePartSource& t, const char* what) {
    return absl::InternalError(absl::StrFormat(
        "embedding table %d changed while it was written: its %s do not "
        "match its header (%d rows, %d pending)",
        t.table(), what, t.rows(), t.pending()));
  };
  w.Put<uint32_t>(static_cast<uint32_t>(tables.size()));
  for (const TablePartSource* t : tables) {
    if (!w.ok()) break;
    w.Put<int32_t>(t->table());
    w.Put<uint32_t>(t->row_floats());
    w.Put<uint64_t>(t->rows());
    // Column by column, as the format lays them out: three passes.
    if (!WriteRowColumn<uint64_t>(*t, w,
                                  [](const TableRowRun& r) { return r.ids; }) ||
        !WriteRowColumn<int64_t>(
            *t, w, [](const TableRowRun& r) { return r.last_seen; }) ||
        !WriteRowColumn<float>(*t, w,
                               [](const TableRowRun& r) { return r.values; })) {
      w.Fail(inconsistent(*t, "rows"));
      break;
    }
    w.Put<uint64_t>(t->pending());
    if (!WritePendingColumn<uint64_t>(
            *t, w, [](uint64_t id, int32_t, int64_t) { return id; }) ||
        !WritePendingColumn<int32_t>(
            *t, w, [](uint64_t, int32_t count, int64_t) { return count; }) ||
        !WritePendingColumn<int64_t>(
            *t, w, [](uint64_t, int32_t, int64_t seen) { return seen; })) {
      w.Fail(inconsistent(*t, "pending counters"));
      break;
    }
    if (!with_counters) continue;
    const std::optional<TableCounters> c = t->counters();
    if (!c.has_value()) {
      w.Fail(inconsistent(*t, "event counters"));
      break;
    }
    for (int64_t v : {c->rows_created, c->ids_admitted, c->updates_dropped,
                      c->evicted_ttl, c->evicted_memory}) {
      w.Put<int64_t>(v);
    }
  }
  return w.status();
}

void EncodeTables(const std::vector<TableCheckpoint>& tables,
                  std::string& out) {
  const TableCheckpointSources sources(tables);
  StringByteSink sink(&out);
  const bool with_counters = !tables.empty() && tables[0].counters.has_value();
  // A string sink does not fail and valid tables are consistent.
  WriteTables(sources.pointers(), with_counters, sink).IgnoreError();
}

TableCheckpointView TableCheckpointView::Of(const TableCheckpoint& part) {
  TableCheckpointView view;
  view.table = part.table;
  view.row_floats = part.row_floats;
  view.ids = PackedColumn<uint64_t>::Of(part.ids);
  view.last_seen = PackedColumn<int64_t>::Of(part.last_seen);
  view.values = PackedColumn<float>::Of(part.values);
  view.pending_ids = PackedColumn<uint64_t>::Of(part.pending_ids);
  view.pending_counts = PackedColumn<int32_t>::Of(part.pending_counts);
  view.pending_last_seen = PackedColumn<int64_t>::Of(part.pending_last_seen);
  view.counters = part.counters;
  return view;
}

std::vector<TableCheckpointView> ViewsOf(
    const std::vector<TableCheckpoint>& parts) {
  std::vector<TableCheckpointView> views;
  views.reserve(parts.size());
  for (const TableCheckpoint& part : parts) {
    views.push_back(TableCheckpointView::Of(part));
  }
  return views;
}

TableCheckpoint TableCheckpointView::Copy() const {
  TableCheckpoint part;
  part.table = table;
  part.row_floats = row_floats;
  part.ids = ids.ToVector();
  part.last_seen = last_seen.ToVector();
  part.values = values.ToVector();
  part.pending_ids = pending_ids.ToVector();
  part.pending_counts = pending_counts.ToVector();
  part.pending_last_seen = pending_last_seen.ToVector();
  part.counters = counters;
  return part;
}

absl::StatusOr<std::vector<TableCheckpoint>> DecodeTables(
    absl::string_view section, bool with_counters) {
  absl::StatusOr<std::vector<TableCheckpointView>> views =
      DecodeTableViews(section, with_counters);
  if (!views.ok()) return views.status();
  std::vector<TableCheckpoint> tables;
  tables.reserve(views->size());
  for (const TableCheckpointView& view : *views) {
    tables.push_back(view.Copy());
  }
  return tables;
}

absl::StatusOr<std::vector<TableCheckpointView>> DecodeTableViews(
    absl::string_view section, bool with_counters) {
  SectionReader r(section);
  const auto lost = [](const std::string& what) {
    return absl::DataLossError(
        absl::StrCat("checkpoint embedding tables: ", what));
  };
  uint32_t count = 0;
  if (!r.Get(count)) return lost("the table count is missing");
  if (count > kMaxCheckpointTables) {
    return lost(
        absl::StrFormat("%d tables; at most %d", count, kMaxCheckpointTables));
  }
  std::vector<TableCheckpointView> tables;
  for (uint32_t i = 0; i < count; ++i) {
    TableCheckpointView t;
    uint64_t rows = 0, pending = 0;
    if (!r.Get(t.table) || !r.Get(t.row_floats) || !r.Get(rows)) {
      return lost(
          absl::StrFormat("table %d of %d ends in its header", i + 1, count));
    }
    if (t.row_floats == 0 || t.row_floats > kMaxCheckpointRowFloats) {
      return lost(absl::StrFormat("table %d: %d floats per row", t.table,
                                  t.row_floats));
    }
    // Rows take 16 bytes + their floats: refuse counts the bytes cannot
    // hold before allocating anything.
    const uint64_t row_bytes = 16 + uint64_t{t.row_floats} * sizeof(float);
    if (rows > r.left() / row_bytes || !r.GetColumn(rows, t.ids) ||
        !r.GetColumn(rows, t.last_seen) ||
        !r.GetColumn(rows * t.row_floats, t.values)) {
      return lost(
          absl::StrFormat("table %d claims %d rows the file does not "
                          "hold",
                          t.table, rows));
    }
    if (!r.Get(pending) || pending > r.left() / 20 ||
        !r.GetColumn(pending, t.pending_ids) ||
        !r.GetColumn(pending, t.pending_counts) ||
        !r.GetColumn(pending, t.pending_last_seen)) {
      return lost(
          absl::StrFormat("table %d: admission counters cut short", t.table));
    }
    if (with_counters) {
      TableCounters c;
      if (!r.Get(c.rows_created) || !r.Get(c.ids_admitted) ||
          !r.Get(c.updates_dropped) || !r.Get(c.evicted_ttl) ||
          !r.Get(c.evicted_memory)) {
        return lost(
            absl::StrFormat("table %d: event counters cut short", t.table));
      }
      t.counters = c;
    }
    tables.push_back(std::move(t));
  }
  if (r.left() != 0) {
    return lost(absl::StrFormat("%d bytes after the last table", r.left()));
  }
  return tables;
}

}  // namespace ferry
