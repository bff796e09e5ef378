#include "common/checkpoint_tables.h"

#include <bit>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ferry {

static_assert(std::endian::native == std::endian::little,
              "checkpoints are written and read as little-endian");

namespace {

template <typename T>
void Put(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

template <typename T>
void PutArray(std::string& out, const std::vector<T>& values) {
  if (values.empty()) return;  // data() may be null
  out.append(reinterpret_cast<const char*>(values.data()),
             values.size() * sizeof(T));
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
  // `n` elements of T, refused (false) before allocating when the bytes
  // left cannot hold them.
  template <typename T>
  bool GetArray(uint64_t n, std::vector<T>& values) {
    if (n > left() / sizeof(T)) return false;
    values.resize(n);
    if (n > 0) std::memcpy(values.data(), bytes_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
    return true;
  }
  size_t left() const { return bytes_.size() - pos_; }

 private:
  absl::string_view bytes_;
  size_t pos_ = 0;
};

}  // namespace

absl::Status ValidateTables(const std::vector<TableCheckpoint>& tables) {
  if (tables.size() > kMaxCheckpointTables) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%d embedding tables in a checkpoint; at most %d",
                        tables.size(), kMaxCheckpointTables));
  }
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
  return absl::OkStatus();
}

void EncodeTables(const std::vector<TableCheckpoint>& tables,
                  std::string& out) {
  Put<uint32_t>(out, static_cast<uint32_t>(tables.size()));
  for (const TableCheckpoint& t : tables) {
    Put<int32_t>(out, t.table);
    Put<uint32_t>(out, t.row_floats);
    Put<uint64_t>(out, t.ids.size());
    PutArray(out, t.ids);
    PutArray(out, t.last_seen);
    PutArray(out, t.values);
    Put<uint64_t>(out, t.pending_ids.size());
    PutArray(out, t.pending_ids);
    PutArray(out, t.pending_counts);
    PutArray(out, t.pending_last_seen);
  }
}

absl::StatusOr<std::vector<TableCheckpoint>> DecodeTables(
    absl::string_view section) {
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
  std::vector<TableCheckpoint> tables;
  for (uint32_t i = 0; i < count; ++i) {
    TableCheckpoint t;
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
    if (rows > r.left() / row_bytes || !r.GetArray(rows, t.ids) ||
        !r.GetArray(rows, t.last_seen) ||
        !r.GetArray(rows * t.row_floats, t.values)) {
      return lost(
          absl::StrFormat("table %d claims %d rows the file does not "
                          "hold",
                          t.table, rows));
    }
    if (!r.Get(pending) || pending > r.left() / 20 ||
        !r.GetArray(pending, t.pending_ids) ||
        !r.GetArray(pending, t.pending_counts) ||
        !r.GetArray(pending, t.pending_last_seen)) {
      return lost(
          absl::StrFormat("table %d: admission counters cut short", t.table));
    }
    tables.push_back(std::move(t));
  }
  if (r.left() != 0) {
    return lost(absl::StrFormat("%d bytes after the last table", r.left()));
  }
  return tables;
}

}  // namespace ferry
